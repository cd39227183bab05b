import crypto from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Db, Prisma } from '../../platform/db.js';
import { AppError, badRequest, conflict } from '../../platform/errors.js';
import { documentFiles } from '../../platform/storage.js';
import { countCharacters, isBlank, normalizeLineEnds } from '../../platform/text.js';
import { release, reserve, settle, type SettleOutcome } from '../../budget/ledger.js';
import { wakeBudgetBlockedWork } from '../../budget/wake.js';
import { documentWorkflowId } from '../../contracts/document-pipeline.js';
import { refreshKnowledgeBaseEmbeddingStatus } from '../embedding-queue.js';
import { checkUpload, type UploadedFile } from '../../digitization/uploads.js';
import { findDocument } from '../lookup.js';
import { standDownWaitingRun, startDocumentPipeline } from '../pipeline-runs.js';
import { moveQueueMarkers } from '../queue-markers.js';
import { markBudgetBlocked, notWaiting, stateOf } from '../state.js';
import { decodeUtf8, isTextOriginal, textOriginalExtensions, type ContentDeps, type DocumentRow, type EditableContentVersion } from './versions.js';

type Tx = Prisma.TransactionClient;

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

/**
 * 409 while the document is being deleted, or while its workflow works or is paused. A run that
 * waits (a failed step awaiting `retry`, or budget-blocked) stands down for the new content: the
 * user can fix a document whose processing failed, e.g. paste the text of an unreadable PDF.
 */
async function makeWayForUpdate(temporal: Client, doc: DocumentRow): Promise<void> {
  if (doc.deletionRequestedAt) throw conflict(`document ${doc.id} is being deleted`);
  await standDownWaitingRun(temporal, doc.id, doc);
}

async function submittedText(deps: ContentDeps, type: EditableContentVersion, update: ContentUpdate): Promise<string> {
  let text: string;
  if (update.file) {
    const name = update.file.originalName;
    const data = update.file.bytes ?? (await fsp.readFile(update.file.path));
    const decoded = decodeUtf8(data);
    if (decoded === null) throw badRequest(`${name} is not valid UTF-8 text; ${type} content must be UTF-8`);
    if (decoded.includes('\u0000')) throw badRequest(`${name} contains NUL characters; ${type} content must be text`);
    text = decoded;
  } else if (update.text !== undefined) {
    text = update.text;
  } else {
    throw badRequest('the new content is missing');
  }
  text = normalizeLineEnds(text);
  if (isBlank(text)) throw badRequest(`the new ${type} content is empty`);
  return text;
}

/** PUT/POST .../content/{type}. */
export async function updateContent(deps: ContentDeps, partner: string, kbName: string, documentId: string, type: EditableContentVersion, update: ContentUpdate): Promise<ContentUpdateResult> {
  const found = await findDocument(deps.db, partner, kbName, documentId);
  const doc = found.document;
  if (type === 'original') return { status: 'updated', document: await replaceOriginal(deps, found.partner, doc, update) };
  const text = await submittedText(deps, type, update);
  await makeWayForUpdate(deps.temporal, doc);
  if (type === 'rewritten') return { status: 'updated', document: await replaceRewritten(deps, found.partner.name, doc, text) };
  return replaceDigitized(deps, found.partner.name, doc, text, update);
}

const reload = (db: Db, id: string) => db.document.findUniqueOrThrow({ where: { id }, include: { folder: true } });

/**
 * A new original: any supported file by upload (checked as a new document's would be, the
 * partner's allow_audio_video included), or text for a text original. It is stored only; it is
 * digitized when the document is processed again (POST /api/queue/process?action=digitize).
 */
async function replaceOriginal(deps: ContentDeps, partner: { allowAudioVideo: boolean }, doc: DocumentRow, update: ContentUpdate): Promise<DocumentRow> {
  let extension = doc.originalExtension ?? 'txt';
  let fileOriginal = doc.fileOriginal ?? `${path.basename(doc.name, path.extname(doc.name)) || 'original'}.txt`;
  if (update.file) {
    ({ extension } = await checkUpload(update.file, partner));
    fileOriginal = update.file.originalName;
  } else if (!isTextOriginal(doc)) {
    throw badRequest(`original is binary (.${doc.originalExtension}); only text originals (${textOriginalExtensions.map((e) => `.${e}`).join(', ')}) can be replaced with text: upload the new original as a file`);
  } else if (update.text === undefined || isBlank(update.text)) {
    throw badRequest('the new original content is empty');
  }
  await makeWayForUpdate(deps.temporal, doc);
  const key = documentFiles.original(doc.id, extension);
  if (update.file) await deps.storage.moveIn(key, update.file.path);
  // Form fields arrive with CRLF line ends (multipart/form-data normalises them): store LF text.
  else await deps.storage.write(key, normalizeLineEnds(update.text!));
  if (doc.originalExtension && doc.originalExtension !== extension) await deps.storage.removePrefix(documentFiles.original(doc.id, doc.originalExtension));
  // The extraction cache belongs to the old original.
  await deps.storage.removePrefix(documentFiles.extracted(doc.id));
  await deps.db.document.update({ where: { id: doc.id }, data: { originalExtension: extension, fileOriginal } });
  return reload(deps.db, doc.id);
}

async function replaceRewritten(deps: ContentDeps, partner: string, doc: DocumentRow, text: string): Promise<DocumentRow> {
  await deps.storage.write(documentFiles.rewritten(doc.id), text);
  await deps.db.$transaction([
    deps.db.document.update({
      where: { id: doc.id },
      data: { fileRewritten: 'rewritten.md', finalRewriteCharCount: countCharacters(text), embeddingStatus: 'pending', embeddingError: null, ...notWaiting, embeddingChunkCount: 0 },
    }),
    moveQueueMarkers(deps.db, doc.id, { add: ['embedding'] }),
  ]);
  await refreshKnowledgeBaseEmbeddingStatus(deps.db, doc.knowledgeBaseId);
  // Spec 4.4: the old vectors are cleaned first, so text the partner replaced (say, to correct it)
  // is never retrieved again, even while the new embedding waits for budget or fails. Done once the
  // row says the embedding is pending: a crash from here on leaves it queued (the reconciler starts
  // it), and the embed step replaces whatever old chunks are left.
  let cleanupFailure: Error | null = null;
  try {
    await deps.index.deleteDocumentChunks(doc.id, 0);
  } catch (err) {
    cleanupFailure = err as Error;
  }
  try {
    await startDocumentPipeline(deps, { documentId: doc.id, knowledgeBaseId: doc.knowledgeBaseId, partner, steps: ['embed'], requestCharacterLimit: null });
  } catch (err) {
    // A concurrent update started the embedding: it reads the newest rewritten content anyway.
    if (err instanceof WorkflowExecutionAlreadyStartedError) throw conflict(`document ${doc.id} is being processed; its newest rewritten content will be embedded`);
    const message = `could not queue embedding: ${(err as Error).message}`;
    await deps.db.$transaction([
      deps.db.document.update({ where: { id: doc.id }, data: { embeddingStatus: 'failed', embeddingError: message } }),
      moveQueueMarkers(deps.db, doc.id, { remove: ['embedding'] }),
    ]);
    await refreshKnowledgeBaseEmbeddingStatus(deps.db, doc.knowledgeBaseId);
    throw new AppError('unavailable', message);
  }
  if (cleanupFailure) {
    throw new AppError('unavailable', `the new rewritten content is stored and queued for embedding, but the old vectors could not be removed yet (${cleanupFailure.message}); the embedding replaces them when it runs`);
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
      await tx.document.update({
        where: { id: documentId },
        data: { fileDigitized: 'digitized.md', digitizedCharCount: charCount, acceptedCharacters: charCount, ...notWaiting },
      });
      // The digitized text is final: the document leaves the digitize queue.
      await moveQueueMarkers(tx, documentId, { remove: ['digitize'] });
    },
  );
}

async function replaceDigitized(deps: ContentDeps, partner: string, doc: DocumentRow, text: string, update: ContentUpdate): Promise<ContentUpdateResult> {
  const { db, storage } = deps;
  const charCount = countCharacters(text);
  const delta = charCount - doc.acceptedCharacters;
  const workflowId = documentWorkflowId(doc.id);
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
  await markBudgetBlocked(db, doc.id, admission.reason, admission.detail);
  try {
    await startDocumentPipeline(deps, {
      documentId: doc.id,
      knowledgeBaseId: doc.knowledgeBaseId,
      partner,
      steps: ['digitize'],
      requestCharacterLimit: update.characterLimit ?? null,
    });
  } catch (err) {
    if (previous) await storage.write(cacheKey, previous);
    else await storage.removePrefix(cacheKey);
    await db.document.update({ where: { id: doc.id }, data: stateOf(doc) });
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
