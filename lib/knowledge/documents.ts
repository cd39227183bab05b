import crypto from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { Db, Prisma } from '../platform/db.js';
import { AppError, badRequest, conflict } from '../platform/errors.js';
import type { FileStorage } from '../platform/storage.js';
import { documentFiles } from '../platform/storage.js';
import type { DocumentPipelineInput, PipelineStep } from '../contracts/document-pipeline.js';
import { findDocument, findKnowledgeBase, findLiveFolder } from './lookup.js';
import { checkUpload, type UploadedFile } from '../digitization/uploads.js';
import { isAudioVideo } from '../digitization/formats.js';
import { insertIntoLiveDestination, liveDestination, type Destination, type NewDocument } from './document-inserts.js';
import { pipelineRequestData, startDocumentPipeline, stepsAfterDigitizing } from './pipeline-runs.js';
import { youTubeVideoId } from '../providers/video-transcripts.js';
import { ocrLanguagesSetting } from '../digitization/ocr.js';

export interface CreateDocumentInput {
  type: 'file' | 'url';
  folder: string;
  url?: string;
  name?: string;
  expert_name?: string;
  user_email?: string;
  auto_rewrite: boolean;
  model_tier: 'standard' | 'economy';
  use_original_as_rewritten: boolean;
  character_limit?: number;
  /** OCR languages of scanned pages and images (docs/api/knowledge-bases.md, "OCR languages"). */
  ocr_languages?: string;
}

export interface DocumentDeps {
  db: Db;
  storage: FileStorage;
  temporal: Client;
  taskQueue: string;
}

/** Fields every new document to be processed takes from the create request. */
function processingFields(input: Omit<CreateDocumentInput, 'type'>) {
  return {
    userEmail: input.user_email ?? null,
    expertName: input.expert_name ?? null,
    autoRewrite: input.auto_rewrite,
    useOriginalAsRewritten: input.use_original_as_rewritten,
    modelTier: input.model_tier,
    ocrLanguages: ocrLanguagesSetting.parse(input.ocr_languages),
    inQueues: ['digitize'],
  };
}

/** The steps a new upload runs, from the flags the client sent (use_original_as_rewritten wins over auto_rewrite). */
function stepsForNewUpload(input: Pick<CreateDocumentInput, 'use_original_as_rewritten' | 'auto_rewrite'>): PipelineStep[] {
  return ['digitize', ...stepsAfterDigitizing({ autoRewrite: input.auto_rewrite, useOriginalAsRewritten: input.use_original_as_rewritten })];
}

/**
 * max_documents (docs/api/knowledge-bases.md, "How `max_documents` is enforced"): a trigger on
 * `documents` adds every inserted document to its partner's `documentCount` in the inserting
 * statement and refuses the statement when the count would pass the limit (migration
 * document_count_and_listing_indexes). Racing creations cannot pass it, and no creation counts the
 * partner's documents.
 */
function quotaRefusal(err: unknown): AppError | null {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const message = String((e as { message?: unknown }).message ?? '');
    const at = message.indexOf('QUOTA_EXCEEDED:max_documents');
    if (at >= 0) return new AppError('forbidden', message.slice(at).split('\n')[0]!.trim());
  }
  return null;
}

async function withinDocumentQuota<T>(create: () => Promise<T>): Promise<T> {
  try {
    return await create();
  } catch (err) {
    throw quotaRefusal(err) ?? err;
  }
}

/**
 * Creates document(s) in `create`'s transaction under the partner's max_documents (the insert's
 * trigger refuses past it; see quotaRefusal). For creations that must hold other rows meanwhile
 * (a channel import holds its folder and KB).
 */
export async function createWithinDocumentQuota<T>(db: Db, _partner: { id: string; maxDocuments: number }, create: (tx: Prisma.TransactionClient) => Promise<T>): Promise<T> {
  return withinDocumentQuota(() => db.$transaction(create));
}

/** The row of a new document to be processed, with the request its workflow runs (recorded for the reconciler). */
function newDocumentRow(dest: Destination, input: Omit<CreateDocumentInput, 'type'>, fields: Partial<NewDocument>, id = crypto.randomUUID()) {
  const pipeline: DocumentPipelineInput = { documentId: id, knowledgeBaseId: dest.kb.id, partner: dest.partner.name, steps: stepsForNewUpload(input), requestCharacterLimit: input.character_limit ?? null };
  const row: NewDocument = {
    id,
    knowledgeBaseId: dest.kb.id,
    folderId: dest.folder.id,
    name: '',
    type: 'file',
    ...processingFields(input),
    ...pipelineRequestData(pipeline),
    ...fields,
  };
  return { row, pipeline };
}

/**
 * A new document: one row into its destination, grouped with the other creations of that
 * destination in flight and refused past max_documents (lib/knowledge/document-inserts.ts).
 * `audioVideo`: the refusal to answer when the partner does not (or no longer) allow audio and
 * video, for a document that needs it; null for any other document.
 */
async function insertDocument(db: Db, dest: Destination, row: NewDocument, audioVideo: AppError | null, lookAgain = freshLookup(db, dest)) {
  const created = await withinDocumentQuota(() => insertIntoLiveDestination(db, dest, row, { audioVideo: audioVideo !== null }));
  if (!created) throw await destinationRefusal(dest, audioVideo, lookAgain);
  return { ...created, folder: dest.folder };
}

/** The destination looked up afresh (or why there is none), once for all the rows of a request it refused. */
function freshLookup(db: Db, dest: Destination): () => Promise<Destination | AppError> {
  let found: Promise<Destination | AppError> | undefined;
  return () => (found ??= findLiveFolder(db, dest.partner.name, dest.kb.name, dest.folder.name).catch((err: unknown) => (err instanceof AppError ? err : Promise.reject(err))));
}

/**
 * Why a destination took no document: looked up afresh, the partner, KB or folder is gone or being
 * deleted (404, 409), or the partner no longer allows audio and video (403); or, found live again,
 * it changed since the request's lookup (a KB deleted and created again under its name): 409, to be
 * sent again.
 */
async function destinationRefusal(dest: Destination, audioVideo: AppError | null, lookAgain: () => Promise<Destination | AppError>): Promise<AppError> {
  const fresh = await lookAgain();
  if (fresh instanceof AppError) return fresh;
  if (audioVideo && !fresh.partner.allowAudioVideo) return audioVideo;
  return conflict(`folder ${JSON.stringify(dest.folder.name)} of knowledge base ${JSON.stringify(dest.kb.name)} changed while the document was created; send the request again`);
}

/**
 * The rows of one request into its destination (grouped with each other and with the creations in
 * flight; when max_documents refuses a group, its rows go one at a time in order, so the ones that
 * fit are created and each of the others is refused on its own). Returns per row its refusal, if any.
 */
async function insertDocuments(db: Db, dest: Destination, rows: Array<{ row: NewDocument; audioVideo: AppError | null }>): Promise<Array<{ ok: true } | { ok: false; error: AppError }>> {
  const lookAgain = freshLookup(db, dest);
  return Promise.all(
    rows.map(async ({ row, audioVideo }) => {
      try {
        await insertDocument(db, dest, row, audioVideo, lookAgain);
        return { ok: true as const };
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        return { ok: false as const, error: err };
      }
    }),
  );
}

/** Workflow starts of one request in flight at once: each is a round trip to Temporal. */
const START_CONCURRENCY = 32;

async function mapConcurrently<T, R>(items: T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!, i);
      }
    }),
  );
  return out;
}

/**
 * Starts the workflow of a created document; when Temporal cannot start it, the row and its files
 * are removed again and the client gets an error, so nothing is left half-created.
 */
async function startOrUndo(deps: DocumentDeps, pipeline: DocumentPipelineInput): Promise<void> {
  try {
    await startDocumentPipeline(deps, pipeline);
  } catch (err) {
    await deps.db.document.deleteMany({ where: { id: pipeline.documentId } });
    await deps.storage.removePrefix(documentFiles.prefix(pipeline.documentId));
    throw new AppError('unavailable', `could not start processing: ${(err as Error).message}`);
  }
}

/**
 * Creates a document from an uploaded file: validates it, stores the original, records the row
 * and starts its workflow. If the workflow cannot be started the row and file are removed again
 * and the client gets an error, so nothing is left half-created.
 */
export async function createDocumentFromUpload(deps: DocumentDeps, partner: string, kbName: string, input: CreateDocumentInput, files: UploadedFile[]) {
  if (input.type === 'url') {
    if (!input.url) throw badRequest('form.url is required when type is url');
    return createDocumentFromUrl(deps, partner, kbName, { ...input, url: input.url });
  }
  const file = files.find((f) => f.field === 'file');
  if (!file) throw badRequest('form.file is required when type is file');
  const dest = await liveDestination(deps.db, partner, kbName, input.folder);
  const { row, pipeline, audioVideo } = await storedUpload(deps, dest, input, file);
  let document;
  try {
    document = await insertDocument(deps.db, dest, row, audioVideo);
  } catch (err) {
    // No row refers to the stored original: remove it rather than leave an orphan in storage.
    await deps.storage.removePrefix(documentFiles.prefix(row.id));
    throw err;
  }
  await startOrUndo(deps, pipeline);
  return document;
}

/** Validates one uploaded file and moves it into storage as the original of a new document's row (not inserted yet). */
async function storedUpload(deps: DocumentDeps, dest: Destination, input: Omit<CreateDocumentInput, 'type'>, file: UploadedFile) {
  const { extension } = await checkUpload(file, dest.partner);
  const created = newDocumentRow(dest, input, { name: input.name?.trim() || file.originalName, type: 'file', originalExtension: extension, fileOriginal: file.originalName });
  await deps.storage.moveIn(documentFiles.original(created.row.id, extension), file.path);
  return { ...created, audioVideo: isAudioVideo(extension) ? audioVideoUploadRefusal(file) : null };
}

/** checkUpload's refusal of audio and video for a partner that does not allow them, for the insert to answer when that changed meanwhile. */
const audioVideoUploadRefusal = (file: UploadedFile) => new AppError('forbidden', `audio and video uploads are not enabled for this partner (${file.originalName})`);

export interface BatchUploadInput extends Omit<CreateDocumentInput, 'type' | 'name'> {
  names?: string | string[];
}

/** Spec 4.3 batch file upload: the limits this deployment applies (docs/api/knowledge-bases.md, "Batch file upload"). */
export const batchUploadLimits = { maxFiles: 100, maxTotalBytes: 1024 * 1024 * 1024 };

type BatchOutcome = { status: 'success'; document_id: string } | { status: 'failed'; document_id: null; error: string; http_status: number };

const failed = (err: AppError): BatchOutcome => ({ status: 'failed', document_id: null, error: err.message, http_status: err.status });

type BatchItem = { row: NewDocument; pipeline: DocumentPipelineInput; audioVideo: AppError | null };

/**
 * The rows of a batch (each already validated) inserted together, then their workflows started
 * concurrently; one refused or unstartable document never rolls back the others.
 */
async function createBatch(deps: DocumentDeps, dest: Destination | AppError, items: Array<BatchItem | AppError>): Promise<BatchOutcome[]> {
  const valid = items.filter((i): i is BatchItem => !(i instanceof AppError));
  const inserted = dest instanceof AppError ? [] : await insertDocuments(deps.db, dest, valid);
  const outcome = new Map<string, BatchOutcome>();
  const toStart: DocumentPipelineInput[] = [];
  valid.forEach((v, k) => {
    const r = inserted[k]!;
    if (r.ok) toStart.push(v.pipeline);
    else outcome.set(v.row.id, failed(r.error));
  });
  await Promise.all(valid.filter((v) => outcome.has(v.row.id)).map((v) => deps.storage.removePrefix(documentFiles.prefix(v.row.id))));
  await mapConcurrently(toStart, START_CONCURRENCY, async (pipeline) => {
    try {
      await startOrUndo(deps, pipeline);
      outcome.set(pipeline.documentId, { status: 'success', document_id: pipeline.documentId });
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      outcome.set(pipeline.documentId, failed(err));
    }
  });
  return items.map((i) => (i instanceof AppError ? failed(i) : outcome.get(i.row.id)!));
}

/** The folder of a batch, or the refusal every item of the batch reports (each item fails on its own, as a single creation would). */
async function liveFolderOrRefusal(db: Db, partner: string, kbName: string, folder: string): Promise<Destination | AppError> {
  try {
    return await liveDestination(db, partner, kbName, folder);
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
}

const summaryOf = <T extends { status: string }>(results: T[]) => {
  const succeeded = results.filter((r) => r.status === 'success').length;
  return { summary: { total: results.length, succeeded, failed: results.length - succeeded }, results };
};

/**
 * Each file becomes a document on its own: one invalid or refused file is reported in its result
 * and never rolls back the others; each document's workflow admits its characters separately. The
 * valid files' rows are inserted in one statement and their workflows started concurrently.
 */
export async function createDocumentsFromBatch(deps: DocumentDeps, partner: string, kbName: string, input: BatchUploadInput, files: UploadedFile[]) {
  const uploads = files.filter((f) => f.field === 'files');
  if (uploads.length === 0) throw badRequest('form.files is required: one or more files');
  if (uploads.length > batchUploadLimits.maxFiles) throw badRequest(`at most ${batchUploadLimits.maxFiles} files per batch`);
  const total = uploads.reduce((a, f) => a + f.size, 0);
  if (total > batchUploadLimits.maxTotalBytes) throw new AppError('payload_too_large', `a batch may hold at most ${batchUploadLimits.maxTotalBytes} bytes in total`);
  const names = input.names === undefined ? [] : Array.isArray(input.names) ? input.names : [input.names];
  if (names.length > 0 && names.length !== uploads.length) throw badRequest(`names has ${names.length} entries for ${uploads.length} files`);
  await findKnowledgeBase(deps.db, partner, kbName);
  const dest = await liveFolderOrRefusal(deps.db, partner, kbName, input.folder);

  const items = await mapConcurrently(uploads, 8, async (file, i) => {
    if (dest instanceof AppError) return dest;
    try {
      return await storedUpload(deps, dest, { ...input, name: names[i] }, file);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      return err;
    }
  });
  const outcomes = await createBatch(deps, dest, items);
  return summaryOf(uploads.map((file, i) => ({ filename: file.originalName, ...outcomes[i]! })));
}

/** Whether a URL is one a document may be created from: absolute http(s), no credentials. */
/**
 * Refuses a document URL that is not http(s), or that carries credentials (they would be stored,
 * listed and sent to the scraping provider). `subject` names it in the message.
 */
/** The longest document URL taken (a single URL document's form field, and each URL of a batch import). */
export const documentUrlMaxLength = 8192;

function checkDocumentUrl(value: string, subject: string): void {
  if (value.length > documentUrlMaxLength) throw badRequest(`the URL ${JSON.stringify(value.slice(0, 60))}... is ${value.length} characters long; at most ${documentUrlMaxLength} are taken`);
  let u: URL | null = null;
  try {
    u = new URL(value);
  } catch {
    // not a URL: refused below
  }
  if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:')) throw badRequest(`${subject} is not an absolute http or https URL`);
  if (u.username || u.password) throw badRequest(`${subject} carries a user name or password; document URLs may not`);
}

/**
 * A video URL's id, and the refusal it meets where the partner may not have audio and video
 * (allow_audio_video=false): thrown now, and handed to the insert, which checks the flag again.
 */
function videoOf(partner: { allowAudioVideo: boolean }, url: string) {
  const videoId = youTubeVideoId(url);
  const audioVideo = videoId ? new AppError('forbidden', `video URLs are not enabled for this partner (${url})`) : null;
  if (audioVideo && !partner.allowAudioVideo) throw audioVideo;
  return { videoId, audioVideo };
}

/** The row of a URL document (named after the URL until the page's title is known), or why it is refused. */
function urlDocumentRow(dest: Destination, input: Omit<CreateDocumentInput, 'type'> & { url: string }): BatchItem {
  checkDocumentUrl(input.url, JSON.stringify(input.url));
  const { videoId, audioVideo } = videoOf(dest.partner, input.url);
  const created = newDocumentRow(dest, input, {
    name: input.name?.trim() || input.url,
    nameFromSource: !input.name?.trim(),
    type: 'url',
    url: input.url,
    videoId,
  });
  return { ...created, audioVideo };
}

/**
 * A document from a URL: the row (named after the URL until the page's title is known) and its
 * workflow; the page is fetched, safely, by the digitize step.
 */
async function createDocumentFromUrl(deps: DocumentDeps, partner: string, kbName: string, input: Omit<CreateDocumentInput, 'type'> & { url: string }) {
  checkDocumentUrl(input.url, JSON.stringify(input.url));
  const dest = await liveDestination(deps.db, partner, kbName, input.folder);
  const { row, pipeline, audioVideo } = urlDocumentRow(dest, input);
  const document = await insertDocument(deps.db, dest, row, audioVideo);
  await startOrUndo(deps, pipeline);
  return document;
}

export interface BatchUrlInput extends Omit<CreateDocumentInput, 'type' | 'name' | 'url'> {
  urls: string[];
}

/**
 * Spec 4.3 batch URL import: one document per URL, each on its own; failures never roll back
 * others. The accepted URLs' rows are inserted in one statement and their workflows started
 * concurrently (a 1,000-URL batch is not created one URL after another).
 */
export async function createDocumentsFromUrls(deps: DocumentDeps, partner: string, kbName: string, input: BatchUrlInput) {
  await findKnowledgeBase(deps.db, partner, kbName);
  const dest = await liveFolderOrRefusal(deps.db, partner, kbName, input.folder);
  const items = input.urls.map((url) => {
    if (dest instanceof AppError) return dest;
    try {
      return urlDocumentRow(dest, { ...input, url });
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      return err;
    }
  });
  const outcomes = await createBatch(deps, dest, items);
  return summaryOf(input.urls.map((url, i) => {
    const { http_status: _status, ...rest } = outcomes[i]! as BatchOutcome & { http_status?: number };
    return { url, ...rest };
  }));
}

/** Rename, change type or change URL: small edits of a document's metadata. */
export async function updateDocumentFields(db: Db, partner: string, kb: string, documentId: string, change: { name?: string; type?: 'file' | 'url'; url?: string }) {
  const { document, partner: owner } = await findDocument(db, partner, kb, documentId);
  if (document.deletionRequestedAt) throw new AppError('conflict', 'the document is being deleted');
  if (change.url !== undefined) checkDocumentUrl(change.url, 'url');
  const videoId = change.url !== undefined ? { videoId: videoOf(owner, change.url).videoId } : {};
  // A name the client gives is kept: the page's or video's title no longer replaces it when digitized.
  const named = change.name !== undefined ? { nameFromSource: false } : {};
  return db.document.update({ where: { id: documentId }, data: { ...change, ...videoId, ...named }, include: { folder: true } });
}

/** An empty document (for manual content editing): no original, no processing. */
export async function createEmptyDocument(db: Db, partner: string, kbName: string, input: { name: string; folder: string; type: 'file' | 'url'; url?: string }) {
  if (input.type === 'url') {
    if (!input.url) throw badRequest('form.url is required when type is url');
    checkDocumentUrl(input.url, 'form.url');
  }
  const dest = await liveDestination(db, partner, kbName, input.folder);
  const { videoId, audioVideo } = input.type === 'url' ? videoOf(dest.partner, input.url!) : { videoId: null, audioVideo: null };
  return insertDocument(db, dest, {
    id: crypto.randomUUID(),
    knowledgeBaseId: dest.kb.id,
    folderId: dest.folder.id,
    name: input.name,
    type: input.type,
    url: input.type === 'url' ? input.url! : null,
    videoId,
  }, audioVideo);
}
