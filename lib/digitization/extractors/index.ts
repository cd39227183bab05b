import { readFile } from 'node:fs/promises';
import { isBlank, nameFromTitle, normalizeLineEnds } from '../../platform/text.js';
import type { ExtractionLimits } from '../../platform/config.js';
import type { SpeechToTextEngine } from '../../providers/speech-to-text.js';
import { isPlainText } from '../formats.js';
import type { OcrLanguageChoice } from '../ocr.js';
import { decodeText } from './converters.js';
import { extractIsolated } from './isolated.js';
import { extractLegacyOffice } from './legacy-office.js';
import { extractMedia, isMediaExtension, type PieceTranscripts } from './media.js';
import { extractPdf } from './pdf.js';
import { defaultExtractionLimits, tidyExtractedText, UnreadableDocument, type Extracted } from './types.js';

export { UnreadableDocument };

/** How digitization reads a file: settings from the configuration and the document. */
export interface ExtractOptions {
  /** OCR of scanned PDF pages and images: the document's (or its KB's) languages, or null to detect. */
  ocrLanguages: OcrLanguageChoice;
  pdfOcr: { maxPages: number; concurrency: number; dpi: number };
  libreOfficeTimeoutMs: number;
  /** Audio and video: the process's speech-to-text engine (the one /v2/transcript uses). */
  speechToText: SpeechToTextEngine;
  /** Bounds of the work one document may cause (EXTRACT_*, DOCUMENT_MAX_MEDIA_SECONDS); default: the configuration's defaults. */
  limits?: ExtractionLimits;
  /** A long recording's piece transcripts kept between tries of this extraction (none: every try starts over). */
  pieceTranscripts?: PieceTranscripts | null;
}

/**
 * Text of a stored original, by its extension: PDF (text layer, OCR of scanned pages), Office
 * 97-2003 (through LibreOffice), images (OCR), audio and video (speech to text), and the text
 * formats read in this process. Text and code are digitized exactly as written (only the BOM and
 * CR line ends go), so that their character counts are what the user uploaded; extracted formats
 * are tidied. A file without text throws UnreadableDocument with a reason for the user.
 */
export async function extractFile(filePath: string, extension: string, options: ExtractOptions): Promise<Extracted> {
  const ext = extension.replace(/^\./, '').toLowerCase();
  const limits = options.limits ?? defaultExtractionLimits;
  if (isMediaExtension(ext)) {
    return extractMedia(filePath, ext, { speech: options.speechToText, ocrLanguages: options.ocrLanguages, maxMediaSeconds: limits.maxMediaSeconds, pieceTranscripts: options.pieceTranscripts ?? null });
  }
  const result = await extractByKind(filePath, ext, options);
  const text = isPlainText(ext) ? normalizeLineEnds(result.text) : tidyExtractedText(result.text);
  if (text.trim() === '') throw new UnreadableDocument(emptyReason(ext));
  // Zero-width and control characters alone would be embedded (and charged) as a document that shows nothing.
  if (isBlank(text)) throw new UnreadableDocument(`the .${ext} file contains no visible text, only invisible or control characters`);
  return { text, title: nameFromTitle(result.title) };
}

/** Formats parsed in this process go through a bounded thread (extractors/isolated.ts); the others through bounded tools. */
function extractByKind(filePath: string, ext: string, options: ExtractOptions): Promise<Extracted> {
  const limits = options.limits ?? defaultExtractionLimits;
  switch (ext) {
    case 'pdf':
      return extractPdf(filePath, { ...options.pdfOcr, languages: options.ocrLanguages, toolTimeoutMs: limits.toolTimeoutMs });
    case 'doc':
    case 'xls':
    case 'ppt':
      return extractLegacyOffice(filePath, ext, options.libreOfficeTimeoutMs, (copy, target) => extractIsolated(copy, target, limits));
    default:
      // Plain text needs no parser: its memory is a small multiple of its size, which the upload
      // limit bounds, so it is read here rather than in a thread that would cost more than the reading.
      if (isPlainText(ext)) return readFile(filePath).then((bytes) => ({ text: decodeText(bytes) }));
      return extractIsolated(filePath, ext, limits);
  }
}

function emptyReason(ext: string): string {
  switch (ext) {
    case 'pdf': return 'the PDF contains no text';
    case 'docx': return 'the Word document (.docx) contains no text';
    case 'doc': return 'the Word 97-2003 document (.doc) contains no text';
    case 'pptx': return 'the PowerPoint presentation (.pptx) contains no text';
    case 'ppt': return 'the PowerPoint 97-2003 presentation (.ppt) contains no text';
    case 'xlsx': return 'the Excel workbook (.xlsx) contains no cell values';
    case 'xls': return 'the Excel 97-2003 workbook (.xls) contains no cell values';
    case 'epub': return 'the EPUB book contains no text';
    case 'html':
    case 'htm': return 'the HTML page contains no readable text';
    case 'csv': return 'the CSV file contains no values';
    case 'json': return 'the JSON file is empty';
    case 'xml': return 'the XML file contains no text';
    case 'yaml':
    case 'yml': return 'the YAML file is empty';
    default: return `the .${ext} file is empty`;
  }
}
