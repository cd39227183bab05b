import { ApplicationFailure } from '@temporalio/activity';
import type { Db } from '../lib/db.js';
import type { FileStorage } from '../lib/storage.js';
import { documentFiles } from '../lib/storage.js';
import type { VectorIndex } from '../lib/providers/vector-index.js';
import type { EmbeddingProvider } from '../lib/providers/embeddings.js';
import { refreshKnowledgeBaseEmbeddingStatus } from '../lib/kb/embedding-status.js';
import { estimateTokens, countCharacters } from '../lib/kb/text.js';
import { acceptDigitizedCharacters } from '../lib/kb/content.js';
import { fetchPage, FetchRefused } from '../lib/providers/web-fetch.js';
import { extractPage, UnsupportedContentType } from '../lib/kb/article.js';
import type { Config } from '../lib/config.js';
import { extractFile, UnreadableDocument } from '../lib/kb/extractors/index.js';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export interface DocumentActivityDeps {
  db: Db;
  storage: FileStorage;
  index: VectorIndex;
  embedder: EmbeddingProvider;
  config: Pick<Config, 'urlFetchAllowPrivate' | 'urlFetchAllowLoopback'>;
}

export interface DocumentRef {
  documentId: string;
}

export type PipelineStep = 'digitize' | 'finalize_original' | 'rewrite' | 'embed';

/** The queue a step occupies in the document's `in_queues` while it waits or runs. */
export const queueOfStep: Record<PipelineStep, string> = { digitize: 'digitize', finalize_original: 'digitize', rewrite: 'rewrite', embed: 'embedding' };

/** Thrown when the document was deleted while its workflow ran: the workflow then ends quietly. */
export const DOCUMENT_GONE = 'DocumentGone';
/** A failure that retrying cannot fix (unreadable file, missing content). */
export const PERMANENT = 'PermanentProcessingError';

export function createDocumentActivities({ db, storage, index, embedder, config }: DocumentActivityDeps) {
  async function loadDocument(documentId: string) {
    const doc = await db.document.findUnique({ where: { id: documentId }, include: { knowledgeBase: true } });
    if (!doc || doc.deletionRequestedAt) throw ApplicationFailure.nonRetryable(`document ${documentId} no longer exists`, DOCUMENT_GONE);
    return doc;
  }

  const withoutQueue = (queues: string[], queue: string) => queues.filter((q) => q !== queue);

  /**
   * Runs the extractor for the original's format on a local copy (any storage adapter works). An
   * unreadable document fails for good with its reason; a missing tool or a crash is retried.
   */
  async function extractStoredOriginal(documentId: string, extension: string, shownName: string): Promise<string> {
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'kb-extract-'));
    try {
      const local = path.join(dir, `original.${extension}`);
      await fsp.writeFile(local, await storage.read(documentFiles.original(documentId, extension)));
      const { text } = await extractFile(local, extension);
      const normalised = text.replace(/^\uFEFF/, '').replace(/\r\n?/g, '\n');
      if (!normalised.trim()) throw ApplicationFailure.nonRetryable(`${shownName} contains no text`, PERMANENT);
      return normalised;
    } catch (err) {
      if (err instanceof UnreadableDocument) throw ApplicationFailure.nonRetryable(`${shownName}: ${err.message}`, PERMANENT);
      throw err;
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  }

  /**
   * A URL document: fetch the page safely (no private, loopback or link-local targets unless
   * configured; redirects re-checked; size and time bounded), keep it as the original, extract the
   * readable article into the extraction cache, and take the page title as the name if the client
   * gave none. Refusals are permanent (a readable processing_error); timeouts, network errors and
   * 5xx answers are retried.
   */
  async function extractUrl(doc: { id: string; url: string | null; nameFromSource: boolean }) {
    let page;
    try {
      page = await fetchPage(doc.url!, { allowPrivate: config.urlFetchAllowPrivate, allowLoopback: config.urlFetchAllowLoopback });
    } catch (err) {
      if (!(err instanceof FetchRefused)) throw err;
      const transient = err.reason === 'timeout' || err.reason === 'network' || err.reason === 'dns' || (err.reason === 'http_status' && (err.details.status ?? 0) >= 500);
      if (transient) throw err;
      throw ApplicationFailure.nonRetryable(err.message, PERMANENT);
    }
    let extracted;
    try {
      extracted = extractPage(page);
    } catch (err) {
      if (err instanceof UnsupportedContentType) throw ApplicationFailure.nonRetryable(err.message, PERMANENT);
      throw err;
    }
    if (!extracted.text.trim()) throw ApplicationFailure.nonRetryable(`${doc.url} has no readable text`, PERMANENT);
    const extension = extracted.kind === 'html' ? 'html' : 'txt';
    await storage.write(documentFiles.original(doc.id, extension), page.body);
    await storage.write(documentFiles.extracted(doc.id), extracted.text);
    await db.document.update({
      where: { id: doc.id },
      data: {
        fileOriginal: `page.${extension}`,
        originalExtension: extension,
        ...(doc.nameFromSource && extracted.title ? { name: extracted.title.slice(0, 500), nameFromSource: false } : {}),
      },
    });
    return { charCount: countCharacters(extracted.text), cached: false };
  }

  return {
    /**
     * Extracts the original's text (plain text and Markdown for now) into a cache next to it, and
     * returns its size. A cached extraction is reused, so a document resumed after a budget block
     * or a retry never calls the extraction provider again.
     */
    async extractText({ documentId }: DocumentRef): Promise<{ charCount: number; cached: boolean }> {
      const doc = await loadDocument(documentId);
      const cacheKey = documentFiles.extracted(documentId);
      if (await storage.exists(cacheKey)) return { charCount: countCharacters(await storage.readText(cacheKey)), cached: true };
      if (doc.type === 'url' && !doc.fileOriginal) return extractUrl(doc);
      if (!doc.fileOriginal || !doc.originalExtension) throw ApplicationFailure.nonRetryable('the document has no original file to digitize', PERMANENT);
      const text = await extractStoredOriginal(documentId, doc.originalExtension, doc.fileOriginal);
      await storage.write(cacheKey, text);
      return { charCount: countCharacters(text), cached: false };
    },

    /** Characters the new digitized text adds to what the document already holds. */
    async digitizationBound({ documentId }: DocumentRef): Promise<{ characters: number; knowledgeBaseId: string }> {
      const doc = await loadDocument(documentId);
      const text = await storage.readText(documentFiles.extracted(documentId));
      return { characters: Math.max(0, countCharacters(text) - doc.acceptedCharacters), knowledgeBaseId: doc.knowledgeBaseId };
    },

    /**
     * Makes the admitted extraction the digitized version and settles its reservation in the same
     * transaction that records the document's accepted characters (exactly once per operation).
     */
    async acceptDigitizedText({ documentId, operationKey }: DocumentRef & { operationKey: string }): Promise<{ charCount: number }> {
      await loadDocument(documentId);
      const text = await storage.readText(documentFiles.extracted(documentId));
      const charCount = countCharacters(text);
      await storage.write(documentFiles.digitized(documentId), text);
      const outcome = await acceptDigitizedCharacters(db, operationKey, documentId, charCount);
      if (outcome === 'unknown_operation') throw new Error(`no reservation ${operationKey} to settle`);
      return { charCount };
    },

    /** use_original_as_rewritten: the digitized text becomes the final rewritten content, no LLM. */
    async saveOriginalAsRewritten({ documentId }: DocumentRef): Promise<{ charCount: number }> {
      const doc = await loadDocument(documentId);
      if (!doc.fileDigitized) throw ApplicationFailure.nonRetryable('the document has no digitized content', PERMANENT);
      const text = await storage.readText(documentFiles.digitized(documentId));
      await storage.write(documentFiles.rewritten(documentId), text);
      const charCount = countCharacters(text);
      await db.document.update({
        where: { id: documentId },
        data: {
          fileRewritten: 'rewritten.md',
          finalRewriteCharCount: charCount,
          inputFileTokens: estimateTokens(text),
          inQueues: [...withoutQueue(doc.inQueues, 'digitize').filter((q) => q !== 'embedding'), 'embedding'],
          embeddingStatus: 'pending',
          embeddingError: null,
        },
      });
      await refreshKnowledgeBaseEmbeddingStatus(db, doc.knowledgeBaseId);
      return { charCount };
    },

    /** Makes a failed step visible on the document; the workflow then waits for a retry signal. */
    async recordStepFailure({ documentId, step, message }: DocumentRef & { step: PipelineStep; message: string }): Promise<void> {
      const doc = await db.document.findUnique({ where: { id: documentId } });
      if (!doc) return;
      await db.document.update({
        where: { id: documentId },
        data: {
          processingError: message,
          inQueues: withoutQueue(doc.inQueues, queueOfStep[step]),
          ...(step === 'embed' ? { embeddingStatus: 'failed', embeddingError: message } : {}),
        },
      });
      await refreshKnowledgeBaseEmbeddingStatus(db, doc.knowledgeBaseId);
    },

    /** On retry: the step is queued again and its old error cleared. */
    async requeueStep({ documentId, step }: DocumentRef & { step: PipelineStep }): Promise<void> {
      const doc = await db.document.findUnique({ where: { id: documentId } });
      if (!doc) return;
      const queue = queueOfStep[step];
      await db.document.update({
        where: { id: documentId },
        data: {
          processingError: null,
          inQueues: [...withoutQueue(doc.inQueues, queue), queue],
          ...(step === 'embed' ? { embeddingStatus: 'pending', embeddingError: null } : {}),
        },
      });
    },
  };
}

export type DocumentActivities = ReturnType<typeof createDocumentActivities>;
