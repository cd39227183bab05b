import path from 'node:path';
import { AppError, badRequest } from '../platform/errors.js';
import { hasControlCharacters } from '../platform/text.js';
import { checkFileSignature, type FileKind } from './file-signatures.js';
import { blockedArchiveExtensions, isAudioVideo, supportedExtensions } from './formats.js';

/** A file received in a multipart request, still in the upload directory. */
export interface UploadedFile {
  field: string;
  originalName: string;
  path: string;
  size: number;
  mimeType: string;
  /** The whole content, when it is small enough to be held in memory too (api/http/request-limits.ts). */
  bytes?: Buffer;
}

export function extensionOf(filename: string): string {
  return path.extname(filename).replace(/^\./, '').toLowerCase();
}

/**
 * Checks an uploaded file by extension and by content before anything is stored. Throws a 400
 * naming the reason (wrong or unsupported extension, an archive, content that does not match the
 * extension, an empty, truncated or damaged file), or, for a valid file of a supported format that
 * this build cannot digitize yet, a 501. The content is checked first, so a broken file is a 400
 * even when its format would be a 501.
 */
export async function checkUpload(
  file: Pick<UploadedFile, 'originalName' | 'path' | 'size' | 'bytes'>,
  partner: { allowAudioVideo: boolean } = { allowAudioVideo: true },
): Promise<{ extension: string; kind: FileKind }> {
  if (hasControlCharacters(file.originalName)) throw badRequest(`the file name ${JSON.stringify(file.originalName)} contains control characters`);
  const extension = extensionOf(file.originalName);
  if (!extension) throw badRequest(`${file.originalName} has no file extension; supported: ${supportedExtensions.join(', ')}`);
  if ((blockedArchiveExtensions as readonly string[]).includes(extension)) throw badRequest(`archives (.${extension}) are not accepted; upload the files inside it`);
  if (!supportedExtensions.includes(extension)) throw badRequest(`.${extension} files are not supported; supported: ${supportedExtensions.join(', ')}`);
  if (!partner.allowAudioVideo && isAudioVideo(extension)) {
    throw new AppError('forbidden', `audio and video uploads are not enabled for this partner (${file.originalName})`);
  }
  const verdict = await checkFileSignature({ path: file.path, bytes: file.bytes, name: file.originalName, extension });
  if (!verdict.ok) throw badRequest(verdict.reason);
  return { extension, kind: verdict.kind };
}
