import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Db } from '../lib/db.js';
import type { FileStorage } from '../lib/storage.js';
import { documentFiles } from '../lib/storage.js';
import type { VectorIndex } from '../lib/providers/vector-index.js';
import type { EmbeddingProvider } from '../lib/providers/embeddings.js';
import { refreshKnowledgeBaseEmbeddingStatus } from '../lib/kb/embedding-status.js';
import { countCharacters } from '../lib/kb/text.js';
import { countTokens } from '../lib/kb/tokens.js';
import { acceptDigitizedCharacters } from '../lib/kb/content.js';
import { fetchPage, FetchRefused } from '../lib/providers/web-fetch.js';
import { extractPage, UnsupportedContentType } from '../lib/kb/article.js';
import type { Config } from '../lib/config.js';
import { extractFile, UnreadableDocument } from '../lib/kb/extractors/index.js';
import { TranscriptUnavailable, type VideoTranscriptSource } from '../lib/providers/video-transcripts.js';
import { ScrapeFailed, type Scraper } from '../lib/providers/scraper.js';
import { markUncertain, release, settle } from '../lib/budget/ledger.js';
import { Prisma } from '../lib/db.js';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export interface DocumentActivityDeps {
  db: Db;
  storage: FileStorage;
  index: VectorIndex;
  embedder: EmbeddingProvider;
  config: Pick<Config, 'urlFetchAllowPrivate' | 'urlFetchAllowLoopback'>;
  videoTranscripts: VideoTranscriptSource;
  scraper: Scraper | null;
}

export type ScrapeOutcome = { outcome: 'scraped' } | { outcome: 'refused' | 'unavailable' | 'ambiguous'; message: string };

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

export function createDocumentActivities({ db, storage, config, videoTranscripts, scraper }: DocumentActivityDeps) {
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

  /**
   * A video URL: its transcript is the original and the digitized text (no video is downloaded);
   * the video's title becomes the name. A video without a transcript fails with a readable
   * processing_error; a platform outage is retried.
   */
  async function extractVideo(doc: { id: string; url: string | null; nameFromSource: boolean }) {
    let transcript;
    try {
      transcript = await videoTranscripts.fetchTranscript(doc.url!);
    } catch (err) {
      if (err instanceof TranscriptUnavailable) throw ApplicationFailure.nonRetryable(err.message, PERMANENT);
      throw err;
    }
    await storage.write(documentFiles.original(doc.id, 'txt'), transcript.text);
    await storage.write(documentFiles.extracted(doc.id), transcript.text);
    await db.document.update({
      where: { id: doc.id },
      data: {
        fileOriginal: 'transcript.txt',
        originalExtension: 'txt',
        ...(doc.nameFromSource && transcript.title ? { name: transcript.title.slice(0, 500), nameFromSource: false } : {}),
      },
    });
    return { charCount: countCharacters(transcript.text), cached: false };
  }

  const scrapeRecord = (documentId: string) => `${documentFiles.prefix(documentId)}/scrape.json`;

  return {
    /**
     * Whether the document's page goes through the scraping provider, and the dollars its scrape
     * may cost (the admission bound). Null: no scrape (no provider, not a URL, a video, or the
     * page is already extracted).
     */
    async scrapeBound({ documentId }: DocumentRef): Promise<{ knowledgeBaseId: string; dollars: string } | null> {
      const doc = await loadDocument(documentId);
      if (!scraper || doc.type !== 'url' || doc.fileOriginal || !doc.url || videoTranscripts.videoId(doc.url)) return null;
      if (await storage.exists(documentFiles.extracted(documentId))) return null;
      const { costPerCreditUsd, creditsPerPage } = scraper.settings;
      return { knowledgeBaseId: doc.knowledgeBaseId, dollars: new Prisma.Decimal(costPerCreditUsd).times(creditsPerPage).toDecimalPlaces(8, Prisma.Decimal.ROUND_UP).toFixed() };
    },

    /**
     * One admitted scrape: the page's markdown becomes the original and the extraction cache, its
     * cost is settled and recorded as digitization_provider / digitization_cost_usd. The answer is
     * kept before settling, so a retry after a crash settles it without scraping again; a retry that
     * finds no answer cannot know whether the provider worked (and billed): uncertain.
     */
    async scrapeUrl({ documentId, operationKey }: DocumentRef & { operationKey: string }): Promise<ScrapeOutcome> {
      const doc = await loadDocument(documentId);
      if (!scraper) return { outcome: 'refused', message: 'no scraping provider is configured' };
      let record: { markdown: string; title: string | null; costUsd: string; reportedUsage: boolean };
      if (await storage.exists(scrapeRecord(documentId))) {
        record = JSON.parse(await storage.readText(scrapeRecord(documentId)));
      } else {
        const hold = await db.budgetReservation.findUnique({ where: { operationKey } });
        if (!hold) throw new Error(`no reservation ${operationKey}: a scrape is dispatched only after admission`);
        if (hold.status === 'uncertain' || (hold.status === 'pending' && Context.current().info.attempt > 1)) {
          await markUncertain(db, operationKey, 'the worker was lost while the scrape was in flight');
          return { outcome: 'ambiguous', message: 'the worker was lost during the scrape; its cost is unknown' };
        }
        let result;
        try {
          result = await scraper.scrape(doc.url!, Context.current().cancellationSignal);
        } catch (err) {
          if (!(err instanceof ScrapeFailed)) throw err;
          if (err.kind === 'ambiguous') await markUncertain(db, operationKey, err.message);
          else await release(db, operationKey, err.message);
          return { outcome: err.kind, message: err.message };
        }
        const costUsd = new Prisma.Decimal(scraper.settings.costPerCreditUsd).times(result.credits).toDecimalPlaces(8, Prisma.Decimal.ROUND_UP).toFixed();
        record = { markdown: result.markdown.replace(/\r\n?/g, '\n'), title: result.title, costUsd, reportedUsage: result.reportedUsage };
        await storage.write(scrapeRecord(documentId), JSON.stringify(record));
      }
      if (!record.markdown.trim()) {
        await settle(db, operationKey, { characters: 0, costUsd: record.costUsd, model: scraper.settings.name });
        return { outcome: 'refused', message: `${doc.url} has no readable text` };
      }
      await storage.write(documentFiles.original(documentId, 'md'), record.markdown);
      await storage.write(documentFiles.extracted(documentId), record.markdown);
      await settle(db, operationKey, { characters: 0, costUsd: record.costUsd, model: scraper.settings.name }, async (tx) => {
        await tx.document.update({
          where: { id: documentId },
          data: {
            fileOriginal: 'page.md',
            originalExtension: 'md',
            digitizationProvider: scraper.settings.name,
            digitizationCostUsd: record.costUsd,
            ...(doc.nameFromSource && record.title ? { name: record.title.slice(0, 500), nameFromSource: false } : {}),
          },
        });
      });
      await storage.removePrefix(scrapeRecord(documentId));
      return { outcome: 'scraped' };
    },

    /**
     * Extracts the original's text (plain text and Markdown for now) into a cache next to it, and
     * returns its size. A cached extraction is reused, so a document resumed after a budget block
     * or a retry never calls the extraction provider again.
     */
    async extractText({ documentId }: DocumentRef): Promise<{ charCount: number; cached: boolean }> {
      const doc = await loadDocument(documentId);
      const cacheKey = documentFiles.extracted(documentId);
      if (await storage.exists(cacheKey)) return { charCount: countCharacters(await storage.readText(cacheKey)), cached: true };
      if (doc.type === 'url' && !doc.fileOriginal) return videoTranscripts.videoId(doc.url ?? '') ? extractVideo(doc) : extractUrl(doc);
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
          inputFileTokens: countTokens(text),
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
