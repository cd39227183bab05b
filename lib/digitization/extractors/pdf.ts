import { rm } from 'node:fs/promises';
import path from 'node:path';
import { runTool } from '../../platform/child-process.js';
import { ocrImage, resolveOcrLanguages, type OcrLanguageChoice } from '../ocr.js';
import { runConverter, unreadable } from './converters.js';
import { UnreadableDocument, type Extracted } from './types.js';
import { makeScratchDir } from '../../platform/scratch.js';

/**
 * PDFs: the text layer of every page (poppler's `pdftotext -layout`), and for pages without one
 * (scanned pages: fewer than 20 letters or digits) the page rendered by `pdftoppm` and read by
 * tesseract, a few pages at a time. Pages keep their order, so a mixed PDF keeps its text pages as
 * they are; each OCR'd page starts with the line `<!-- page N: OCR (tesseract, <languages>) -->`,
 * which records in the digitized content which pages were recognised (chunking leaves comment
 * lines out of the index). More pages needing OCR than `maxPages` fail the document with a reason
 * that says so.
 */
export interface PdfOcrSettings {
  maxPages: number;
  concurrency: number;
  dpi: number;
  languages: OcrLanguageChoice;
  /** Time (and CPU time) of each tool run: pdftotext, pdfinfo, pdftoppm, tesseract (EXTRACT_TOOL_TIMEOUT_SECONDS). */
  toolTimeoutMs?: number;
}

const RENDER_TIMEOUT_MS = 2 * 60_000;
const MIN_TEXT_CHARACTERS = 20;

const hasTextLayer = (page: string) => (page.match(/[\p{L}\p{N}]/gu)?.length ?? 0) >= MIN_TEXT_CHARACTERS;

export async function extractPdf(filePath: string, ocr: PdfOcrSettings): Promise<Extracted> {
  const what = 'the PDF';
  // pdftotext ends every page with a form feed.
  const timeoutMs = ocr.toolTimeoutMs ?? RENDER_TIMEOUT_MS;
  const pages = (await runConverter('pdftotext', ['-layout', '-enc', 'UTF-8', '-q', filePath, '-'], what, { timeoutMs })).split('\f');
  if (pages.length > 1 && pages.at(-1)!.trim() === '') pages.pop();
  let title: string | null = null;
  try {
    title = /^Title:(.*)$/m.exec(await runConverter('pdfinfo', ['-enc', 'UTF-8', filePath], what, { timeoutMs }))?.[1]?.trim() || null;
  } catch {
    // the title is optional
  }
  const scanned = pages.flatMap((text, i) => (hasTextLayer(text) ? [] : [i + 1]));
  if (scanned.length === 0) return { text: pages.join('\n\n'), title };
  if (scanned.length > ocr.maxPages) {
    throw new UnreadableDocument(`the PDF has ${scanned.length} pages without a text layer that need OCR; at most ${ocr.maxPages} are read (PDF_OCR_MAX_PAGES)`);
  }
  const recognised = await ocrPages(filePath, scanned, ocr);
  if (pages.every((page, i) => !/[\p{L}\p{N}]/u.test(recognised.get(i + 1)?.text ?? page))) {
    throw new UnreadableDocument(`the PDF contains no text, and OCR recognised none on its ${scanned.length} scanned page${scanned.length === 1 ? '' : 's'}`);
  }
  const text = pages
    .map((page, i) => (recognised.has(i + 1) ? `<!-- page ${i + 1}: OCR (tesseract, ${recognised.get(i + 1)!.languages}) -->\n${recognised.get(i + 1)!.text}` : page))
    .join('\n\n');
  return { text, title };
}

/** Renders and reads the given pages, `concurrency` at a time; the languages are resolved once. */
async function ocrPages(filePath: string, pageNumbers: number[], ocr: PdfOcrSettings): Promise<Map<number, { text: string; languages: string }>> {
  const dir = await makeScratchDir('kb-pdf-ocr-');
  const timeoutMs = ocr.toolTimeoutMs ?? RENDER_TIMEOUT_MS;
  try {
    const render = async (page: number) => {
      const prefix = path.join(dir, `page-${page}`);
      try {
        const { stderr } = await runTool('pdftoppm', ['-r', String(ocr.dpi), '-f', String(page), '-l', String(page), '-png', '-singlefile', filePath, prefix], { timeoutMs });
        // poppler gives up on a page too large to render (its own bound, or the memory limit) and still exits 0.
        if (/out of memory|bogus memory allocation/i.test(stderr)) {
          throw new UnreadableDocument(`page ${page} of the PDF is too large to render for OCR at ${ocr.dpi} dpi (it needs more memory than a converter may use)`);
        }
      } catch (err) {
        if (err instanceof UnreadableDocument) throw err;
        throw unreadable(err, `page ${page} of the PDF`, 'pdftoppm', timeoutMs);
      }
      return `${prefix}.png`;
    };
    const first = await render(pageNumbers[0]!);
    const { languages, firstPass } = await resolveOcrLanguages(ocr.languages, first, timeoutMs);
    const out = new Map<number, { text: string; languages: string }>();
    out.set(pageNumbers[0]!, { text: firstPass ?? (await ocrImage(first, languages, `page ${pageNumbers[0]} of the PDF`, timeoutMs)), languages });
    const rest = pageNumbers.slice(1);
    await Promise.all(
      Array.from({ length: Math.min(ocr.concurrency, rest.length) }, async () => {
        for (let page = rest.shift(); page !== undefined; page = rest.shift()) {
          const image = await render(page);
          out.set(page, { text: await ocrImage(image, languages, `page ${page} of the PDF`, timeoutMs), languages });
          await rm(image, { force: true });
        }
      }),
    );
    return out;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
