import type { EmbeddingProvider } from '../providers/embeddings.js';
import { chunkClassFor, type SearchHit, type VectorIndex } from '../providers/vector-index.js';
import { bm25Query } from './language-analysis.js';
import { sparseVector } from './sparse-vector.js';

/**
 * Retrieval over one knowledge base. Three retrievers each produce their own ranked stream:
 * `dense` (embedding vectors), `sparse` (hashed character n-grams) and `bm25` (language-analysed
 * terms). Each query variant (the original query and, with character_replacement_name, the
 * replaced one) runs all three, and everything is fused into one ranking. Two fusions:
 *
 * - `score` (the default): each stream's scores are normalised over its own candidate list
 *   (min-max: its best candidate 1, its weakest 0), so a stream that is sure of its first hit (a
 *   large gap to the rest) pushes it harder than one whose candidates score alike, then
 *
 *     score(c) = Σ_variants w_variant · Σ_streams w_stream · norm_{variant,stream}(c)
 *
 * - `rrf`: weighted reciprocal rank fusion, which sees ranks only,
 *
 *     score(c) = Σ_variants w_variant · Σ_streams w_stream / (rrf_k + rank_{variant,stream}(c))
 *
 * Ranks count from 1; a stream that did not return c contributes nothing. Every chunk keeps what
 * each stream contributed to its score (the diagnostics show it). Ties break by chunk ID, so equal
 * inputs give equal output. Each stream fetches top_k × search_multiplier candidates. The default
 * weights were chosen on the tuning parts of the evaluation sets (bench/retrieval-eval.ts,
 * bench/RESULTS.md): the local dense model is the weakest stream and has the smallest weight.
 */
export const streamNames = ['dense', 'sparse', 'bm25'] as const;
export type StreamName = (typeof streamNames)[number];
export type Streams = Partial<Record<StreamName, SearchHit[]>>;
export type StreamWeights = Partial<Record<StreamName, number>>;
export const fusionMethods = ['score', 'rrf'] as const;
export type FusionMethod = (typeof fusionMethods)[number];

export interface RetrievalSettings {
  topK: number;
  searchMultiplier: number;
  /** The k of `rrf` fusion (unused by `score` fusion). */
  rrfK: number;
  fusion: FusionMethod;
  weights: Record<StreamName, number>;
  queryWeights: { original: number; replaced: number };
  /** When set, a second query variant replaces second-person references with this name. */
  characterReplacementName: string | null;
}

export const retrievalDefaults: RetrievalSettings = {
  topK: 12,
  searchMultiplier: 6,
  rrfK: 15,
  fusion: 'score',
  weights: { dense: 0.4, sparse: 0.6, bm25: 1 },
  queryWeights: { original: 1, replaced: 0.5 },
  characterReplacementName: null,
};

export type VariantName = 'original' | 'replaced';

export interface FusedHit extends SearchHit {
  /** Rank (from 1) of this chunk in each stream of each query variant that found it. */
  ranks: Partial<Record<VariantName, Partial<Record<StreamName, number>>>>;
  /** Its own score in each of those streams (cosine similarity, BM25 score). */
  streamScores: Partial<Record<VariantName, Partial<Record<StreamName, number>>>>;
  /** What each of those streams added to the fused `score` (they sum to it). */
  contributions: Partial<Record<VariantName, Partial<Record<StreamName, number>>>>;
}

export interface VariantRun {
  name: VariantName;
  weight: number;
  streams: Streams;
}

/** Each hit's score mapped onto [0, 1] over its stream's candidates (all 1 when they score alike). */
export function minMaxNormalised(hits: SearchHit[]): number[] {
  if (hits.length === 0) return [];
  let lo = Infinity;
  let hi = -Infinity;
  for (const h of hits) {
    lo = Math.min(lo, h.score);
    hi = Math.max(hi, h.score);
  }
  return hits.map((h) => (hi > lo ? (h.score - lo) / (hi - lo) : 1));
}

/**
 * Fuses the streams of every query variant (see the top of this file) and cuts to `topK`. `rrf`
 * is the default here so that the rank-only fusion keeps its simple call; searches pass the
 * configured method.
 */
export function fuseVariants(runs: VariantRun[], weights: StreamWeights, rrfK: number, topK: number, method: FusionMethod = 'rrf'): FusedHit[] {
  const fused = new Map<string, FusedHit>();
  for (const run of runs) {
    for (const [name, hits] of Object.entries(run.streams) as [StreamName, SearchHit[]][]) {
      const norm = method === 'score' ? minMaxNormalised(hits) : [];
      hits.forEach((hit, i) => {
        const entry = fused.get(hit.id) ?? { ...hit, score: 0, ranks: {}, streamScores: {}, contributions: {} };
        const part = run.weight * (weights[name] ?? 0) * (method === 'score' ? norm[i]! : 1 / (rrfK + i + 1));
        (entry.ranks[run.name] ??= {})[name] = i + 1;
        (entry.streamScores[run.name] ??= {})[name] = hit.score;
        (entry.contributions[run.name] ??= {})[name] = part;
        entry.score += part;
        fused.set(hit.id, entry);
      });
    }
  }
  return [...fused.values()].sort((a, b) => b.score - a.score || a.id.localeCompare(b.id)).slice(0, topK);
}

const secondPerson = /\b(you|your|yours|yourself)\b/gi;

/**
 * The replaced query variant: the user addresses the character ("what do you recommend?"), while
 * the documents speak of the character by name; references to "you" become the name. Null when
 * nothing would change.
 */
export function replacedQuery(query: string, name: string | null): string | null {
  if (!name?.trim()) return null;
  const replaced = query.replace(secondPerson, (m) => (/^yours?$/i.test(m) && m.toLowerCase() !== 'you' ? `${name}'s` : name));
  return replaced === query ? null : replaced;
}

export interface KnowledgeBaseScope {
  knowledgeBaseId: string;
  /** Languages of the KB's chunks (ISO 639-3): the BM25 query is analysed with each of them. */
  languages: string[];
}

export interface RetrievalDeps {
  index: VectorIndex;
  embedder: EmbeddingProvider;
}

export interface RetrievalOutcome {
  className: string;
  variants: Array<{ name: VariantName; query: string; weight: number; streams: Record<StreamName, SearchHit[]> }>;
  combined: FusedHit[];
  /** The whole fused candidate list, of which `combined` is the first top_k (for evaluation). */
  ranked: FusedHit[];
  timings_ms: Record<string, number>;
}

/**
 * Runs every stream of every query variant (in parallel) against the class of the configured
 * embedding profile, then fuses. `filterHits` drops hits the caller must not see (e.g. documents
 * being deleted) before ranks are assigned.
 */
export async function searchKnowledgeBase(
  deps: RetrievalDeps,
  scope: KnowledgeBaseScope,
  query: string,
  settings: RetrievalSettings,
  options: {
    className?: string;
    filterHits?: (hits: SearchHit[]) => Promise<SearchHit[]>;
    /** Embeds the query variants; null skips the dense stream (e.g. its paid model is budget-blocked). */
    embedQueries?: (queries: string[]) => Promise<number[][] | null>;
  } = {},
): Promise<RetrievalOutcome> {
  const started = performance.now();
  const className = options.className ?? chunkClassFor(deps.embedder.profile.name);
  const candidates = settings.topK * settings.searchMultiplier;
  const variantQueries: Array<{ name: VariantName; query: string; weight: number }> = [{ name: 'original', query, weight: settings.queryWeights.original }];
  const replaced = replacedQuery(query, settings.characterReplacementName);
  if (replaced) variantQueries.push({ name: 'replaced', query: replaced, weight: settings.queryWeights.replaced });

  const vectors = await (options.embedQueries ?? ((q: string[]) => deps.embedder.embed(q)))(variantQueries.map((v) => v.query));
  const embeddedAt = performance.now();
  const filter = { knowledgeBaseId: scope.knowledgeBaseId };
  const queryLanguage = scope.languages.filter((l) => l !== 'und');
  const variants = await Promise.all(
    variantQueries.map(async (v, i) => {
      const [dense, sparse, bm25] = await Promise.all([
        vectors ? deps.index.searchDense(className, filter, vectors[i]!, candidates) : Promise.resolve([]),
        deps.index.searchSparse(className, filter, sparseVector(v.query, queryLanguage), candidates),
        deps.index.searchBm25(className, filter, bm25Query(v.query, queryLanguage), candidates),
      ]);
      const keep = options.filterHits ?? (async (h: SearchHit[]) => h);
      return { ...v, streams: { dense: await keep(dense), sparse: await keep(sparse), bm25: await keep(bm25) } };
    }),
  );
  const searchedAt = performance.now();
  const ranked = fuseVariants(variants, settings.weights, settings.rrfK, Number.MAX_SAFE_INTEGER, settings.fusion);
  const combined = ranked.slice(0, settings.topK);
  const done = performance.now();
  return {
    className,
    variants,
    combined,
    ranked,
    timings_ms: { embed_query: round(embeddedAt - started), search: round(searchedAt - embeddedAt), fuse: round(done - searchedAt), total: round(done - started) },
  };
}

const round = (ms: number) => Math.round(ms * 100) / 100;
