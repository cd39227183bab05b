import type { Client } from '@temporalio/client';
import { Prisma, type Db } from '../platform/db.js';
import { startDocumentPipeline } from './pipeline-runs.js';
import { moveQueueMarkers } from './queue-markers.js';

/**
 * Embedding status of documents and knowledge bases (docs/api/retrieval.md, "Status").
 *
 * Document embedding_status: null (no final rewritten content yet) → pending (final content saved,
 * embedding queued) → in_progress (the embed step runs) → success (all chunks written and
 * searchable) or failed (embedding_error says why). failed → pending on retry-failed, the `retry`
 * signal or a single-document embed; success → pending when new final content is saved, on a
 * forced single-document embed, or when the KB is re-embedded for a new embedding profile.
 *
 * KB embedding_status is derived from its documents: in_progress while any document is pending or
 * in_progress, else fail if any failed, else success if any is embedded, else none; delete_pending
 * while the KB is being deleted.
 */
export async function refreshKnowledgeBaseEmbeddingStatus(db: Pick<Db, '$executeRaw'>, knowledgeBaseId: string): Promise<void> {
  // One statement; each EXISTS stops at the first matching row of the (knowledgeBaseId,
  // embeddingStatus) index, so its cost does not grow with the KB.
  const has = (statuses: string[]) =>
    Prisma.sql`EXISTS (SELECT 1 FROM "documents" WHERE "knowledgeBaseId" = ${knowledgeBaseId}::uuid AND "embeddingStatus" = ANY(${statuses}::text[]) AND "deletionRequestedAt" IS NULL)`;
  // A status that did not change is not written (the KB row is the budget ledger's lock: no needless row versions).
  await db.$executeRaw`
    UPDATE "knowledge_bases" kb SET "embeddingStatus" = s.status
    FROM (SELECT CASE WHEN ${has(['pending', 'in_progress'])} THEN 'in_progress' WHEN ${has(['failed'])} THEN 'fail' WHEN ${has(['success'])} THEN 'success' ELSE 'none' END AS status) s
    WHERE kb."id" = ${knowledgeBaseId}::uuid AND kb."deletionRequestedAt" IS NULL AND kb."embeddingStatus" IS DISTINCT FROM s.status`;
}

/** Puts a document into the embedding queue and starts its `embed` run in the worker. */
export async function queueEmbedding(deps: { db: Db; temporal: Client; taskQueue: string }, partner: string, doc: { id: string; knowledgeBaseId: string }): Promise<string> {
  await deps.db.$transaction([
    deps.db.document.update({ where: { id: doc.id }, data: { embeddingStatus: 'pending', embeddingError: null } }),
    moveQueueMarkers(deps.db, doc.id, { add: ['embedding'] }),
  ]);
  return startDocumentPipeline(deps, { documentId: doc.id, knowledgeBaseId: doc.knowledgeBaseId, partner, steps: ['embed'], requestCharacterLimit: null });
}
