import os from 'node:os';
import { normalizeLineEnds, trimLineEnds, trimOf } from '../../platform/text.js';
import type { ExtractionLimits } from '../../platform/config.js';

/** Shared shapes of the text extractors (`documents.ts`, `media.ts`). */

/** A file whose text cannot be read; the message is a clear reason meant for the user. */
export class UnreadableDocument extends Error {
  override name = 'UnreadableDocument';
}

export interface Extracted {
  text: string;
  title?: string | null;
}

export type Extractor = (filePath: string, extension: string) => Promise<Extracted>;

/**
 * Extracted text as it is stored: no BOM, LF line ends (a form feed is a paragraph break), no
 * trailing spaces, at most one blank line in a row, no blank lines at either end.
 */
export function tidyExtractedText(text: string): string {
  return trimOf(trimLineEnds(normalizeLineEnds(text).replaceAll('\f', '\n\n')).replace(/\n{3,}/g, '\n\n'), '\n');
}

/** The bounds of reading ZIP-based formats. */
export type ZipBounds = Pick<ExtractionLimits, 'zipMaxEntries' | 'zipMaxInflatedBytes'>;

/** The defaults of EXTRACT_* and DOCUMENT_MAX_MEDIA_SECONDS (lib/platform/config.ts), for callers without a configuration. */
export const defaultExtractionLimits: ExtractionLimits = {
  zipMaxEntries: 10_000,
  zipMaxInflatedBytes: 256 * 1024 * 1024,
  maxHeapMb: 1024,
  maxThreads: os.availableParallelism(),
  timeoutMs: 300_000,
  toolTimeoutMs: 120_000,
  maxMediaSeconds: 14_400,
};
