import crypto from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { Db, Prisma } from '../db.js';
import { AppError, badRequest, notFound } from '../errors.js';
import type { FileStorage } from '../storage.js';
import { documentFiles } from '../storage.js';
import type { PipelineStep } from '../../activities/documents.js';
import { findKnowledgeBase } from './lookup.js';
import { checkUpload, type UploadedFile } from './uploads.js';
import { startDocumentPipeline } from './pipeline.js';
import { youTubeVideoId } from '../providers/video-transcripts.js';

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
    inQueues: ['digitize'],
  };
}

/**
 * The steps a new upload runs, from the flags the client sent. use_original_as_rewritten wins
 * over auto_rewrite when both are set: the client asked for no LLM rewrite.
 */
export function stepsForNewUpload(input: Pick<CreateDocumentInput, 'use_original_as_rewritten' | 'auto_rewrite'>): PipelineStep[] {
  if (input.use_original_as_rewritten) return ['digitize', 'finalize_original', 'embed'];
  if (input.auto_rewrite) return ['digitize', 'rewrite', 'embed'];
  return ['digitize'];
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
  return createDocumentFromFile(deps, partner, kbName, input, file);
}

/** One uploaded file to one document (single and batch uploads). */
export async function createDocumentFromFile(deps: DocumentDeps, partner: string, kbName: string, input: Omit<CreateDocumentInput, 'type'>, file: UploadedFile) {
  const { db, storage, temporal, taskQueue } = deps;
  const found = await findKnowledgeBase(db, partner, kbName);
  if (found.kb.deletionRequestedAt) throw new AppError('conflict', `knowledge base ${JSON.stringify(kbName)} is being deleted`);
  const folder = await db.folder.findUnique({ where: { knowledgeBaseId_name: { knowledgeBaseId: found.kb.id, name: input.folder } } });
  if (!folder || folder.deletionRequestedAt) throw notFound(`folder ${JSON.stringify(input.folder)} does not exist in knowledge base ${JSON.stringify(kbName)}`);
  const { extension } = await checkUpload(file, found.partner);

  const id = crypto.randomUUID();
  await storage.moveIn(documentFiles.original(id, extension), file.path);
  const steps = stepsForNewUpload(input);
  let document;
  try {
    document = await createWithinDocumentQuota(db, found.partner, (tx) => tx.document.create({
      data: {
        id,
        knowledgeBaseId: found.kb.id,
        folderId: folder.id,
        name: input.name?.trim() || file.originalName,
        type: 'file',
        originalExtension: extension,
        fileOriginal: file.originalName,
        ...processingFields(input),
      },
      include: { folder: true },
    }));
  } catch (err) {
    // No row refers to the stored original: remove it rather than leave an orphan in storage.
    await storage.removePrefix(documentFiles.prefix(id));
    throw err;
  }
  try {
    await startDocumentPipeline(temporal, taskQueue, { documentId: id, knowledgeBaseId: found.kb.id, partner: found.partner.name, steps, requestCharacterLimit: input.character_limit ?? null });
  } catch (err) {
    await db.document.delete({ where: { id } });
    await storage.removePrefix(documentFiles.prefix(id));
    throw new AppError('unavailable', `could not start processing: ${(err as Error).message}`);
  }
  return document;
}

/**
 * Creates a document while enforcing the partner's max_documents: creations of one partner are
 * serialised on its row, so concurrent uploads cannot pass the limit together.
 */
export async function createWithinDocumentQuota<T>(db: Db, partner: { id: string; maxDocuments: number }, create: (tx: Prisma.TransactionClient) => Promise<T>): Promise<T> {
  return db.$transaction(async (tx) => {
    await tx.$queryRaw`SELECT id FROM partners WHERE id = ${partner.id}::uuid FOR UPDATE`;
    const count = await tx.document.count({ where: { knowledgeBase: { partnerId: partner.id } } });
    if (count >= partner.maxDocuments) throw new AppError('forbidden', `QUOTA_EXCEEDED:max_documents (the partner may hold ${partner.maxDocuments} documents)`);
    return create(tx);
  });
}

export interface BatchUploadInput extends Omit<CreateDocumentInput, 'type' | 'name'> {
  names?: string | string[];
}

/** Spec 4.3 batch file upload: the limits this deployment applies (README, "API reference"). */
export const batchUploadLimits = { maxFiles: 100, maxTotalBytes: 1024 * 1024 * 1024 };

/**
 * Each file becomes a document on its own: one invalid or refused file is reported in its result
 * and never rolls back the others; each document's workflow admits its characters separately.
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

  const results = [];
  for (const [i, file] of uploads.entries()) {
    try {
      const doc = await createDocumentFromFile(deps, partner, kbName, { ...input, name: names[i] }, file);
      results.push({ filename: file.originalName, status: 'success' as const, document_id: doc.id });
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      results.push({ filename: file.originalName, status: 'failed' as const, document_id: null, error: err.message, http_status: err.status });
    }
  }
  const succeeded = results.filter((r) => r.status === 'success').length;
  return { summary: { total: results.length, succeeded, failed: results.length - succeeded }, results };
}

/** Whether a URL is one a document may be created from: absolute http(s), no credentials. */
export function acceptableDocumentUrl(value: string): boolean {
  try {
    const u = new URL(value);
    return (u.protocol === 'http:' || u.protocol === 'https:') && !u.username && !u.password;
  } catch {
    return false;
  }
}

/**
 * A document from a URL: the row (named after the URL until the page's title is known) and its
 * workflow; the page is fetched, safely, by the digitize step.
 */
export async function createDocumentFromUrl(deps: DocumentDeps, partner: string, kbName: string, input: Omit<CreateDocumentInput, 'type'> & { url: string }) {
  const { db, temporal, taskQueue } = deps;
  if (!acceptableDocumentUrl(input.url)) throw badRequest(`${JSON.stringify(input.url)} is not an absolute http or https URL`);
  const found = await findKnowledgeBase(db, partner, kbName);
  if (found.kb.deletionRequestedAt) throw new AppError('conflict', `knowledge base ${JSON.stringify(kbName)} is being deleted`);
  if (!found.partner.allowAudioVideo && youTubeVideoId(input.url)) throw new AppError('forbidden', `video URLs are not enabled for this partner (${input.url})`);
  const folder = await db.folder.findUnique({ where: { knowledgeBaseId_name: { knowledgeBaseId: found.kb.id, name: input.folder } } });
  if (!folder || folder.deletionRequestedAt) throw notFound(`folder ${JSON.stringify(input.folder)} does not exist in knowledge base ${JSON.stringify(kbName)}`);
  const document = await createWithinDocumentQuota(db, found.partner, (tx) =>
    tx.document.create({
      data: {
        knowledgeBaseId: found.kb.id,
        folderId: folder.id,
        name: input.name?.trim() || input.url,
        nameFromSource: !input.name?.trim(),
        type: 'url',
        url: input.url,
        ...processingFields(input),
      },
      include: { folder: true },
    }),
  );
  try {
    await startDocumentPipeline(temporal, taskQueue, {
      documentId: document.id,
      knowledgeBaseId: found.kb.id,
      partner: found.partner.name,
      steps: stepsForNewUpload(input),
      requestCharacterLimit: input.character_limit ?? null,
    });
  } catch (err) {
    await db.document.delete({ where: { id: document.id } });
    throw new AppError('unavailable', `could not start processing: ${(err as Error).message}`);
  }
  return document;
}

export interface BatchUrlInput extends Omit<CreateDocumentInput, 'type' | 'name' | 'url'> {
  urls: string[];
}

/** Spec 4.3 batch URL import: one document per URL, each on its own; failures never roll back others. */
export async function createDocumentsFromUrls(deps: DocumentDeps, partner: string, kbName: string, input: BatchUrlInput) {
  await findKnowledgeBase(deps.db, partner, kbName);
  const results = [];
  for (const url of input.urls) {
    try {
      const doc = await createDocumentFromUrl(deps, partner, kbName, { ...input, url });
      results.push({ url, status: 'success' as const, document_id: doc.id });
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      results.push({ url, status: 'failed' as const, document_id: null, error: err.message });
    }
  }
  const succeeded = results.filter((r) => r.status === 'success').length;
  return { summary: { total: results.length, succeeded, failed: results.length - succeeded }, results };
}
