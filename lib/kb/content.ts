import crypto from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { Client } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import yazl from 'yazl';
import type { Document, Folder } from '../../generated/prisma/client.js';
import type { Db, Prisma } from '../db.js';
import { AppError, badRequest, conflict, notFound } from '../errors.js';
import type { FileStorage } from '../storage.js';
import { documentFiles } from '../storage.js';
import type { VectorIndex } from '../providers/vector-index.js';
import { release, reserve, settle, type SettleOutcome } from '../budget/ledger.js';
import { wakeBudgetBlockedWork } from '../budget/wake.js';
import { searchAttributes } from '../search-attributes.js';
import { workflowIds } from '../temporal.js';
import { countCharacters } from './text.js';
import { refreshKnowledgeBaseEmbeddingStatus } from './embedding-status.js';
import { findDocument, findKnowledgeBase } from './lookup.js';
import { startDocumentPipeline } from './pipeline.js';
import { checkUpload, type UploadedFile } from './uploads.js';

/**
 * Document content (knowledge-base spec 4.4): reading, replacing and downloading the versions of a
 * document (original, digitized, rewritten draft, rewritten final) and the rewritten bundle.
 *
 * Decisions where the spec is silent:
 * - A version exists when the document records its file name and the file is in storage; otherwise
 *   reading or downloading it answers 404.
 * - Only text originals (.txt, .md, .markdown) can be read as text or replaced; other originals are
 *   binary (read them with the download endpoint). A document without an original (an empty
 *   document) gets one: `original.txt` from PUT, or the uploaded text file from POST (stored as
 *   uploaded; PUT text is stored with LF line ends, as form fields arrive with CRLF). Replacing the
 *   original has no quota effect, starts no processing, and drops the extraction cache so that a
 *   later digitization reads the new original.
 * - Submitted digitized and rewritten text is stored as digitization stores it: UTF-8, BOM dropped,
 *   line ends normalised to LF. Blank (whitespace-only) content is refused (400). Uploaded digitized
 *   and rewritten files must be valid UTF-8 without NUL characters (400 otherwise).
 * - A content update is refused with 409 while the document's workflow (`document-<id>`) runs
 *   (processing, budget-blocked, or failed and waiting for a retry), and while the document is
 *   being deleted.
 * - A digitized update is admitted synchronously against the character budget for the characters
 *   it adds (it may free characters too). Admitted: the text becomes the digitized version at once;
 *   it does not re-run rewriting or embedding (update `rewritten` for that). Rejected only by the
 *   request-level `character_limit`: 403 `QUOTA_EXCEEDED:knowledge_chars` and nothing changes.
 *   Blocked by the KB budget: the text becomes pending work (the extraction cache) of a new
 *   digitize-only workflow that waits BUDGET_BLOCKED and finishes by itself once capacity exists;
 *   the previous digitized version stays until then. The settled usage event is a `digitization`
 *   event without cost.
 */

export const contentTypes = ['original', 'digitized', 'rewritten', 'draft'] as const;
export type ContentType = (typeof contentTypes)[number];
export const editableContentTypes = ['original', 'digitized', 'rewritten'] as const;
export type EditableContentType = (typeof editableContentTypes)[number];
export type ContentFormat = 'raw' | 'markdown';

/** Originals that are text and may be read through the content endpoint or replaced. */
export const textOriginalExtensions = ['txt', 'md', 'markdown'];

export interface ContentDeps {
  db: Db;
  storage: FileStorage;
  index: VectorIndex;
  temporal: Client;
  taskQueue: string;
}

type DocumentRow = Document & { folder: Folder };
type Tx = Prisma.TransactionClient;

// ---------------------------------------------------------------------------------------------
// Clean Markdown

/**
 * Renders stored rewritten content as clean Markdown (GET ...?format=markdown). The rule, applied
 * outside fenced code blocks (whose lines are kept as they are, apart from line ends):
 * 1. a BOM is dropped and line ends become LF;
 * 2. a document wholly wrapped in one ```markdown (or ```md) fence, as language models sometimes
 *    answer, is unwrapped;
 * 3. trailing spaces and tabs are removed from every line (so a two-space hard break becomes a soft
 *    break);
 * 4. runs of blank lines collapse to one blank line, and leading and trailing blank lines go;
 * 5. every ATX heading (`#` to `######`) and every code fence has a blank line before it, and every
 *    heading a blank line after it;
 * 6. the result ends with exactly one newline (empty content stays empty).
 */
export function renderCleanMarkdown(text: string): string {
  let src = text.replace(/^\uFEFF/, '').replace(/\r\n?/g, '\n');
  const wrapped = /^\s*(`{3,}|~{3,})[ \t]*(?:markdown|md)[ \t]*\n([\s\S]*?)\n[ \t]*\1[ \t]*\s*$/i.exec(src);
  if (wrapped) src = wrapped[2]!;

  const out: string[] = [];
  const last = () => out[out.length - 1];
  const blankBefore = () => {
    if (out.length > 0 && last() !== '') out.push('');
  };
  let fence: { char: string; length: number } | null = null;
  let afterHeading = false;
  for (const raw of src.split('\n')) {
    if (fence) {
      out.push(raw);
      const close = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(raw);
      if (close && close[1]![0] === fence.char && close[1]!.length >= fence.length) fence = null;
      continue;
    }
    const line = raw.replace(/[ \t]+$/, '');
    if (line === '') {
      if (out.length > 0 && last() !== '') out.push('');
      continue;
    }
    if (afterHeading) blankBefore();
    afterHeading = false;
    const open = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (open) {
      blankBefore();
      out.push(line);
      fence = { char: open[1]![0]!, length: open[1]!.length };
      continue;
    }
    if (/^ {0,3}#{1,6}(?:[ \t]|$)/.test(line)) {
      blankBefore();
      afterHeading = true;
    }
    out.push(line);
  }
  while (out.length > 0 && last() === '') out.pop();
  return out.length ? `${out.join('\n')}\n` : '';
}

// ---------------------------------------------------------------------------------------------
// Versions and their files

function versionFile(doc: DocumentRow, type: ContentType): { key: string; recorded: string | null } {
  switch (type) {
    case 'original':
      return { key: doc.originalExtension ? documentFiles.original(doc.id, doc.originalExtension) : '', recorded: doc.originalExtension ? doc.fileOriginal : null };
    case 'digitized':
      return { key: documentFiles.digitized(doc.id), recorded: doc.fileDigitized };
    case 'rewritten':
      return { key: documentFiles.rewritten(doc.id), recorded: doc.fileRewritten };
    case 'draft':
      return { key: documentFiles.rewrittenDraft(doc.id), recorded: doc.fileRewrittenDraft };
  }
}

const versionLabel: Record<ContentType, string> = { original: 'original', digitized: 'digitized', rewritten: 'final rewritten', draft: 'rewritten draft' };

async function existingVersion(storage: FileStorage, doc: DocumentRow, type: ContentType): Promise<string | null> {
  const { key, recorded } = versionFile(doc, type);
  if (!recorded || !key) return null;
  return (await storage.exists(key)) ? key : null;
}

const missingVersion = (doc: DocumentRow, type: ContentType) => notFound(`document ${doc.id} has no ${versionLabel[type]} content`);

const isTextOriginal = (doc: DocumentRow) => !doc.originalExtension || textOriginalExtensions.includes(doc.originalExtension);

function decodeUtf8(data: Buffer): string | null {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(data);
  } catch {
    return null;
  }
}

/** GET .../content/{type}: `{content, format}`; `format=markdown` applies to rewritten and draft only. */
export async function readContent(deps: Pick<ContentDeps, 'db' | 'storage'>, partner: string, kb: string, documentId: string, type: ContentType, format: ContentFormat) {
  const { document } = await findDocument(deps.db, partner, kb, documentId);
  const rendersMarkdown = format === 'markdown' && (type === 'rewritten' || type === 'draft');
  const key = await existingVersion(deps.storage, document, type);
  if (!key) {
    if (rendersMarkdown) throw badRequest(`format=markdown needs ${versionLabel[type]} content, and document ${document.id} has not been rewritten yet`);
    throw missingVersion(document, type);
  }
  if (type === 'original' && !isTextOriginal(document)) throw badRequest('original is binary; use download');
  const content = decodeUtf8(await deps.storage.read(key));
  if (content === null) {
    if (type === 'original') throw badRequest('original is binary; use download');
    throw new AppError('internal_error', `the stored ${versionLabel[type]} content is not valid UTF-8`);
  }
  return rendersMarkdown ? { content: renderCleanMarkdown(content), format: 'markdown' as const } : { content, format: 'raw' as const };
}

// ---------------------------------------------------------------------------------------------
// Downloads

const originalContentTypes: Record<string, string> = {
  txt: 'text/plain; charset=utf-8',
  md: 'text/markdown; charset=utf-8',
  markdown: 'text/markdown; charset=utf-8',
  html: 'text/html; charset=utf-8',
  htm: 'text/html; charset=utf-8',
  py: 'text/x-python; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
  json: 'application/json',
  xml: 'application/xml',
  yaml: 'application/yaml',
  yml: 'application/yaml',
  pdf: 'application/pdf',
  doc: 'application/msword',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  ppt: 'application/vnd.ms-powerpoint',
  pptx: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  xls: 'application/vnd.ms-excel',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  epub: 'application/epub+zip',
  mp4: 'video/mp4',
  mov: 'video/quicktime',
  m4v: 'video/x-m4v',
  avi: 'video/x-msvideo',
  mp3: 'audio/mpeg',
  wav: 'audio/wav',
  m4a: 'audio/mp4',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  png: 'image/png',
  tif: 'image/tiff',
  tiff: 'image/tiff',
  gif: 'image/gif',
  webp: 'image/webp',
};

export const contentTypeOfExtension = (extension: string) => originalContentTypes[extension.toLowerCase()] ?? 'application/octet-stream';

/** A file name safe for Content-Disposition: no path separators or control characters. */
function safeFileName(name: string, fallback: string): string {
  const cleaned = name.replace(/[\u0000-\u001f\u007f/\\]/g, '_').trim();
  return cleaned || fallback;
}

/** `<document name without extension>.<type>.md`, e.g. `lighthouse.digitized.md`. */
export function versionFileName(documentName: string, type: Exclude<ContentType, 'original'>): string {
  const base = documentName.slice(0, documentName.length - path.extname(documentName).length) || documentName || 'document';
  return safeFileName(`${base}.${type}.md`, `document.${type}.md`);
}

/** GET .../download/{type}: the stored file as a stream, with its download name and media type. */
export async function openDownload(deps: Pick<ContentDeps, 'db' | 'storage'>, partner: string, kb: string, documentId: string, type: ContentType) {
  const { document } = await findDocument(deps.db, partner, kb, documentId);
  const key = await existingVersion(deps.storage, document, type);
  if (!key) throw missingVersion(document, type);
  if (type === 'original') {
    const extension = document.originalExtension!;
    return {
      stream: deps.storage.stream(key),
      filename: safeFileName(document.fileOriginal ?? `original.${extension}`, `original.${extension}`),
      contentType: contentTypeOfExtension(extension),
    };
  }
  return { stream: deps.storage.stream(key), filename: versionFileName(document.name, type), contentType: 'text/markdown; charset=utf-8' };
}

// ---------------------------------------------------------------------------------------------
// Rewritten bundle

/**
 * GET .../rewritten-bundle: a ZIP, produced as a stream (files are read one at a time while the
 * archive is sent), with `documents_info.json` first and then `<doc_id>.md` for every document of
 * the KB that has final rewritten content and is not being deleted.
 */
export async function rewrittenBundle(deps: Pick<ContentDeps, 'db' | 'storage'>, partner: string, kbName: string): Promise<{ filename: string; stream: Readable }> {
  const { kb } = await findKnowledgeBase(deps.db, partner, kbName);
  const rows = await deps.db.document.findMany({
    where: { knowledgeBaseId: kb.id, deletionRequestedAt: null, fileRewritten: { not: null } },
    include: { folder: true },
    orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
  });
  const present = (await Promise.all(rows.map(async (d) => ((await deps.storage.exists(documentFiles.rewritten(d.id))) ? d : null)))).filter((d): d is DocumentRow => d !== null);
  const info = present.map((d) => ({
    id: d.id,
    name: d.name,
    folder: d.folder.name,
    file: `${d.id}.md`,
    final_rewrite_char_count: d.finalRewriteCharCount,
    updated_at: d.updatedAt.toISOString(),
  }));

  const zip = new yazl.ZipFile();
  const output = zip.outputStream as Readable;
  // yazl reports its own failures as 'error' events; a failed read stream must end the download
  // (the client then sees a broken transfer rather than a silently truncated archive).
  zip.on('error', (err: Error) => output.destroy(err));
  zip.addBuffer(Buffer.from(`${JSON.stringify(info, null, 2)}\n`), 'documents_info.json');
  for (const d of present) {
    zip.addReadStreamLazy(`${d.id}.md`, (cb) => {
      const stream = deps.storage.stream(documentFiles.rewritten(d.id));
      stream.on('error', (err) => zip.emit('error', err));
      cb(null, stream);
    });
  }
  zip.end();
  return { filename: safeFileName(`${kb.name}-rewritten.zip`, 'rewritten.zip'), stream: output };
}

// ---------------------------------------------------------------------------------------------
// Updates

export interface ContentUpdate {
  /** The new content: text from a form field, or an uploaded file. */
  text?: string;
  file?: UploadedFile;
  /** Request-level cap on the KB's digitized characters (digitized only). */
  characterLimit?: number | null;
  /** For the operation key of a digitized admission. */
  requestId: string;
}

export type ContentUpdateResult =
  | { status: 'updated'; document: DocumentRow }
  | { status: 'budget_blocked'; filename: string; reason: string; detail: string; document: DocumentRow };

/** 409 while the document's workflow runs (or the document is being deleted). */
async function assertIdle(temporal: Client, doc: DocumentRow): Promise<void> {
  if (doc.deletionRequestedAt) throw conflict(`document ${doc.id} is being deleted`);
  let description;
  try {
    description = await temporal.workflow.getHandle(workflowIds.document(doc.id)).describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return;
    throw err;
  }
  if (description.status.name !== 'RUNNING') return;
  const status = description.typedSearchAttributes.get(searchAttributes.pipelineStatus) ?? 'running';
  throw conflict(`document ${doc.id} is being processed (pipeline status: ${status}); update its content when its processing has finished`, { pipeline_status: status });
}

/** Normalises submitted text as digitization does: BOM dropped, LF line ends. */
const normaliseText = (text: string) => text.replace(/^\uFEFF/, '').replace(/\r\n?/g, '\n');

async function submittedText(deps: ContentDeps, type: EditableContentType, update: ContentUpdate): Promise<string> {
  let text: string;
  if (update.file) {
    const name = update.file.originalName;
    const data = await fsp.readFile(update.file.path);
    const decoded = decodeUtf8(data);
    if (decoded === null) throw badRequest(`${name} is not valid UTF-8 text; ${type} content must be UTF-8`);
    if (decoded.includes('\u0000')) throw badRequest(`${name} contains NUL characters; ${type} content must be text`);
    text = decoded;
  } else if (update.text !== undefined) {
    text = update.text;
  } else {
    throw badRequest('the new content is missing');
  }
  text = normaliseText(text);
  if (!text.trim()) throw badRequest(`the new ${type} content is empty`);
  return text;
}

/** PUT/POST .../content/{type}. */
export async function updateContent(deps: ContentDeps, partner: string, kbName: string, documentId: string, type: EditableContentType, update: ContentUpdate): Promise<ContentUpdateResult> {
  const found = await findDocument(deps.db, partner, kbName, documentId);
  const doc = found.document;
  if (type === 'original') return { status: 'updated', document: await replaceOriginal(deps, doc, update) };
  const text = await submittedText(deps, type, update);
  await assertIdle(deps.temporal, doc);
  if (type === 'rewritten') return { status: 'updated', document: await replaceRewritten(deps, found.partner.name, doc, text) };
  return replaceDigitized(deps, found.partner.name, doc, text, update);
}

const reload = (db: Db, id: string) => db.document.findUniqueOrThrow({ where: { id }, include: { folder: true } });

async function replaceOriginal(deps: ContentDeps, doc: DocumentRow, update: ContentUpdate): Promise<DocumentRow> {
  if (!isTextOriginal(doc)) throw badRequest(`original is binary (.${doc.originalExtension}); only text originals (${textOriginalExtensions.map((e) => `.${e}`).join(', ')}) can be replaced`);
  let extension = doc.originalExtension ?? 'txt';
  let fileOriginal = doc.fileOriginal ?? `${path.basename(doc.name, path.extname(doc.name)) || 'original'}.txt`;
  if (update.file) {
    ({ extension } = await checkUpload(update.file));
    if (!textOriginalExtensions.includes(extension)) throw badRequest(`a replacement original must be a text file (${textOriginalExtensions.map((e) => `.${e}`).join(', ')})`);
    fileOriginal = update.file.originalName;
  } else if (update.text === undefined || !update.text.trim()) {
    throw badRequest('the new original content is empty');
  }
  await assertIdle(deps.temporal, doc);
  const key = documentFiles.original(doc.id, extension);
  if (update.file) await deps.storage.moveIn(key, update.file.path);
  // Form fields arrive with CRLF line ends (multipart/form-data normalises them): store LF text.
  else await deps.storage.write(key, normaliseText(update.text!));
  if (doc.originalExtension && doc.originalExtension !== extension) await deps.storage.removePrefix(documentFiles.original(doc.id, doc.originalExtension));
  // The extraction cache belongs to the old original.
  await deps.storage.removePrefix(documentFiles.extracted(doc.id));
  await deps.db.document.update({ where: { id: doc.id }, data: { originalExtension: extension, fileOriginal } });
  return reload(deps.db, doc.id);
}

async function replaceRewritten(deps: ContentDeps, partner: string, doc: DocumentRow, text: string): Promise<DocumentRow> {
  await deps.storage.write(documentFiles.rewritten(doc.id), text);
  await deps.db.document.update({
    where: { id: doc.id },
    data: {
      fileRewritten: 'rewritten.md',
      finalRewriteCharCount: countCharacters(text),
      embeddingStatus: 'pending',
      embeddingError: null,
      inQueues: [...doc.inQueues.filter((q) => q !== 'embedding'), 'embedding'],
    },
  });
  await refreshKnowledgeBaseEmbeddingStatus(deps.db, doc.knowledgeBaseId);
  try {
    // The old version's vectors go first, so search never mixes old and new content.
    await deps.index.deleteDocumentChunks(doc.id, 0);
    await startDocumentPipeline(deps.temporal, deps.taskQueue, { documentId: doc.id, knowledgeBaseId: doc.knowledgeBaseId, partner, steps: ['embed'], requestCharacterLimit: null });
  } catch (err) {
    // A concurrent update started the embedding: it reads the newest rewritten content anyway.
    if (err instanceof WorkflowExecutionAlreadyStartedError) throw conflict(`document ${doc.id} is being processed; its newest rewritten content will be embedded`);
    const message = `could not queue embedding: ${(err as Error).message}`;
    const current = await reload(deps.db, doc.id);
    await deps.db.document.update({
      where: { id: doc.id },
      data: { embeddingStatus: 'failed', embeddingError: message, inQueues: current.inQueues.filter((q) => q !== 'embedding') },
    });
    await refreshKnowledgeBaseEmbeddingStatus(deps.db, doc.knowledgeBaseId);
    throw new AppError('unavailable', message);
  }
  return reload(deps.db, doc.id);
}

/**
 * Settles a digitization reservation and records the document's accepted digitized text in the
 * same transaction, under the KB lock: the usage event carries the characters the text adds to (or
 * frees from) what the document held. `write` runs inside that transaction before the document row
 * changes (a manual update writes its file there, so concurrent updates of one KB apply in the
 * order they settle). Shared by manual digitized updates and the digitize activity's pattern.
 */
export async function acceptDigitizedCharacters(db: Db, operationKey: string, documentId: string, charCount: number, write?: () => Promise<void>): Promise<SettleOutcome> {
  return settle(
    db,
    operationKey,
    async (tx: Tx) => ({ characters: charCount - (await tx.document.findUniqueOrThrow({ where: { id: documentId } })).acceptedCharacters }),
    async (tx: Tx) => {
      if (write) await write();
      const current = await tx.document.findUniqueOrThrow({ where: { id: documentId }, select: { inQueues: true } });
      await tx.document.update({
        where: { id: documentId },
        // The digitized text is final: the document leaves the digitize queue.
        data: { fileDigitized: 'digitized.md', digitizedCharCount: charCount, acceptedCharacters: charCount, processingError: null, inQueues: current.inQueues.filter((q) => q !== 'digitize') },
      });
    },
  );
}

async function replaceDigitized(deps: ContentDeps, partner: string, doc: DocumentRow, text: string, update: ContentUpdate): Promise<ContentUpdateResult> {
  const { db, storage } = deps;
  const charCount = countCharacters(text);
  const delta = charCount - doc.acceptedCharacters;
  const workflowId = workflowIds.document(doc.id);
  const operationKey = `content-${doc.id}-${update.requestId}-${crypto.randomUUID()}`;
  const admission = await reserve(db, {
    knowledgeBaseId: doc.knowledgeBaseId,
    operationKey,
    workflowId,
    documentId: doc.id,
    category: 'digitization',
    bound: { characters: Math.max(0, delta) },
    requestCharacterLimit: update.characterLimit ?? null,
  });

  if (admission.admitted) {
    let outcome: SettleOutcome;
    try {
      outcome = await acceptDigitizedCharacters(db, operationKey, doc.id, charCount, () => storage.write(documentFiles.digitized(doc.id), text));
    } catch (err) {
      await release(db, operationKey, 'content update failed');
      throw err;
    }
    if (outcome !== 'settled') throw new AppError('internal_error', `the digitized update could not be recorded (${outcome})`);
    // Shorter text frees characters: work waiting for capacity may go on.
    if (delta < 0) await wakeBudgetBlockedWork(db, deps.temporal, doc.knowledgeBaseId);
    return { status: 'updated', document: await reload(db, doc.id) };
  }

  if (admission.reason === 'request_character_limit') {
    throw new AppError('quota_exceeded', 'QUOTA_EXCEEDED:knowledge_chars', { reason: admission.reason, detail: admission.detail });
  }

  // Blocked by the KB budget: keep the text as the pending extraction of a digitize-only workflow,
  // which waits BUDGET_BLOCKED and accepts it once capacity exists.
  const cacheKey = documentFiles.extracted(doc.id);
  const previous = (await storage.exists(cacheKey)) ? await storage.read(cacheKey) : null;
  await storage.write(cacheKey, text);
  // Visible at once; the workflow clears it when it accepts the text (set before the start, so a
  // workflow that is admitted at once cannot have its cleared error overwritten).
  await db.document.update({ where: { id: doc.id }, data: { processingError: `BUDGET_BLOCKED:${admission.reason}: ${admission.detail}` } });
  try {
    await startDocumentPipeline(deps.temporal, deps.taskQueue, {
      documentId: doc.id,
      knowledgeBaseId: doc.knowledgeBaseId,
      partner,
      steps: ['digitize'],
      requestCharacterLimit: update.characterLimit ?? null,
    });
  } catch (err) {
    if (previous) await storage.write(cacheKey, previous);
    else await storage.removePrefix(cacheKey);
    await db.document.update({ where: { id: doc.id }, data: { processingError: doc.processingError } });
    if (err instanceof WorkflowExecutionAlreadyStartedError) throw conflict(`document ${doc.id} is being processed; update its content when its processing has finished`);
    throw new AppError('unavailable', `could not start processing: ${(err as Error).message}`);
  }
  return {
    status: 'budget_blocked',
    filename: update.file?.originalName ?? 'digitized.md',
    reason: admission.reason,
    detail: admission.detail,
    document: await reload(db, doc.id),
  };
}
