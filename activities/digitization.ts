import { Context } from '@temporalio/activity';
import type { Db } from '../lib/platform/db.js';
import type { FileStorage } from '../lib/platform/storage.js';
import { documentFiles } from '../lib/platform/storage.js';
import { countCharacters, isBlank } from '../lib/platform/text.js';
import { acceptDigitizedCharacters } from '../lib/knowledge/content/updates.js';
import { fetchPage, FetchRefused, isTransientFetchFailure } from '../lib/providers/web-fetch.js';
import { extractPage, UnsupportedContentType } from '../lib/digitization/article.js';
import type { Config } from '../lib/platform/config.js';
import { extractFile, UnreadableDocument } from '../lib/digitization/extractors/index.js';
import type { PieceTranscripts } from '../lib/digitization/extractors/media.js';
import { isAudioVideo } from '../lib/digitization/formats.js';
import { TranscriptUnavailable, type VideoTranscriptSource } from '../lib/providers/video-transcripts.js';
import { ScrapeFailed, type Scraper } from '../lib/providers/scraper.js';
import { ProviderRefused, type SpeechToTextEngine } from '../lib/providers/speech-to-text.js';
import { holdBeforeDispatch, markUncertain, release, reserve, settle } from '../lib/budget/ledger.js';
import { Prisma } from '../lib/platform/db.js';
import { pipelineFailure, type DigitizeDocumentInput, type DigitizeDocumentOutcome, type DocumentRef, type ScrapeOutcome } from '../lib/contracts/document-pipeline.js';
import type { EmbeddingProvider } from '../lib/providers/embeddings.js';
import { beginPipelineRun, finalizeOriginalAsRewritten } from '../lib/knowledge/pipeline-steps.js';
import { moveQueueMarkers } from '../lib/knowledge/queue-markers.js';
import { recordFetchedOriginal } from '../lib/knowledge/state.js';
import { heartbeating } from './heartbeating.js';
import { loadLiveDocument, permanentFailure } from './live-document.js';
import { serviceFailureOf } from './service-failures.js';
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import path from 'node:path';
import { makeScratchDir } from '../lib/platform/scratch.js';

export interface DigitizationActivityDeps {
  embedder: Pick<EmbeddingProvider, 'paid'>;
  db: Db;
  storage: FileStorage;
  config: Pick<Config, 'urlFetchAllowPrivate' | 'urlFetchAllowLoopback' | 'digitization' | 'limits'>;
  videoTranscripts: VideoTranscriptSource;
  scraper: Scraper | null;
  speechToText: SpeechToTextEngine;
}

/** The `digitize` step: scraping or fetching URL pages, extracting text, admitting its characters. */
export function createDigitizationActivities({ db, storage, config, videoTranscripts, scraper, speechToText, embedder }: DigitizationActivityDeps) {
  const loadDocument = (documentId: string) => loadLiveDocument(db, documentId);

  /**
   * A recording's piece transcripts kept beside the document between tries of its extraction, each
   * file named by the recording's SHA-256 and the piece, so a replaced original never reuses them.
   */
  function keptPieceTranscripts(documentId: string, localCopy: string): PieceTranscripts {
    // Hashed on first use: only a recording cut in pieces asks.
    let recording: Promise<string> | null = null;
    const recordingHash = async () => {
      const hash = crypto.createHash('sha256');
      await pipeline(fs.createReadStream(localCopy), hash);
      return hash.digest('hex').slice(0, 32);
    };
    const file = async (key: string) => `${documentFiles.mediaPieces(documentId)}/${await (recording ??= recordingHash())}-${crypto.createHash('sha256').update(key).digest('hex').slice(0, 32)}.txt`;
    return {
      get: async (key) => {
        const at = await file(key);
        return (await storage.exists(at)) ? storage.readText(at) : null;
      },
      put: async (key, text) => storage.write(await file(key), text),
    };
  }

  /**
   * Runs the extractor for the original's format on a local copy (any storage adapter works). An
   * unreadable document fails for good with its reason; a missing tool or a crash is retried, and an
   * outage of the speech-to-text API waited out by the workflow, each next try reusing the pieces
   * of a long recording transcribed so far.
   */
  async function extractStoredOriginal(documentId: string, extension: string, shownName: string, ocrLanguages: string[]): Promise<string> {
    const dir = await makeScratchDir('kb-extract-');
    const media = isAudioVideo(extension);
    // Piece transcripts are kept for the next try, and dropped once no try needs them.
    const dropPieces = () => (media ? storage.removePrefix(documentFiles.mediaPieces(documentId)) : undefined);
    try {
      const local = path.join(dir, `original.${extension}`);
      // Streamed: an original (up to MAX_UPLOAD_BYTES) is never held in memory whole.
      await storage.download(documentFiles.original(documentId, extension), local);
      const { text } = await extractFile(local, extension, {
        ocrLanguages: ocrLanguages.length ? ocrLanguages : null,
        pdfOcr: { maxPages: config.digitization.pdfOcrMaxPages, concurrency: config.digitization.pdfOcrConcurrency, dpi: config.digitization.pdfOcrDpi },
        libreOfficeTimeoutMs: config.digitization.libreOfficeTimeoutSeconds * 1000,
        speechToText,
        limits: config.limits.extraction,
        pieceTranscripts: media ? keptPieceTranscripts(documentId, local) : null,
      });
      await dropPieces();
      return text;
    } catch (err) {
      if (err instanceof UnreadableDocument || err instanceof ProviderRefused) {
        await dropPieces();
        throw permanentFailure(`${shownName}: ${err.message}`);
      }
      throw serviceFailureOf(err, config.digitization.maxOutageSeconds, pipelineFailure.permanent);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  }

  /**
   * A URL document: fetch the page safely (no private, loopback or link-local targets unless
   * configured; redirects re-checked; size and time bounded), keep it as the original, extract the
   * readable article into the extraction cache, and take the page title as the name if the client
   * gave none. Refusals are permanent (a readable processing_error); what may pass later is retried
   * (isTransientFetchFailure: timeouts, network and name-server errors, 5xx, 429 and 408).
   */
  async function extractUrl(doc: { id: string; url: string | null; nameFromSource: boolean }) {
    let page;
    try {
      page = await fetchPage(doc.url!, { allowPrivate: config.urlFetchAllowPrivate, allowLoopback: config.urlFetchAllowLoopback });
    } catch (err) {
      if (!(err instanceof FetchRefused)) throw err;
      if (isTransientFetchFailure(err)) throw err;
      throw permanentFailure(err.message);
    }
    let extracted;
    try {
      extracted = extractPage(page);
    } catch (err) {
      if (err instanceof UnsupportedContentType) throw permanentFailure(err.message);
      throw err;
    }
    if (!extracted.text.trim()) throw permanentFailure(`${doc.url} has no readable text`);
    const extension = extracted.kind === 'html' ? 'html' : 'txt';
    await storage.write(documentFiles.original(doc.id, extension), page.body);
    await storage.write(documentFiles.extracted(doc.id), extracted.text);
    await recordFetchedOriginal(db, doc.id, { file: `page.${extension}`, extension, title: extracted.title });
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
      if (err instanceof TranscriptUnavailable) throw permanentFailure(err.message);
      throw serviceFailureOf(err, config.digitization.maxOutageSeconds, pipelineFailure.permanent);
    }
    await storage.write(documentFiles.original(doc.id, 'txt'), transcript.text);
    await storage.write(documentFiles.extracted(doc.id), transcript.text);
    await recordFetchedOriginal(db, doc.id, { file: 'transcript.txt', extension: 'txt', title: transcript.title });
    return { charCount: countCharacters(transcript.text), cached: false };
  }

  const scrapeRecord = (documentId: string) => `${documentFiles.prefix(documentId)}/scrape.json`;

  const activities = {
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
        if ((await holdBeforeDispatch(db, operationKey, Context.current().info.attempt, 'scrape')) === 'lost') {
          return { outcome: 'ambiguous', message: 'the worker was lost during the scrape; its cost is unknown' };
        }
        let result;
        try {
          result = await scraper.scrape(doc.url!, Context.current().cancellationSignal);
        } catch (err) {
          if (!(err instanceof ScrapeFailed)) throw err;
          if (err.kind === 'ambiguous') await markUncertain(db, operationKey, err.message);
          else await release(db, operationKey, err.message);
          if (err.kind === 'unavailable') return { outcome: err.kind, message: err.message, maxOutageSeconds: config.digitization.maxOutageSeconds };
          return { outcome: err.kind, message: err.message };
        }
        const costUsd = new Prisma.Decimal(scraper.settings.costPerCreditUsd).times(result.credits).toDecimalPlaces(8, Prisma.Decimal.ROUND_UP).toFixed();
        record = { markdown: result.markdown.replace(/\r\n?/g, '\n'), title: result.title, costUsd, reportedUsage: result.reportedUsage };
        await storage.write(scrapeRecord(documentId), JSON.stringify(record));
      }
      if (isBlank(record.markdown)) {
        await settle(db, operationKey, { characters: 0, costUsd: record.costUsd, model: scraper.settings.name });
        return { outcome: 'refused', message: `${doc.url} has no readable text` };
      }
      await storage.write(documentFiles.original(documentId, 'md'), record.markdown);
      await storage.write(documentFiles.extracted(documentId), record.markdown);
      await settle(db, operationKey, { characters: 0, costUsd: record.costUsd, model: scraper.settings.name }, (tx) =>
        recordFetchedOriginal(tx, documentId, { file: 'page.md', extension: 'md', title: record.title, provider: { name: scraper.settings.name, costUsd: record.costUsd } }),
      );
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
      if (!doc.fileOriginal || !doc.originalExtension) throw permanentFailure('the document has no original file to digitize');
      const ocrLanguages = doc.ocrLanguages.length ? doc.ocrLanguages : doc.knowledgeBase.ocrLanguages;
      const text = await extractStoredOriginal(documentId, doc.originalExtension, doc.fileOriginal, ocrLanguages);
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

    /**
     * A whole digitization in one activity (docs/architecture.md, "Fewer steps per document"): the
     * new run's markers and request, the extraction (cached), the admission of the characters it
     * adds under the workflow's `operationKey`, the accepted text, and with `finalizeOriginal` the
     * final rewritten content as well. Every part is idempotent (the reservation and its settlement
     * by the key, the markers by single-statement moves), so a retry after a crash at any point
     * ends in the same state. A page for the scraping provider, or a KB budget that cannot hold the
     * text, is handed back to the workflow, which waits and admits with its own loop.
     */
    async digitizeDocument(input: DigitizeDocumentInput): Promise<DigitizeDocumentOutcome> {
      return heartbeating(async () => {
        const { documentId, operationKey } = input;
        if (input.begin) await beginPipelineRun(db, input.begin);
        const scrape = await activities.scrapeBound({ documentId });
        if (scrape) return { outcome: 'scrape', bound: scrape };
        await activities.extractText({ documentId });
        const { characters, knowledgeBaseId } = await activities.digitizationBound({ documentId });
        const admission = await reserve(db, {
          knowledgeBaseId,
          operationKey,
          workflowId: input.workflowId,
          documentId,
          category: 'digitization',
          bound: { characters },
          requestCharacterLimit: input.requestCharacterLimit,
        });
        if (!admission.admitted) return admission.reason === 'request_character_limit' ? { outcome: 'request_limit', detail: admission.detail } : { outcome: 'blocked' };
        await activities.acceptDigitizedText({ documentId, operationKey });
        // A retry finds the reservation settled by the attempt before: its markers are made right again.
        await moveQueueMarkers(db, documentId, { remove: ['digitize'] });
        if (!input.finalizeOriginal) return { outcome: 'accepted', finalized: false, paidEmbedding: embedder.paid };
        const doc = await loadDocument(documentId);
        await finalizeOriginalAsRewritten(db, storage, doc);
        return { outcome: 'accepted', finalized: true, paidEmbedding: embedder.paid };
      });
    },
  };
  return activities;
}

export type DigitizationActivities = ReturnType<typeof createDigitizationActivities>;
