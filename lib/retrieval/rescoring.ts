import { supportedExtensions } from '../digitization/formats.js';
import { bm25Query, contentWords, functionWordOf, identifierParts } from './language-analysis.js';

/**
 * Learned re-scoring: the last step of the fusion. After the streams are fused, every candidate
 * gets two more pieces of evidence that no stream sees, and their weighted sum is added to its
 * fused score:
 *
 * - `name_match`: how much of the document's name the query spells out. The name's last segment
 *   (a file extension dropped: "Pump manual.md" -> "Pump manual", "os.path.join" -> "join") is read
 *   as letters and digits; a character counts when a query word of 3+ characters occurs there
 *   ("readline" <- "read", "line") or when the name token holding it occurs inside a query word
 *   ("hex" <- "hexadecimal"). The value is the share of the name's characters that count. BM25
 *   sees a name only as whole terms among the chunk's others, and never "read line" in "readline".
 * - `lead_match`: how much of the query the chunk's opening states: the share of the query's BM25
 *   terms, each weighted by its rarity among the candidates (ln(1 + n / (1 + df))), that begin one of
 *   the chunk's first LEAD_WORDS content words (after a leading Markdown heading line, within its
 *   first LEAD_CHARS characters). Text says what it is about first; a candidate that only mentions
 *   the query's words further down is more often a neighbour of the answer than the answer.
 *
 *   score(c) = fused(c) + unit · Σ_variant w_variant · Σ_feature w_feature · feature_variant(c)
 *
 * `unit` makes the weights independent of the fusion: it is what a stream of weight 1 gives its best
 * candidate (1 for `score` fusion, 1 / (rrf_k + 1) for `rrf`). The weights, like the default stream
 * weights, are learned together on the tuning parts of the evaluation sets (a linear model fitted by
 * bench/retrieval-eval.ts, which re-derives them and reports them on the held-out parts). The dense
 * cosine of every candidate, query-term coverage, adjacent-term matches, the chunk's position and
 * document-level counts were tried as features too and added nothing there (bench/RESULTS.md,
 * "Retrieval quality: before and after").
 */
export const rescoringFeatures = ['name_match', 'lead_match'] as const;
export type RescoringFeature = (typeof rescoringFeatures)[number];
export type FeatureValues = Record<RescoringFeature, number>;

/** Learned on the tuning parts together with retrievalDefaults.weights (bench/retrieval-eval.ts). */
export const learnedFeatureWeights: FeatureValues = { name_match: 0.61, lead_match: 0.73 };

/** Content words of a chunk's opening that `lead_match` reads, within its first LEAD_CHARS characters. */
export const LEAD_WORDS = 15;
const LEAD_CHARS = 300;
/** Shorter query words match inside names too often by chance ("in", "on"). */
const MIN_MATCH_CHARS = 3;

const fold = (s: string) => (/\P{ASCII}/u.test(s) ? s.normalize('NFKD').replace(/\p{M}+/gu, '') : s);
const lettersAndDigits = (s: string) => fold(s.toLowerCase()).replace(/[^\p{L}\p{N}]+/gu, '');
const codePoints = (s: string) => [...s].length;

/** A query variant as the lexical retrievers and the re-scoring read it. */
export interface AnalysedQuery {
  /** The BM25 stream's query: the terms under every language of the KB (bm25Query). */
  bm25: string;
  /** Those terms, each once, without function words of the KB's languages (for the chunk's opening). */
  stems: string[];
  /** Content words and those terms of 3+ characters, lower-cased and accent-folded (for names). */
  words: string[];
}

export function analyseQuery(query: string, languages: string[]): AnalysedQuery {
  const bm25 = bm25Query(query, languages);
  // The query's own detected language may add unstemmed function words of the KB's languages ("the").
  const isFunctionWord = functionWordOf(languages);
  const stems = [...new Set(bm25.split(' ').filter((t) => t && !isFunctionWord(t)))];
  const words = [...new Set([...contentWords(query, languages), ...stems].map((w) => fold(w.toLowerCase())))].filter((w) => codePoints(w) >= MIN_MATCH_CHARS);
  return { bm25, stems, words };
}

const extensions = new Set(supportedExtensions);

/**
 * The most specific segment of a document's name: its last, after a file extension is dropped.
 * Segments are separated by slashes and by dots before a letter or `_` ("os.path.join",
 * "docs/setup.md"), so that the dots of "Release notes 1.2" separate nothing.
 */
export function nameLeaf(name: string): string {
  const segments = name.split(/[/\\]|\.(?=[\p{L}_])/u).filter((s) => s.trim());
  if (segments.length > 1 && extensions.has(segments.at(-1)!.toLowerCase())) segments.pop();
  return segments.at(-1) ?? name;
}

/** Share of the name leaf's letters and digits shared with query words, either way round. */
export function nameMatch(documentName: string, words: string[]): number {
  const leaf = nameLeaf(documentName);
  const letters = lettersAndDigits(leaf);
  if (!letters || words.length === 0) return 0;
  const covered = new Uint8Array(letters.length);
  for (const w of words) for (let i = letters.indexOf(w); i >= 0; i = letters.indexOf(w, i + 1)) covered.fill(1, i, i + w.length);
  // The leaf's own tokens, in order (split at non-letters and camelCase), found inside a query word.
  let from = 0;
  for (const raw of leaf.split(/[^\p{L}\p{N}]+/u)) {
    const parts = identifierParts(raw);
    for (const token of (parts.length ? parts : [raw]).map(lettersAndDigits)) {
      const at = token ? letters.indexOf(token, from) : -1;
      if (at < 0) continue;
      from = at + token.length;
      if (codePoints(token) >= MIN_MATCH_CHARS && words.some((w) => w.includes(token))) covered.fill(1, at, at + token.length);
    }
  }
  return covered.reduce((sum, c) => sum + c, 0) / letters.length;
}

const headingLine = /^#{1,6}[ \t][^\n]*\n/;
const wordChar = /[\p{L}\p{N}]/u;

/** Whether a word of `text` (lower-cased, folded) begins with `stem`. */
function hasWordStartingWith(text: string, stem: string): boolean {
  for (let i = text.indexOf(stem); i >= 0; i = text.indexOf(stem, i + 1)) if (i === 0 || !wordChar.test(text[i - 1]!)) return true;
  return false;
}

/**
 * `lead_match` of each text: the rarity-weighted share of the query's terms that begin one of its
 * first LEAD_WORDS content words. Rarity is counted over these texts (the candidates).
 */
export function leadMatches(stems: string[], texts: string[], languages: string[]): number[] {
  if (stems.length === 0) return texts.map(() => 0);
  const bodies = texts.map((t) => fold(t.replace(headingLine, '').toLowerCase()));
  const n = bodies.length;
  const rarity = stems.map((s) => Math.log(1 + n / (1 + bodies.filter((b) => hasWordStartingWith(b, s)).length)));
  const total = rarity.reduce((a, b) => a + b, 0);
  return bodies.map((body) => {
    const lead = contentWords(body.slice(0, LEAD_CHARS), languages).slice(0, LEAD_WORDS);
    return stems.reduce((sum, s, i) => sum + (lead.some((w) => w.startsWith(s)) ? rarity[i]! : 0), 0) / total;
  });
}

/** The features of each candidate for one query variant. */
export function featureValues(terms: AnalysedQuery, candidates: Array<{ documentName: string; text: string }>, languages: string[]): FeatureValues[] {
  const lead = leadMatches(terms.stems, candidates.map((c) => c.text), languages);
  return candidates.map((c, i) => ({ name_match: nameMatch(c.documentName, terms.words), lead_match: lead[i]! }));
}
