import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { Db } from '../platform/db.js';
import { conflict } from '../platform/errors.js';
import type { EmbeddingProvider } from '../providers/embeddings.js';
import { isWorkflowRunning } from '../platform/temporal.js';
import { documentWorkflowId, retrySignal } from '../contracts/document-pipeline.js';
import { findDocument, findKnowledgeBase } from '../knowledge/lookup.js';
import { queueEmbedding, refreshKnowledgeBaseEmbeddingStatus } from '../knowledge/embedding-queue.js';
import { presentDocument } from '../knowledge/presenters.js';
import { standDownWaitingRun } from '../knowledge/pipeline-runs.js';

export interface EmbeddingDeps {
  db: Db;
  temporal: Client;
  taskQueue: string;
  embedder: EmbeddingProvider;
}

/** The aggregate embedding status of spec 2.6. Reads only; starts nothing. */
async function knowledgeBaseEmbeddingStatus(db: Db, knowledgeBaseId: string) {
  const where = { knowledgeBaseId, deletionRequestedAt: null };
  const [kb, eligible, pending, failed, embedded, totals, lastFailure] = await Promise.all([
    db.knowledgeBase.findUniqueOrThrow({ where: { id: knowledgeBaseId }, include: { embeddingProfile: true } }),
    db.document.count({ where: { ...where, fileRewritten: { not: null } } }),
    db.document.count({ where: { ...where, embeddingStatus: { in: ['pending', 'in_progress'] } } }),
    db.document.count({ where: { ...where, embeddingStatus: 'failed' } }),
    db.document.count({ where: { ...where, embeddingStatus: 'success' } }),
    db.document.aggregate({ where: { ...where, embeddingStatus: 'success' }, _max: { embeddedAt: true }, _sum: { embeddingChunkCount: true, embeddingDenseVectorCount: true } }),
    db.document.findFirst({ where: { ...where, embeddingStatus: 'failed' }, orderBy: { updatedAt: 'desc' }, select: { embeddingError: true, updatedAt: true } }),
  ]);
  // The stored last_update_status says a run began or succeeded; failures are recorded on the
  // document by the pipeline, so a run that is no longer active reads its outcome from them.
  let lastStatus = kb.embeddingLastUpdateStatus as 'in_progress' | 'success' | 'fail' | null;
  if (pending > 0) lastStatus = 'in_progress';
  else if (lastStatus === 'in_progress') lastStatus = failed > 0 ? 'fail' : 'success';
  if (lastFailure && kb.embeddingLastUpdateAt && lastFailure.updatedAt > kb.embeddingLastUpdateAt && pending === 0) lastStatus = 'fail';
  const chunkCount = totals._sum.embeddingChunkCount ?? 0;
  const details = { chunk_count: chunkCount, point_count: totals._sum.embeddingDenseVectorCount ?? 0 };
  return {
    embedding_status: kb.deletionRequestedAt ? 'delete_pending' : kb.embeddingStatus,
    knowledge_base_id: kb.id,
    embedding_profile_id: kb.embeddingProfile?.id ?? null,
    embedding_profile_name: kb.embeddingProfile?.name ?? null,
    last_successful_update_time: totals._max.embeddedAt?.toISOString() ?? null,
    last_update_time: (lastFailure && kb.embeddingLastUpdateAt && lastFailure.updatedAt > kb.embeddingLastUpdateAt ? lastFailure.updatedAt : kb.embeddingLastUpdateAt)?.toISOString() ?? null,
    last_update_status: lastStatus,
    last_update_details: details,
    last_successful_details: details,
    eligible_document_count: eligible,
    pending_document_count: pending,
    failed_document_count: failed,
    embedded_document_count: embedded,
    last_error: lastFailure?.embeddingError ?? kb.embeddingLastError ?? null,
  };
}

export async function embeddingStatusOf(db: Db, partner: string, kbName: string) {
  const { kb } = await findKnowledgeBase(db, partner, kbName);
  return knowledgeBaseEmbeddingStatus(db, kb.id);
}


/**
 * Queues every document whose embedding failed. A failed step whose pipeline still waits for a
 * retry gets the `retry` signal; a closed one gets a fresh `embed` run.
 */
export async function retryFailedEmbeddings(deps: EmbeddingDeps, partner: string, kbName: string) {
  const { kb } = await findKnowledgeBase(deps.db, partner, kbName);
  if (kb.deletionRequestedAt) throw conflict(`knowledge base ${kb.name} is being deleted`);
  const failed = await deps.db.document.findMany({ where: { knowledgeBaseId: kb.id, deletionRequestedAt: null, embeddingStatus: 'failed', fileRewritten: { not: null } } });
  let queued = 0;
  for (const doc of failed) {
    const workflowId = documentWorkflowId(doc.id);
    if (await isWorkflowRunning(deps.temporal, workflowId)) {
      await deps.temporal.workflow.getHandle(workflowId).signal(retrySignal);
      queued++;
      continue;
    }
    try {
      await queueEmbedding(deps, partner, doc);
      queued++;
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }
  await refreshKnowledgeBaseEmbeddingStatus(deps.db, kb.id);
  return { queued, embedding_info: await knowledgeBaseEmbeddingStatus(deps.db, kb.id) };
}

/**
 * Embeds one document. Rejected (409) without final rewritten content, while digitize or rewrite
 * work is active, or while another run of its pipeline works or is paused; a run that only waits (a
 * failed step awaiting `retry`, a budget block) stands down for it, as for POST /api/queue/process. force=false leaves a document
 * alone that is already embedded with the KB's profile (or queued): job_id is then null.
 */
export async function embedSingleDocument(deps: EmbeddingDeps, partner: string, kbName: string, documentId: string, force: boolean, admin: boolean) {
  const { kb, document: doc } = await findDocument(deps.db, partner, kbName, documentId);
  if (kb.deletionRequestedAt || doc.deletionRequestedAt) throw conflict('the document is being deleted');
  if (!doc.fileRewritten) throw conflict('the document has no final rewritten content to embed');
  const busy = doc.inQueues.filter((q) => q === 'digitize' || q === 'rewrite');
  if (busy.length) throw conflict(`the document is still in the ${busy.join(' and ')} queue`);
  const upToDate = doc.embeddingStatus === 'success' && (kb.embeddingProfileId === null || doc.embeddingProfileId === kb.embeddingProfileId);
  const queuedAlready = doc.embeddingStatus === 'pending' || doc.embeddingStatus === 'in_progress';
  let jobId: string | null = null;
  if (force || !(upToDate || queuedAlready)) {
    await standDownWaitingRun(deps.temporal, doc.id, doc);
    try {
      jobId = await queueEmbedding(deps, partner, doc);
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError) throw conflict('the document is being processed; try again when its current run has finished');
      throw err;
    }
    await refreshKnowledgeBaseEmbeddingStatus(deps.db, kb.id);
  }
  const current = await deps.db.document.findUniqueOrThrow({ where: { id: doc.id }, include: { folder: true } });
  return { job_id: jobId, queued: jobId !== null, document: presentDocument(current, { admin }), embedding_info: await knowledgeBaseEmbeddingStatus(deps.db, kb.id) };
}
