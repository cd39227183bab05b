import { Context, ApplicationFailure } from '@temporalio/activity';
import { CancelledFailure } from '@temporalio/common';
import { franc } from 'franc-min';
import type { Db } from '../lib/db.js';
import type { FileStorage } from '../lib/storage.js';
import { documentFiles } from '../lib/storage.js';
import type { VectorIndex } from '../lib/providers/vector-index.js';
import type { EmbeddingProvider } from '../lib/providers/embeddings.js';
import { chunkText } from '../lib/kb/chunking.js';
import { refreshKnowledgeBaseEmbeddingStatus } from '../lib/kb/embedding-status.js';
import { DOCUMENT_GONE, PERMANENT, type DocumentRef } from './documents.js';

export interface EmbeddingActivityDeps {
  db: Db;
  storage: FileStorage;
  index: VectorIndex;
  embedder: EmbeddingProvider;
}

const EMBED_BATCH = 64;

/** Embedding of final rewritten content into the hybrid index. */
export function createEmbeddingActivities({ db, storage, index, embedder }: EmbeddingActivityDeps) {
  async function loadDocument(documentId: string) {
    const doc = await db.document.findUnique({ where: { id: documentId }, include: { knowledgeBase: true } });
    if (!doc || doc.deletionRequestedAt) throw ApplicationFailure.nonRetryable(`document ${documentId} no longer exists`, DOCUMENT_GONE);
    return doc;
  }

  return {
    /**
     * Chunks the final rewritten content, embeds it and writes it to the index. Chunk IDs are
     * deterministic and progress is heartbeated per batch, so a retry after a crash resumes at the
     * last written batch and never writes a chunk twice.
     */
    async embedDocument({ documentId }: DocumentRef): Promise<{ chunkCount: number }> {
      const doc = await loadDocument(documentId);
      if (!doc.fileRewritten) throw ApplicationFailure.nonRetryable('the document has no final rewritten content to embed', PERMANENT);
      await db.document.update({ where: { id: documentId }, data: { embeddingStatus: 'in_progress', embeddingError: null } });
      await refreshKnowledgeBaseEmbeddingStatus(db, doc.knowledgeBaseId);

      const text = await storage.readText(documentFiles.rewritten(documentId));
      const chunks = chunkText(text);
      const languages = chunks.map((c) => franc(c.text, { minLength: 20 }));

      const ctx = Context.current();
      const resumeFrom = Number(ctx.info.heartbeatDetails ?? 0) || 0;
      for (let start = resumeFrom; start < chunks.length; start += EMBED_BATCH) {
        const batch = chunks.slice(start, start + EMBED_BATCH);
        const vectors = await embedder.embed(batch.map((c) => (c.heading ? `${c.heading}\n${c.text}` : c.text)));
        await index.upsertChunks(
          batch.map((c, i) => ({
            partnerId: doc.knowledgeBase.partnerId,
            knowledgeBaseId: doc.knowledgeBaseId,
            documentId,
            documentName: doc.name,
            chunkIndex: c.index,
            text: c.text,
            heading: c.heading,
            language: languages[c.index]!,
            embeddingProfile: embedder.profile.name,
            vector: vectors[i]!,
          })),
        );
        ctx.heartbeat(start + batch.length);
        if (ctx.cancellationSignal.aborted) throw new CancelledFailure('embedding cancelled: the document is being deleted');
      }
      // A shorter new version leaves no stale chunks of the old one behind.
      await index.deleteDocumentChunks(documentId, chunks.length);
      // "success" means searchable: wait for the index queue, heartbeating meanwhile.
      await index.waitForIndexing(60_000, () => ctx.heartbeat(chunks.length));

      const languageCounts: Record<string, number> = {};
      for (const l of languages) languageCounts[l] = (languageCounts[l] ?? 0) + 1;
      const current = await loadDocument(documentId);
      await db.document.update({
        where: { id: documentId },
        data: {
          embeddingStatus: 'success',
          embeddingError: null,
          embeddedAt: new Date(),
          embeddingChunkCount: chunks.length,
          embeddingDenseVectorCount: chunks.length,
          embeddingBm25LanguageCounts: languageCounts,
          vectorstoreDocumentId: documentId,
          inQueues: current.inQueues.filter((q) => q !== 'embedding'),
        },
      });
      await refreshKnowledgeBaseEmbeddingStatus(db, doc.knowledgeBaseId);
      return { chunkCount: chunks.length };
    },

  };
}

export type EmbeddingActivities = ReturnType<typeof createEmbeddingActivities>;
