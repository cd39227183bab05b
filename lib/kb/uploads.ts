import fsp from 'node:fs/promises';
import path from 'node:path';
import { AppError, badRequest } from '../errors.js';

/** A file received in a multipart request, still in the upload directory. */
export interface UploadedFile {
  field: string;
  originalName: string;
  path: string;
  size: number;
  mimeType: string;
}

/** Extensions the spec lists as uploadable (section 4.3). */
export const supportedExtensions = [
  'pdf', 'doc', 'docx', 'ppt', 'pptx', 'xls', 'xlsx', 'epub', 'md', 'markdown', 'html', 'htm', 'txt', 'py', 'js', 'css', 'csv',
  'json', 'xml', 'yaml', 'yml', 'mp4', 'mov', 'm4v', 'avi', 'mp3', 'wav', 'm4a', 'jpg', 'jpeg', 'png', 'tif', 'tiff', 'gif', 'webp',
];
export const blockedArchiveExtensions = ['zip', 'tar', 'gz', 'tgz', 'rar', '7z', 'bz2', 'xz'];
/** What this build digitizes today; the remaining supported formats arrive with their extractors. */
export const digitizableExtensions = ['txt', 'md', 'markdown'];

/** Leading bytes of binary formats that must never pass as text. */
const binarySignatures: Array<[string, Buffer]> = [
  ['PDF', Buffer.from('%PDF')],
  ['ZIP-based archive or Office file', Buffer.from([0x50, 0x4b, 0x03, 0x04])],
  ['GZIP archive', Buffer.from([0x1f, 0x8b])],
  ['RAR archive', Buffer.from('Rar!')],
  ['7-Zip archive', Buffer.from([0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c])],
  ['BZIP2 archive', Buffer.from('BZh')],
  ['XZ archive', Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00])],
  ['PNG image', Buffer.from([0x89, 0x50, 0x4e, 0x47])],
  ['JPEG image', Buffer.from([0xff, 0xd8, 0xff])],
  ['OLE2 (legacy Office) file', Buffer.from([0xd0, 0xcf, 0x11, 0xe0])],
];

export function extensionOf(filename: string): string {
  return path.extname(filename).replace(/^\./, '').toLowerCase();
}

/**
 * Checks an uploaded file by extension and by content before anything is stored. Throws a 400
 * naming the reason, or a 501 for a supported format that this build cannot digitize yet.
 */
export async function checkUpload(file: { originalName: string; path: string; size: number }): Promise<{ extension: string }> {
  if (/[\u0000-\u001f\u007f]/.test(file.originalName)) throw badRequest(`the file name ${JSON.stringify(file.originalName)} contains control characters`);
  const extension = extensionOf(file.originalName);
  if (!extension) throw badRequest(`${file.originalName} has no file extension; supported: ${supportedExtensions.join(', ')}`);
  if (blockedArchiveExtensions.includes(extension)) throw badRequest(`archives (.${extension}) are not accepted; upload the files inside it`);
  if (!supportedExtensions.includes(extension)) throw badRequest(`.${extension} files are not supported; supported: ${supportedExtensions.join(', ')}`);
  if (!digitizableExtensions.includes(extension)) {
    throw new AppError('bad_request', `.${extension} files cannot be digitized by this deployment yet; upload text or Markdown`, undefined, 501);
  }
  if (file.size === 0) throw badRequest(`${file.originalName} is empty`);
  const head = Buffer.alloc(Math.min(file.size, 8192));
  const handle = await fsp.open(file.path, 'r');
  try {
    await handle.read(head, 0, head.length, 0);
  } finally {
    await handle.close();
  }
  for (const [kind, signature] of binarySignatures) {
    if (head.subarray(0, signature.length).equals(signature)) throw badRequest(`${file.originalName} is a ${kind}, not a .${extension} file`);
  }
  if (head.includes(0)) throw badRequest(`${file.originalName} is binary data, not a .${extension} text file`);
  return { extension };
}
