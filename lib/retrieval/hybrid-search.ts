import type { EmbeddingProvider } from '../providers/embeddings.js';
import { chunkClassFor, type SearchHit, type VectorIndex } from '../providers/vector-index.js';
import { analyseQuery, featureValues, learnedFeatureWeights, rescoringFeatures, type AnalysedQuery, type FeatureValues } from './rescoring.js';
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
 * Ranks count from 1; a stream that did not return c contributes nothing. Then, unless it is
 * turned off, the learned re-scoring (rescoring.ts) adds what the document's name and the chunk's
 * opening say about the query. Every chunk keeps what each stream and each re-scoring feature
 * contributed to its score (the diagnostics show it). Ties break by chunk ID, so equal inputs give
 * equal output. Each stream fetches top_k × search_multiplier candidates. The default weights
 * were learned on the tuning parts of the evaluation sets (bench/retrieval-eval.ts,
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
  /** The re-scoring features' weights (rescoring.ts); null turns re-scoring off. */
  rescoring: FeatureValues | null;
}

/** Learned on the tuning parts of the evaluation sets together with learnedFeatureWeights (bench/retrieval-eval.ts). */
export const retrievalDefaults: RetrievalSettings = {
  topK: 12,
  searchMultiplier: 6,
  rrfK: 15,
  fusion: 'score',
  weights: { dense: 0.28, sparse: 0.42, bm25: 1 },
  queryWeights: { original: 1, replaced: 0.5 },
  characterReplacementName: null,
  rescoring: learnedFeatureWeights,
};

export type VariantName = 'original' | 'replaced';

export interface FusedHit extends SearchHit {
  /** Rank (from 1) of this chunk in each stream of each query variant that found it. */
  ranks: Partial<Record<VariantName, Partial<Record<StreamName, number>>>>;
  /** Its own score in each of those streams (cosine similarity, BM25 score). */
  streamScores: Partial<Record<VariantName, Partial<Record<StreamName, number>>>>;
  /** What each of those streams added to the fused `score`. */
  contributions: Partial<Record<VariantName, Partial<Record<StreamName, number>>>>;
  /** The re-scoring features of each query variant (empty without re-scoring). */
  features: Partial<Record<VariantName, FeatureValues>>;
  /** What each feature added to `score`; with `contributions` they sum to it. */
  featureContributions: Partial<Record<VariantName, FeatureValues>>;
  /** Position (from 1) by the streams alone, before re-scoring. */
  rankWithoutRescoring: number;
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
        const entry = fused.get(hit.id) ?? { ...hit, score: 0, ranks: {}, streamScores: {}, contributions: {}, features: {}, featureContributions: {}, rankWithoutRescoring: 0 };
        const part = run.weight * (weights[name] ?? 0) * (method === 'score' ? norm[i]! : 1 / (rrfK + i + 1));
        (entry.ranks[run.name] ??= {})[name] = i + 1;
        (entry.streamScores[run.name] ??= {})[name] = hit.score;
        (entry.contributions[run.name] ??= {})[name] = part;
        entry.score += part;
        fused.set(hit.id, entry);
      });
    }
  }
  return byScore([...fused.values()])
    .map((h, i) => ({ ...h, rankWithoutRescoring: i + 1 }))
    .slice(0, topK);
}

const byScore = (hits: FusedHit[]) => hits.sort((a, b) => b.score - a.score || a.id.localeCompare(b.id));

/** What a stream of weight 1 gives its best candidate: the scale of the re-scoring weights. */
export const fusionUnit = (method: FusionMethod, rrfK: number) => (method === 'score' ? 1 : 1 / (rrfK + 1));

/**
 * The learned re-scoring (rescoring.ts) of a fused candidate list: each variant's features of every
 * candidate, weighted by the feature's and the variant's weight and the fusion's unit, are added
 * to its score, and the list is ordered again.
 */
export function rescore(fused: FusedHit[], variants: Array<{ name: VariantName; weight: number; analysed: AnalysedQuery }>, weights: FeatureValues, unit: number, languages: string[]): FusedHit[] {
  const out = fused.map((h) => ({ ...h, features: { ...h.features }, featureContributions: { ...h.featureContributions } }));
  for (const v of variants) {
    featureValues(v.analysed, out, languages).forEach((values, i) => {
      const hit = out[i]!;
      const parts = Object.fromEntries(rescoringFeatures.map((f) => [f, unit * v.weight * weights[f] * values[f]])) as FeatureValues;
      hit.features[v.name] = values;
      hit.featureContributions[v.name] = parts;
      hit.score += rescoringFeatures.reduce((sum, f) => sum + parts[f], 0);
    });
  }
  return byScore(out);
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
  variants: Array<{ name: VariantName; query: string; weight: number; analysed: AnalysedQuery; streams: Record<StreamName, SearchHit[]> }>;
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
  const queryLanguage = queryLanguages(scope);
  const variants = await Promise.all(
    variantQueries.map(async (v, i) => {
      const analysed = analyseQuery(v.query, queryLanguage);
      const [dense, sparse, bm25] = await Promise.all([
        vectors ? deps.index.searchDense(className, filter, vectors[i]!, candidates) : Promise.resolve([]),
        deps.index.searchSparse(className, filter, sparseVector(v.query, queryLanguage), candidates),
        deps.index.searchBm25(className, filter, analysed.bm25, candidates),
      ]);
      const keep = options.filterHits ?? (async (h: SearchHit[]) => h);
      return { ...v, analysed, streams: { dense: await keep(dense), sparse: await keep(sparse), bm25: await keep(bm25) } };
    }),
  );
  const searchedAt = performance.now();
  const fused = fuseVariants(variants, settings.weights, settings.rrfK, Number.MAX_SAFE_INTEGER, settings.fusion);
  const fusedAt = performance.now();
  const ranked = settings.rescoring ? rescore(fused, variants, settings.rescoring, fusionUnit(settings.fusion, settings.rrfK), queryLanguage) : fused;
  const combined = ranked.slice(0, settings.topK);
  const done = performance.now();
  return {
    className,
    variants,
    combined,
    ranked,
    timings_ms: {
      embed_query: round(embeddedAt - started),
      search: round(searchedAt - embeddedAt),
      fuse: round(fusedAt - searchedAt),
      ...(settings.rescoring ? { rescore: round(done - fusedAt) } : {}),
      total: round(done - started),
    },
  };
}

/** The languages a KB's queries are analysed with: those of its chunks (`und`, too short to tell, is none). */
export const queryLanguages = (scope: KnowledgeBaseScope) => scope.languages.filter((l) => l !== 'und');

const round = (ms: number) => Math.round(ms * 100) / 100;
