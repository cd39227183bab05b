import crypto from 'node:crypto';
import { Context } from '@temporalio/activity';
import { CancelledFailure } from '@temporalio/common';
import type { Client } from '@temporalio/client';
import type { Db } from '../lib/platform/db.js';
import type { FileStorage } from '../lib/platform/storage.js';
import { documentFiles } from '../lib/platform/storage.js';
import { chunkClassFor, type VectorIndex } from '../lib/providers/vector-index.js';
import type { EmbeddingProvider } from '../lib/providers/embeddings.js';
import { markEmbedded, markEmbeddingStarted } from '../lib/knowledge/state.js';
import { chunkRecord, embeddedTextOf, languageCounts, prepareDocument, type DocumentIdentity, type PreparedDocument } from '../lib/retrieval/indexing.js';
import { chunkText } from '../lib/retrieval/chunking.js';
import { EmbeddingBatcher, EmbeddingCancelled } from '../lib/retrieval/embedding-batcher.js';
import type { Logger } from '../lib/platform/logger.js';
import { buildManifest } from '../lib/retrieval/toc.js';
import { ensureEmbeddingProfile } from '../lib/retrieval/embedding-profiles.js';
import { embeddingBatchBound, embeddingUsage } from '../lib/retrieval/embedding-budget.js';
import { settle, release } from '../lib/budget/ledger.js';
import { queueVendorSyncAfterEmbedding } from '../lib/vendor-sync/vendor-sync.js';
import { pipelineFailure, type AdmissionBound, type DocumentRef, type EmbedDocumentInput, type EmbedResume } from '../lib/contracts/document-pipeline.js';
import { loadLiveDocument, permanentFailure } from './live-document.js';
import { serviceFailureOf } from './service-failures.js';
import { heartbeating } from './heartbeating.js';

export interface EmbeddingActivityDeps {
  db: Db;
  storage: FileStorage;
  index: VectorIndex;
  embedder: EmbeddingProvider;
  temporal: Client;
  config: { temporalTaskQueue: string; embedding?: { batchChunks: number; maxOutageSeconds: number } };
  log?: Logger;
}

const EMBED_BATCH = 64;
/** EMBEDDING_MAX_OUTAGE_SECONDS' default, for callers that pass no embedding settings. */
const DEFAULT_MAX_OUTAGE_SECONDS = 86_400;

/**
 * Progress kept in the activity heartbeat, so a retried attempt resumes where the last one stopped;
 * for a paid embedder also the tokens the provider reported so far (null once one batch had none).
 */
interface EmbedProgress {
  next: number;
  inputTokens?: number | null;
}

/** Embedding of final rewritten content into the hybrid index. */
export function createEmbeddingActivities({ db, storage, index, embedder, temporal, config, log }: EmbeddingActivityDeps) {
  const loadDocument = (documentId: string) => loadLiveDocument(db, documentId);
  // One batcher per worker process: the local encoder's calls and Weaviate writes are shared by
  // every document embedding at the same moment (lib/retrieval/embedding-batcher.ts).
  const batcher = embedder.paid ? null : new EmbeddingBatcher({ embedder, index, batchChunks: config.embedding?.batchChunks ?? EMBED_BATCH, ...(log ? { log } : {}) });
  // The profile row never changes once created: read it once per process.
  let profileRow: ReturnType<typeof ensureEmbeddingProfile> | null = null;
  const profileOnce = () => {
    profileRow ??= ensureEmbeddingProfile(db, embedder.profile).catch((err) => {
      profileRow = null;
      throw err;
    });
    return profileRow;
  };

  /** Usage of a paid embedding so far, kept beside the document so a failed step can still settle it. */
  const usageFile = (documentId: string, operationKey: string) =>
    `${documentFiles.prefix(documentId)}/embedding-usage-${crypto.createHash('sha256').update(operationKey).digest('hex').slice(0, 24)}.json`;

  /**
   * Every chunk written and the leftovers removed: the document is embedded and leaves the queue,
   * the KB records the run (lib/knowledge/state.ts), then vendor sync follows.
   */
  async function recordEmbedded(doc: Awaited<ReturnType<typeof loadDocument>>, prepared: PreparedDocument, profile: { id: number; name: string }) {
    const current = await loadDocument(doc.id);
    await markEmbedded(db, doc, {
      chunkCount: prepared.chunks.length,
      bm25LanguageCounts: languageCounts(prepared),
      profileId: profile.id,
      manifest: buildManifest(prepared.chunks, prepared.languages, profile.name) as object,
    });
    if (current.knowledgeBase.partner.vendorSyncEnabled) await queueVendorSyncAfterEmbedding({ db, temporal, taskQueue: config.temporalTaskQueue }, doc.id);
  }

  const identityOf = (doc: Awaited<ReturnType<typeof loadDocument>>): DocumentIdentity => ({
    partnerId: doc.knowledgeBase.partnerId,
    knowledgeBaseId: doc.knowledgeBaseId,
    documentId: doc.id,
    documentName: doc.name,
    embeddingProfile: embedder.profile.name,
  });

  /**
   * The local encoder: the document's chunks go through the worker's batcher with those of every
   * other document embedding at the moment. Heartbeats carry the chunks written so far (a retry
   * resumes there) and bring cancellation: a document being deleted is withdrawn from the batcher,
   * and the activity ends only once no batch holds any of its chunks.
   */
  async function embedBatched(doc: Awaited<ReturnType<typeof loadDocument>>, prepared: PreparedDocument, progress: EmbedProgress) {
    const ctx = Context.current();
    const className = chunkClassFor(embedder.profile.name);
    ctx.heartbeat(progress);
    const beat = setInterval(() => ctx.heartbeat(progress), 2000);
    try {
      await batcher!.write({ className, identity: identityOf(doc), prepared, from: progress.next, onProgress: (n) => ((progress.next = n), ctx.heartbeat(progress)) }, ctx.cancellationSignal);
      await batcher!.finish(className, doc.id, prepared.chunks.length);
    } catch (err) {
      if (err instanceof EmbeddingCancelled) throw new CancelledFailure(err.message);
      throw err;
    } finally {
      clearInterval(beat);
    }
  }

  /** A paid embedder: the document alone, batch by batch, its reported usage kept for settlement. */
  async function embedPerDocument(doc: Awaited<ReturnType<typeof loadDocument>>, prepared: PreparedDocument, progress: EmbedProgress, operationKey: string | undefined) {
    const ctx = Context.current();
    const documentId = doc.id;
    const className = () => chunkClassFor(embedder.profile.name);
    // While the index is down every attempt would pay for a batch it cannot write: ask first.
    if (embedder.paid) await index.assertReachable();
    for (let start = progress.next; start < prepared.chunks.length; start += EMBED_BATCH) {
      const end = Math.min(start + EMBED_BATCH, prepared.chunks.length);
      // The first batch teaches an API provider its dimensions; the profile is recorded after it.
      const result = await embedder.embedWithUsage(prepared.embeddedText.slice(start, end));
      if (embedder.paid) {
        progress.inputTokens = progress.inputTokens == null || result.inputTokens == null ? null : progress.inputTokens + result.inputTokens;
        await storage.write(usageFile(documentId, operationKey!), JSON.stringify({ inputTokens: progress.inputTokens }));
      }
      const identity = identityOf(doc);
      await index.upsertChunks(className(), result.vectors.map((v, i) => chunkRecord(identity, prepared, start + i, v)));
      progress.next = end;
      ctx.heartbeat(progress);
      if (ctx.cancellationSignal.aborted) throw new CancelledFailure('embedding cancelled: the document is being deleted');
    }
    if (embedder.paid) {
      await settle(db, operationKey!, embeddingUsage(progress.inputTokens ?? null, embedder));
      await storage.removePrefix(usageFile(documentId, operationKey!));
    }
    // A shorter new version leaves no stale chunks of the old one behind, and vectors of an
    // earlier profile are removed once this profile's are written.
    await index.deleteDocumentChunks(documentId, prepared.chunks.length, { onlyClass: className() });
    await index.deleteDocumentChunks(documentId, 0, { exceptClass: className() });
    // "success" means searchable: wait for the index queue, heartbeating meanwhile.
    await index.waitForIndexing(60_000, () => ctx.heartbeat(progress), [className()]);
  }

  return {
    /**
     * The admission bound of embedding the document with a paid embedder (null for the local
     * one): every chunk's verified token bound, and list-price dollars when priced.
     */
    async embeddingBound({ documentId }: DocumentRef): Promise<AdmissionBound | null> {
      const doc = await loadDocument(documentId);
      if (!embedder.paid) return null;
      if (!doc.fileRewritten) throw permanentFailure('the document has no final rewritten content to embed');
      // Chunks alone: their languages are not needed for the bound (this runs as a short local activity).
      const chunks = chunkText(await storage.readText(documentFiles.rewritten(documentId)));
      return { knowledgeBaseId: doc.knowledgeBaseId, bound: embeddingBatchBound(chunks.map(embeddedTextOf), embedder) };
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
     * Chunks the final rewritten content, embeds it (dense vectors, n-gram sparse vectors, analysed
     * BM25 terms: lib/retrieval/indexing.ts) and writes it to the class of the configured embedding
     * profile; with a paid embedder under the admitted `operationKey`, whose hold is settled with
     * the provider's reported usage at the end (the workflow admitted the whole document's bound
     * before this step). Chunk IDs are derived from (document, chunk index) and progress is
     * heartbeated, so a retry after a crash resumes at the last written chunk and never writes a
     * chunk twice. At the end the document's chunks beyond the new count and its chunks in every
     * other profile's class are removed: the index holds exactly the latest version, once.
     */
    async embedDocument({ documentId, operationKey, resume }: EmbedDocumentInput): Promise<{ chunkCount: number }> {
      const doc = await loadDocument(documentId);
      if (!doc.fileRewritten) throw permanentFailure('the document has no final rewritten content to embed');
      if (embedder.paid && !operationKey) throw new Error('a paid embedding runs only under an admitted operation');
      const resumed = Context.current().info.heartbeatDetails as EmbedProgress | undefined;
      await markEmbeddingStarted(db, doc);
      // Language detection takes seconds for a large document (~20 s for 30 MB here): heartbeats
      // go on meanwhile, carrying the progress a retry resumes from.
      const { prepared, contentSha } = await heartbeating(async () => {
        const text = await storage.readText(documentFiles.rewritten(documentId));
        return { prepared: await prepareDocument(text), contentSha: crypto.createHash('sha256').update(text).digest('hex') };
      }, 2000, resumed);
      const here: Omit<EmbedResume, 'next'> = { contentSha, className: chunkClassFor(embedder.profile.name) };
      // A retry of this activity continues from its heartbeat (the same operation, whose usage so far
      // it carries); a try after an outage from where the last one stopped, if nothing changed since.
      const from = resumed ? Number(resumed.next) || 0 : resume && resume.contentSha === here.contentSha && resume.className === here.className ? resume.next : 0;
      const progress: EmbedProgress = { next: Math.min(from, prepared.chunks.length), ...(embedder.paid ? { inputTokens: resumed ? (resumed.inputTokens ?? null) : 0 } : {}) };
      try {
        if (batcher) await embedBatched(doc, prepared, progress);
        else await embedPerDocument(doc, prepared, progress, operationKey);
      } catch (err) {
        throw serviceFailureOf(err, config.embedding?.maxOutageSeconds ?? DEFAULT_MAX_OUTAGE_SECONDS, pipelineFailure.permanent, { ...here, next: progress.next } satisfies EmbedResume);
      }
      await recordEmbedded(doc, prepared, await profileOnce());
      return { chunkCount: prepared.chunks.length };
    },
  };
}

export type EmbeddingActivities = ReturnType<typeof createEmbeddingActivities>;
