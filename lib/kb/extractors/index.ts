import { extractDocument } from './documents.js';
import { extractMedia, isMediaExtension } from './media.js';
import type { Extracted } from './types.js';

export { UnreadableDocument } from './types.js';

/** Text of a stored original, by its extension: documents, images (OCR), audio and video (speech). */
export function extractFile(filePath: string, extension: string): Promise<Extracted> {
  return isMediaExtension(extension) ? extractMedia(filePath, extension) : extractDocument(filePath, extension);
}
