import crypto from 'node:crypto';
import { Context, ApplicationFailure } from '@temporalio/activity';
import { CancelledFailure } from '@temporalio/common';
import type { Client } from '@temporalio/client';
import type { Db } from '../lib/db.js';
import type { FileStorage } from '../lib/storage.js';
import { documentFiles } from '../lib/storage.js';
import { chunkClassFor, type VectorIndex } from '../lib/providers/vector-index.js';
import type { EmbeddingProvider } from '../lib/providers/embeddings.js';
import { chunkText } from '../lib/kb/chunking.js';
import { refreshKnowledgeBaseEmbeddingStatus } from '../lib/kb/embedding-status.js';
import { bm25Document, detectLanguage } from '../lib/kb/language-analysis.js';
import { sparseVector } from '../lib/kb/sparse-vector.js';
import { buildManifest } from '../lib/kb/toc.js';
import { ensureEmbeddingProfile } from '../lib/kb/embedding-profiles.js';
import { embeddingBatchBound, embeddingUsage } from '../lib/kb/embedding-budget.js';
import { settle, release, type Bound } from '../lib/budget/ledger.js';
import { queueVendorSyncAfterEmbedding } from '../lib/kb/vendor-sync.js';
import { DOCUMENT_GONE, PERMANENT, type DocumentRef } from './documents.js';

export interface EmbeddingActivityDeps {
  db: Db;
  storage: FileStorage;
  index: VectorIndex;
  embedder: EmbeddingProvider;
  temporal: Client;
  config: { temporalTaskQueue: string };
}

const EMBED_BATCH = 64;

/**
 * Progress kept in the activity heartbeat, so a retried attempt resumes where the last one stopped;
 * for a paid embedder also the tokens the provider reported so far (null once one batch had none).
 */
interface EmbedProgress {
  next: number;
  inputTokens?: number | null;
}

/** Embedding of final rewritten content into the hybrid index. */
export function createEmbeddingActivities({ db, storage, index, embedder, temporal, config }: EmbeddingActivityDeps) {
  async function loadDocument(documentId: string) {
    const doc = await db.document.findUnique({ where: { id: documentId }, include: { knowledgeBase: { include: { partner: true } } } });
    if (!doc || doc.deletionRequestedAt) throw ApplicationFailure.nonRetryable(`document ${documentId} no longer exists`, DOCUMENT_GONE);
    return doc;
  }

  /** Usage of a paid embedding so far, kept beside the document so a failed step can still settle it. */
  const usageFile = (documentId: string, operationKey: string) =>
    `${documentFiles.prefix(documentId)}/embedding-usage-${crypto.createHash('sha256').update(operationKey).digest('hex').slice(0, 24)}.json`;

  async function chunksOf(documentId: string) {
    const text = await storage.readText(documentFiles.rewritten(documentId));
    const chunks = chunkText(text);
    return { chunks, embeddedText: chunks.map((c) => (c.heading ? `${c.heading}\n${c.text}` : c.text)) };
  }

  return {
    /**
     * Chunks the final rewritten content, embeds it (dense vectors, n-gram sparse vectors, analysed
     * BM25 terms) and writes it to the class of the configured embedding profile. Chunk IDs are
     * derived from (document, chunk index) and progress is heartbeated per batch, so a retry after
     * a crash resumes at the last written batch and never writes a chunk twice. At the end the
     * document's chunks beyond the new count and its chunks in every other profile's class are
     * removed: the index holds exactly the latest version, once.
     */
    /**
     * The admission bound of embedding the document with a paid embedder (null for the local
     * one): every chunk's verified token bound, and list-price dollars when priced.
     */
    async embeddingBound({ documentId }: DocumentRef): Promise<{ knowledgeBaseId: string; bound: Bound } | null> {
      const doc = await loadDocument(documentId);
      if (!embedder.paid) return null;
      if (!doc.fileRewritten) throw ApplicationFailure.nonRetryable('the document has no final rewritten content to embed', PERMANENT);
      const { embeddedText } = await chunksOf(documentId);
      return { knowledgeBaseId: doc.knowledgeBaseId, bound: embeddingBatchBound(embeddedText, embedder) };
    },

    /** After a failed paid embedding: settles what the provider reported so far, or releases the hold. */
    async closeEmbeddingOperation({ documentId, operationKey }: DocumentRef & { operationKey: string }): Promise<void> {
      const key = usageFile(documentId, operationKey);
      if (!(await storage.exists(key))) {
        await release(db, operationKey, 'embedding failed before any batch was embedded');
        return;
      }
      const { inputTokens } = JSON.parse(await storage.readText(key)) as { inputTokens: number | null };
      await settle(db, operationKey, embeddingUsage(inputTokens, embedder));
      await storage.removePrefix(key);
    },

    /**
     * Embeds the document; with a paid embedder under the admitted `operationKey`, whose hold is
     * settled with the provider's reported usage at the end (the workflow admitted the whole
     * document's bound before this step).
     */
    async embedDocument({ documentId, operationKey }: DocumentRef & { operationKey?: string }): Promise<{ chunkCount: number }> {
      const doc = await loadDocument(documentId);
      if (!doc.fileRewritten) throw ApplicationFailure.nonRetryable('the document has no final rewritten content to embed', PERMANENT);
      const ctx = Context.current();
      const startedAt = new Date();
      await db.document.update({ where: { id: documentId }, data: { embeddingStatus: 'in_progress', embeddingError: null } });
      await db.knowledgeBase.update({ where: { id: doc.knowledgeBaseId }, data: { embeddingLastUpdateAt: startedAt, embeddingLastUpdateStatus: 'in_progress' } });
      await refreshKnowledgeBaseEmbeddingStatus(db, doc.knowledgeBaseId);

      const { chunks, embeddedText } = await chunksOf(documentId);
      const languages = chunks.map((c) => detectLanguage(c.text));
      if (embedder.paid && !operationKey) throw new Error('a paid embedding runs only under an admitted operation');

      // The first batch teaches an API provider its dimensions; the profile is recorded after it.
      const className = () => chunkClassFor(embedder.profile.name);
      const resumed = ctx.info.heartbeatDetails as EmbedProgress | undefined;
      const progress: EmbedProgress = { next: Number(resumed?.next ?? 0) || 0, inputTokens: resumed ? (resumed.inputTokens ?? null) : 0 };

      for (let start = progress.next; start < chunks.length; start += EMBED_BATCH) {
        const batch = chunks.slice(start, start + EMBED_BATCH);
        const texts = embeddedText.slice(start, start + EMBED_BATCH);
        const result = await embedder.embedWithUsage(texts);
        if (embedder.paid) {
          progress.inputTokens = progress.inputTokens == null || result.inputTokens == null ? null : progress.inputTokens + result.inputTokens;
          await storage.write(usageFile(documentId, operationKey!), JSON.stringify({ inputTokens: progress.inputTokens }));
        }
        await index.upsertChunks(
          className(),
          batch.map((c, i) => ({
            partnerId: doc.knowledgeBase.partnerId,
            knowledgeBaseId: doc.knowledgeBaseId,
            documentId,
            documentName: doc.name,
            chunkIndex: c.index,
            text: c.text,
            heading: c.heading,
            section: c.section.map((h) => h.title).join(' › '),
            language: languages[c.index]!,
            bm25Text: bm25Document(embeddedText[c.index]!, languages[c.index]!),
            embeddingProfile: embedder.profile.name,
            denseVector: result.vectors[i]!,
            sparseVector: sparseVector(embeddedText[c.index]!, languages[c.index]!),
          })),
        );
        progress.next = start + batch.length;
        ctx.heartbeat(progress);
        if (ctx.cancellationSignal.aborted) throw new CancelledFailure('embedding cancelled: the document is being deleted');
      }
      if (embedder.paid) {
        await settle(db, operationKey!, embeddingUsage(progress.inputTokens ?? null, embedder));
        await storage.removePrefix(usageFile(documentId, operationKey!));
      }
      const profile = await ensureEmbeddingProfile(db, embedder.profile);
      // A shorter new version leaves no stale chunks of the old one behind, and vectors of an
      // earlier profile are removed once this profile's are written.
      await index.deleteDocumentChunks(documentId, chunks.length, { onlyClass: className() });
      await index.deleteDocumentChunks(documentId, 0, { exceptClass: className() });
      // "success" means searchable: wait for the index queue, heartbeating meanwhile.
      await index.waitForIndexing(60_000, () => ctx.heartbeat(progress), [className()]);

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
          embeddingProfileId: profile.id,
          embeddingManifest: buildManifest(chunks, languages, profile.name) as object,
          vectorstoreDocumentId: documentId,
          inQueues: current.inQueues.filter((q) => q !== 'embedding'),
          ...(current.processingError?.startsWith('BUDGET_BLOCKED:') ? { processingError: null } : {}),
        },
      });
      await db.knowledgeBase.update({
        where: { id: doc.knowledgeBaseId },
        data: {
          embeddingLastUpdateAt: new Date(),
          embeddingLastUpdateStatus: 'success',
          embeddingLastError: null,
          // A KB without a profile adopts this one; a KB on another profile is being re-embedded
          // (kbReembed switched it already) and keeps what it has.
          ...(doc.knowledgeBase.embeddingProfileId === null ? { embeddingProfileId: profile.id } : {}),
        },
      });
      await refreshKnowledgeBaseEmbeddingStatus(db, doc.knowledgeBaseId);
      if (current.knowledgeBase.partner.vendorSyncEnabled) await queueVendorSyncAfterEmbedding({ db, temporal, taskQueue: config.temporalTaskQueue }, documentId);
      return { chunkCount: chunks.length };
    },
  };
}

export type EmbeddingActivities = ReturnType<typeof createEmbeddingActivities>;
