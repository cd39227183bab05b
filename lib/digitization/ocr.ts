import { runTool, ToolFailed } from '../platform/child-process.js';
import { detectLanguage } from '../platform/language-detection.js';
import { describedPattern } from '../platform/schema-errors.js';
import { unreadable } from './extractors/converters.js';

/**
 * OCR with tesseract in the languages of the BM25 analysers (ISO 639-3 codes, as
 * `embedding_bm25_language_counts` and the rag-test search name them), each with its Debian
 * `tesseract-ocr-<lang>` package. The language of a document's OCR is, in this order: the
 * document's `ocr_languages`, its knowledge base's, or detected on a first pass over its first
 * page that needs OCR: tesseract's script detection (OSD) tells Cyrillic, Han, Arabic, ... apart;
 * for Latin script the page is read in English and franc names the language of what came out.
 * English is always added as a second language (for the English words found in most documents).
 */
export const ocrLanguages: Record<string, { tesseract: string; debianPackage: string }> = Object.fromEntries(
  (
    [
      ['eng', 'eng'], ['deu', 'deu'], ['fra', 'fra'], ['spa', 'spa'], ['ita', 'ita'], ['por', 'por'], ['nld', 'nld'],
      ['swe', 'swe'], ['dan', 'dan'], ['nob', 'nor'], ['fin', 'fin'], ['hun', 'hun'], ['ron', 'ron'], ['rus', 'rus'],
      ['tur', 'tur'], ['ces', 'ces'], ['cat', 'cat'], ['eus', 'eus'], ['gle', 'gle'], ['slv', 'slv'], ['arb', 'ara'],
      ['hye', 'hye'], ['tam', 'tam'], ['cmn', 'chi_sim'], ['jpn', 'jpn'], ['kor', 'kor'],
    ] as const
  ).map(([code, tesseract]) => [code, { tesseract, debianPackage: `tesseract-ocr-${tesseract.replace('_', '-')}` }]),
);
/** The `ocr_languages` setting of a document or KB: comma-separated codes of `ocrLanguages`. */
export const ocrLanguagesSetting = {
  pattern: describedPattern(
    `^(?:${Object.keys(ocrLanguages).join('|')})(?:,(?:${Object.keys(ocrLanguages).join('|')})){0,4}$`,
    `must be 1-5 comma-separated OCR language codes, each one of ${Object.keys(ocrLanguages).join(', ')}`,
  ),
  parse: (value: string | undefined) => (value ? [...new Set(value.split(','))] : []),
};

/** Script detection (OSD) data. */
export const osdDebianPackage = 'tesseract-ocr-osd';

/** The language a script detected by OSD most likely means, among the OCR languages. */
const languageOfScript: Record<string, string> = {
  Cyrillic: 'rus', Han: 'cmn', Japanese: 'jpn', Katakana: 'jpn', Hiragana: 'jpn', Hangul: 'kor', Arabic: 'arb', Armenian: 'hye', Tamil: 'tam',
};

const OCR_TIMEOUT_MS = 2 * 60_000;

/** What to read a document's images in: chosen languages (ISO 639-3), or null to detect them. */
export type OcrLanguageChoice = string[] | null;

/** Tesseract's `-l` value for languages (ISO 639-3), English added. */
export function tesseractLanguages(codes: string[]): string {
  const chosen = codes.map((c) => ocrLanguages[c]?.tesseract).filter((t): t is string => !!t);
  return [...new Set([...chosen, 'eng'])].join('+');
}

/** The text tesseract reads from an image file in `languages` (its `-l` value). */
export async function ocrImage(imagePath: string, languages: string, what = 'the image', timeoutMs = OCR_TIMEOUT_MS): Promise<string> {
  try {
    const { stdout } = await runTool('tesseract', [imagePath, 'stdout', '-l', languages], { timeoutMs });
    return stdout.toString('utf8');
  } catch (err) {
    throw unreadable(err, what, 'tesseract', timeoutMs);
  }
}

/**
 * The languages to read a document's images in: the chosen ones, or those detected on `sample`
 * (an image of its first page that needs OCR), with the first pass's text when it can be reused.
 */
export async function resolveOcrLanguages(choice: OcrLanguageChoice, sample: string, timeoutMs = OCR_TIMEOUT_MS): Promise<{ languages: string; firstPass?: string }> {
  if (choice?.length) return { languages: tesseractLanguages(choice) };
  const script = await detectScript(sample, timeoutMs);
  if (script && script !== 'Latin' && languageOfScript[script]) return { languages: tesseractLanguages([languageOfScript[script]!]) };
  const english = await ocrImage(sample, 'eng', 'the image', timeoutMs);
  const detected = detectLanguage(english);
  if (detected === 'eng' || !ocrLanguages[detected]) return { languages: 'eng', firstPass: english };
  return { languages: tesseractLanguages([detected]) };
}

/** The script tesseract's orientation and script detection finds, or null when it cannot tell. */
async function detectScript(imagePath: string, timeoutMs = OCR_TIMEOUT_MS): Promise<string | null> {
  try {
    const { stdout } = await runTool('tesseract', [imagePath, 'stdout', '--psm', '0'], { timeoutMs });
    return /^Script: (\w+)$/m.exec(stdout.toString('utf8'))?.[1] ?? null;
  } catch (err) {
    // Too little text to tell, or no OSD data: the English first pass decides.
    if (err instanceof ToolFailed && err.kind === 'failed') return null;
    throw unreadable(err, 'the image', 'tesseract', timeoutMs);
  }
}

