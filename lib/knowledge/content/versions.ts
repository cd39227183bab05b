import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { Document, Folder } from '../../../generated/prisma/client.js';
import type { Db } from '../../platform/db.js';
import { AppError, badRequest, notFound } from '../../platform/errors.js';
import type { FileStorage } from '../../platform/storage.js';
import { documentFiles } from '../../platform/storage.js';
import type { VectorIndex } from '../../providers/vector-index.js';
import { findDocument } from '../lookup.js';
import { replaceControlCharacters } from '../../platform/text.js';
import { renderCleanMarkdown } from './clean-markdown.js';

/**
 * Document content (knowledge-base spec 4.4): reading, replacing and downloading the versions of a
 * document (original, digitized, rewritten draft, rewritten final) and the rewritten bundle.
 *
 * Decisions where the spec is silent:
 * - A version exists when the document records its file name and the file is in storage; otherwise
 *   reading or downloading it answers 404.
 * - Only text originals (.txt, .md, .markdown) can be read as text or replaced with text (PUT);
 *   other originals are binary (read them with the download endpoint). Any original can be replaced
 *   by an uploaded file (POST), checked as a new document's file is. A document without an original
 *   (an empty document) gets one: `original.txt` from PUT, or the uploaded file from POST (stored as
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

/** The versions of a document's content (not to be confused with rewrite content types). */
export const contentVersions = ['original', 'digitized', 'rewritten', 'draft'] as const;
export type ContentVersion = (typeof contentVersions)[number];
export const editableContentVersions = ['original', 'digitized', 'rewritten'] as const;
export type EditableContentVersion = (typeof editableContentVersions)[number];
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

export type DocumentRow = Document & { folder: Folder };



function versionFile(doc: DocumentRow, type: ContentVersion): { key: string; recorded: string | null } {
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

const versionLabel: Record<ContentVersion, string> = { original: 'original', digitized: 'digitized', rewritten: 'final rewritten', draft: 'rewritten draft' };

async function existingVersion(storage: FileStorage, doc: DocumentRow, type: ContentVersion): Promise<string | null> {
  const { key, recorded } = versionFile(doc, type);
  if (!recorded || !key) return null;
  return (await storage.exists(key)) ? key : null;
}

const missingVersion = (doc: DocumentRow, type: ContentVersion) => notFound(`document ${doc.id} has no ${versionLabel[type]} content`);

export const isTextOriginal = (doc: DocumentRow) => !doc.originalExtension || textOriginalExtensions.includes(doc.originalExtension);

export function decodeUtf8(data: Buffer): string | null {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(data);
  } catch {
    return null;
  }
}

/** GET .../content/{type}: `{content, format}`; `format=markdown` applies to rewritten and draft only. */
export async function readContent(deps: Pick<ContentDeps, 'db' | 'storage'>, partner: string, kb: string, documentId: string, type: ContentVersion, format: ContentFormat) {
  const { document } = await findDocument(deps.db, partner, kb, documentId);
  const rendersMarkdown = format === 'markdown' && (type === 'rewritten' || type === 'draft');
  const key = await existingVersion(deps.storage, document, type);
  if (!key) {
    if (rendersMarkdown) throw badRequest(`format=markdown needs ${versionLabel[type]} content, and document ${document.id} has not been rewritten yet`);
    throw missingVersion(document, type);
  }
  // Spec: markdown is refused for a draft "not yet successfully rewritten" (a rejected rewrite's
  // output, kept for inspection); its raw text is still there.
  if (rendersMarkdown && type === 'draft' && !(await existingVersion(deps.storage, document, 'rewritten'))) {
    throw badRequest(`format=markdown needs a successful rewrite, and document ${document.id} has not been rewritten successfully yet; read its draft with format=raw`);
  }
  if (type === 'original' && !isTextOriginal(document)) throw badRequest('original is binary; use download');
  const content = decodeUtf8(await deps.storage.read(key));
  if (content === null) {
    if (type === 'original') throw badRequest('original is binary; use download');
    throw new AppError('internal_error', `the stored ${versionLabel[type]} content is not valid UTF-8`);
  }
  return rendersMarkdown ? { content: renderCleanMarkdown(content), format: 'markdown' as const } : { content, format: 'raw' as const };
}



const originalContentVersions: Record<string, string> = {
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

const contentTypeOfExtension = (extension: string) => originalContentVersions[extension.toLowerCase()] ?? 'application/octet-stream';

/** A file name safe for Content-Disposition: no path separators or control characters. */
export function safeFileName(name: string, fallback: string): string {
  const cleaned = replaceControlCharacters(name, '_').replace(/[/\\]/g, '_').trim();
  return cleaned || fallback;
}

/** `<document name without extension>.<type>.md`, e.g. `lighthouse.digitized.md`. */
function versionFileName(documentName: string, type: Exclude<ContentVersion, 'original'>): string {
  const base = documentName.slice(0, documentName.length - path.extname(documentName).length) || documentName || 'document';
  return safeFileName(`${base}.${type}.md`, `document.${type}.md`);
}

/** GET .../download/{type}: the stored file as a stream, with its download name and media type. */
export async function openDownload(deps: Pick<ContentDeps, 'db' | 'storage'>, partner: string, kb: string, documentId: string, type: ContentVersion) {
  const { document } = await findDocument(deps.db, partner, kb, documentId);
  const key = await existingVersion(deps.storage, document, type);
  if (!key) throw missingVersion(document, type);
  if (type === 'original') {
    const extension = document.originalExtension!;
    return {
      stream: await deps.storage.stream(key),
      filename: safeFileName(document.fileOriginal ?? `original.${extension}`, `original.${extension}`),
      contentType: contentTypeOfExtension(extension),
    };
  }
  return { stream: await deps.storage.stream(key), filename: versionFileName(document.name, type), contentType: 'text/markdown; charset=utf-8' };
}

