import { contentWords } from './language-analysis.js';

/**
 * The sparse retriever's representation: hashed character n-grams of content words (3- to
 * 5-grams of each word padded with boundary marks), weighted by sublinear term frequency and
 * L2-normalised. It is lexical like BM25 but matches below the word level, so it finds inflected,
 * compounded, misspelt or partially typed words that BM25's whole (stemmed) terms miss
 * ("autoscaler" / "autoscaling", "Kündigungsfrist" / "Kündigung"), and it needs no language-specific
 * stemmer. Weaviate 1.39 takes no client-supplied sparse vectors, so the feature space is folded into
 * SPARSE_DIMENSIONS buckets by feature hashing (with a sign bit, which keeps collisions unbiased)
 * and stored as a second named vector searched by cosine similarity.
 */
const SPARSE_DIMENSIONS = 1024;
const MIN_N = 3;
const MAX_N = 5;

function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Term frequencies of the n-gram features of a text. */
function ngramFeatures(text: string, language: string | string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const word of contentWords(text, language)) {
    const padded = `⟨${word}⟩`;
    const chars = [...padded];
    for (let n = MIN_N; n <= MAX_N; n++) {
      for (let i = 0; i + n <= chars.length; i++) {
        const g = chars.slice(i, i + n).join('');
        counts.set(g, (counts.get(g) ?? 0) + 1);
      }
    }
  }
  return counts;
}

/** The hashed, normalised sparse vector (stored densely; most buckets are zero). */
export function sparseVector(text: string, language: string | string[]): number[] {
  const v = new Array<number>(SPARSE_DIMENSIONS).fill(0);
  for (const [g, tf] of ngramFeatures(text, language)) {
    const h = fnv1a(g);
    const sign = h & 0x80000000 ? -1 : 1;
    v[h % SPARSE_DIMENSIONS]! += sign * (1 + Math.log(tf));
  }
  const norm = Math.hypot(...v);
  // An all-zero vector (a chunk of numbers and function words only) gets a tiny constant one, so
  // the cosine index accepts it; it will not rank above anything with real overlap.
  if (norm === 0) return v.map((_, i) => (i === 0 ? 1e-6 : 0));
  return v.map((x) => x / norm);
}
