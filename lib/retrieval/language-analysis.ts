import { createRequire } from 'node:module';
import { detectLanguage } from '../platform/language-detection.js';

/**
 * Per-language text analysis for the lexical retrievers. Weaviate (1.39) tokenizes and filters
 * stopwords but never stems, so the BM25 property holds text that we analyse ourselves: each chunk
 * with the analyser of its own detected language (Snowball stemmer, short function-word list,
 * accents folded after stemming), Chinese / Japanese / Korean as overlapping character bigrams.
 * The query is analysed with every language its knowledge base holds, and the union of the terms
 * is sent, so that "configurations" finds an English "configuration" and "Konfigurationen" a
 * German "Konfiguration" in the same KB.
 */
const require = createRequire(import.meta.url);
const snowball = require('snowball-stemmers') as { newStemmer(name: string): { stem(word: string): string } };

export interface Bm25Language {
  /** ISO 639-3, as franc reports it and as `embedding_bm25_language_counts` keys it. */
  code: string;
  name: string;
  analysis: 'snowball' | 'cjk_bigrams';
}

const snowballLanguages: Array<[code: string, name: string, algorithm: string]> = [
  ['eng', 'English', 'english'], ['deu', 'German', 'german'], ['fra', 'French', 'french'], ['spa', 'Spanish', 'spanish'],
  ['ita', 'Italian', 'italian'], ['por', 'Portuguese', 'portuguese'], ['nld', 'Dutch', 'dutch'], ['swe', 'Swedish', 'swedish'],
  ['dan', 'Danish', 'danish'], ['nob', 'Norwegian Bokmål', 'norwegian'], ['fin', 'Finnish', 'finnish'], ['hun', 'Hungarian', 'hungarian'],
  ['ron', 'Romanian', 'romanian'], ['rus', 'Russian', 'russian'], ['tur', 'Turkish', 'turkish'], ['ces', 'Czech', 'czech'],
  ['cat', 'Catalan', 'catalan'], ['eus', 'Basque', 'basque'], ['gle', 'Irish', 'irish'], ['slv', 'Slovene', 'slovene'],
  ['arb', 'Arabic', 'arabic'], ['hye', 'Armenian', 'armenian'], ['tam', 'Tamil', 'tamil'],
];
const cjkLanguages: Array<[string, string]> = [['cmn', 'Chinese'], ['jpn', 'Japanese'], ['kor', 'Korean']];

export const supportedBm25Languages: Bm25Language[] = [
  ...snowballLanguages.map(([code, name]) => ({ code, name, analysis: 'snowball' as const })),
  ...cjkLanguages.map(([code, name]) => ({ code, name, analysis: 'cjk_bigrams' as const })),
];


/**
 * Frequent function words only: BM25's IDF already discounts common words, but the n-gram sparse
 * vector has no IDF and would otherwise be dominated by them.
 */
const functionWords: Record<string, string> = {
  eng: 'a an and are as at be been but by can could did do does for from had has have he her his how i if in into is it its me my no not of on or our she so than that the their them then there these they this those to was we were what when where which who why will with would you your',
  deu: 'aber als am an auch auf aus bei bin bis da das dass dem den der des die doch du ein eine einem einen einer eines er es für hat hatte ich ihr im in ist ja kann mit nach nicht noch nur oder sich sie sind so um und uns von vor war was wie wir wird zu zum zur über',
  fra: 'a au aux avec ce ces dans de des du elle en est et il ils je la le les leur lui mais me mon ne nous on ou par pas pour qu que qui sa se ses son sur ta te tu un une vous y été être',
  spa: 'a al como con de del el ella en es esta este la las le les lo los mas me mi no o para pero por que se si sin su sus un una y ya él',
  ita: 'a ad al alla anche che ci come con da dal dei del della di e ed gli ha i il in la le lo ma mi ne non o per più se si sono su un una',
  por: 'a ao aos as com como da das de do dos e ela ele em entre era é mas me na nas no nos o os ou para pela pelo por que se sem seu sua um uma',
  nld: 'aan al als bij dat de den der die dit door een en er het hij hoe ik in is je maar met naar niet of om op te tot uit van voor was wat we wij zal ze zij zijn',
};
const functionWordSets = new Map(Object.entries(functionWords).map(([k, v]) => [k, new Set(v.split(' '))]));

const stemmers = new Map<string, { stem(word: string): string }>();
function stemmerFor(code: string) {
  const entry = snowballLanguages.find(([c]) => c === code);
  if (!entry) return null;
  let s = stemmers.get(code);
  if (!s) stemmers.set(code, (s = snowball.newStemmer(entry[2])));
  return s;
}

const foldAccents = (s: string) => s.normalize('NFKD').replace(/\p{M}+/gu, '');
const cjkRun = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]+/gu;
const wordPattern = /[\p{L}\p{N}]+(?:['’]\p{L}+)?/gu;

function cjkBigrams(text: string): string[] {
  const out: string[] = [];
  for (const run of text.match(cjkRun) ?? []) {
    const chars = [...run];
    if (chars.length === 1) out.push(chars[0]!);
    for (let i = 0; i + 1 < chars.length; i++) out.push(chars[i]! + chars[i + 1]!);
  }
  return out;
}

/** Whether a lower-cased word is a function word of any of the languages. */
export function functionWordOf(language: string | string[]): (word: string) => boolean {
  const stops = (Array.isArray(language) ? language : [language]).map((l) => functionWordSets.get(l)).filter((s) => s !== undefined);
  return (word) => stops.some((stop) => stop.has(word));
}

/** Lower-cased words without function words of the language (unstemmed): the n-gram vector's input. */
export function contentWords(text: string, language: string | string[]): string[] {
  const isFunctionWord = functionWordOf(language);
  // A plain loop: the re-scoring reads the opening of every search candidate with it.
  const words: string[] = [];
  for (const raw of text.replace(cjkRun, ' ').match(wordPattern) ?? []) {
    const word = raw.toLowerCase();
    if (!isFunctionWord(word)) words.push(word);
    for (const part of identifierParts(raw)) if (part.length > 1 && !isFunctionWord(part)) words.push(part);
  }
  return words;
}

/**
 * The parts of an identifier written in camelCase or with digits inside ("startElement",
 * "TCPServer", "b64encode", "getElementById"): each part as a lower-cased word. Empty for an
 * ordinary word. Words joined by `_`, `.` or `-` are already separate words.
 */
export function identifierParts(word: string): string[] {
  // Most words are plain lower-case letters: no boundary to look for.
  if (!/[\p{Lu}\p{N}]/u.test(word)) return [];
  const chars = [...word];
  const kind = (c: string | undefined) => (c === undefined ? '' : /\p{N}/u.test(c) ? 'n' : /\p{Lu}/u.test(c) ? 'U' : 'l');
  const parts: string[] = [];
  let current = '';
  chars.forEach((c, i) => {
    const k = kind(c);
    const prev = kind(chars[i - 1]);
    const boundary =
      i > 0 &&
      ((k === 'n') !== (prev === 'n') || (k === 'U' && prev === 'l') || (k === 'U' && prev === 'U' && kind(chars[i + 1]) === 'l'));
    if (boundary) {
      parts.push(current);
      current = '';
    }
    current += c;
  });
  parts.push(current);
  return parts.length > 1 ? parts.map((p) => p.toLowerCase()) : [];
}

/**
 * BM25 terms of a text in one language: stemmed content words (accent-folded after stemming, so
 * that "café" and "cafe" meet), the stemmed parts of camelCase / letter-digit identifiers next to
 * the identifier itself (so "start of an element" finds `startElement`), plus CJK bigrams.
 * Unknown languages keep words unstemmed.
 */
function bm25Terms(text: string, language: string): string[] {
  const stemmer = stemmerFor(language);
  const stem = (w: string) => foldAccents(stemmer ? stemmer.stem(w) : w);
  const stops = functionWordSets.get(language);
  const terms: string[] = [];
  for (const raw of text.replace(cjkRun, ' ').match(wordPattern) ?? []) {
    const word = raw.toLowerCase();
    if (stops?.has(word)) continue;
    terms.push(stem(word));
    for (const part of identifierParts(raw)) if (part.length > 1 && !stops?.has(part)) terms.push(stem(part));
  }
  return [...terms, ...cjkBigrams(text)];
}

/** The text stored in the BM25 property of a chunk. */
export const bm25Document = (text: string, language: string) => bm25Terms(text, language).join(' ');

/**
 * The BM25 query for a KB that holds chunks of `languages`: the union of the query's terms under
 * each of those analysers (and the query's own detected language).
 */
export function bm25Query(query: string, languages: string[]): string {
  const set = new Set<string>();
  const langs = new Set([...languages, detectLanguage(query)]);
  if (langs.size === 0) langs.add('und');
  for (const lang of langs) for (const t of bm25Terms(query, lang)) set.add(t);
  return [...set].join(' ');
}
