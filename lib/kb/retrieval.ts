import type { EmbeddingProvider } from '../providers/embeddings.js';
import { chunkClassFor, type SearchHit, type VectorIndex } from '../providers/vector-index.js';
import { bm25Query } from './language-analysis.js';
import { sparseVector } from './sparse-vector.js';

/**
 * Retrieval over one knowledge base. Three retrievers each produce their own ranked stream:
 * `dense` (embedding vectors), `sparse` (hashed character n-grams) and `bm25` (language-analysed
 * terms). Each query variant (the original query and, with character_replacement_name, the
 * replaced one) runs all three, and everything is fused by weighted reciprocal rank fusion:
 *
 *   score(c) = Σ_variants w_variant · Σ_streams w_stream / (rrf_k + rank_{variant,stream}(c))
 *
 * ranks counted from 1; a stream that did not return c contributes nothing. Ties break by chunk ID,
 * so equal inputs give equal output. Each stream fetches top_k × search_multiplier candidates.
 */
export const streamNames = ['dense', 'sparse', 'bm25'] as const;
export type StreamName = (typeof streamNames)[number];
export type Streams = Partial<Record<StreamName, SearchHit[]>>;
export type StreamWeights = Partial<Record<StreamName, number>>;

export interface RetrievalSettings {
  topK: number;
  searchMultiplier: number;
  rrfK: number;
  weights: Record<StreamName, number>;
  queryWeights: { original: number; replaced: number };
  /** When set, a second query variant replaces second-person references with this name. */
  characterReplacementName: string | null;
}

export const retrievalDefaults: RetrievalSettings = {
  topK: 12,
  searchMultiplier: 6,
  rrfK: 15,
  weights: { dense: 1.2, sparse: 0.3, bm25: 0.8 },
  queryWeights: { original: 1, replaced: 0.5 },
  characterReplacementName: null,
};

export type VariantName = 'original' | 'replaced';

export interface FusedHit extends SearchHit {
  /** Rank (from 1) of this chunk in each stream of each query variant that found it. */
  ranks: Partial<Record<VariantName, Partial<Record<StreamName, number>>>>;
}

export interface VariantRun {
  name: VariantName;
  weight: number;
  streams: Streams;
}

/** Weighted RRF over the streams of every query variant. */
export function fuseVariants(runs: VariantRun[], weights: StreamWeights, rrfK: number, topK: number): FusedHit[] {
  const fused = new Map<string, FusedHit>();
  for (const run of runs) {
    for (const [name, hits] of Object.entries(run.streams) as [StreamName, SearchHit[]][]) {
      hits.forEach((hit, i) => {
        const entry = fused.get(hit.id) ?? { ...hit, score: 0, ranks: {} };
        (entry.ranks[run.name] ??= {})[name] = i + 1;
        entry.score += (run.weight * (weights[name] ?? 0)) / (rrfK + i + 1);
        fused.set(hit.id, entry);
      });
    }
  }
  return [...fused.values()].sort((a, b) => b.score - a.score || a.id.localeCompare(b.id)).slice(0, topK);
}

/** Weighted RRF of one query's streams. */
export function fuseByWeightedRrf(streams: Streams, weights: StreamWeights, rrfK: number, topK: number): Array<FusedHit & { streamRanks: Partial<Record<StreamName, number>> }> {
  return fuseVariants([{ name: 'original', weight: 1, streams }], weights, rrfK, topK).map((h) => ({ ...h, streamRanks: h.ranks.original ?? {} }));
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
  const combined = fuseVariants(variants, settings.weights, settings.rrfK, settings.topK);
  const done = performance.now();
  return {
    className,
    variants,
    combined,
    timings_ms: { embed_query: round(embeddedAt - started), search: round(searchedAt - embeddedAt), fuse: round(done - searchedAt), total: round(done - started) },
  };
}

const round = (ms: number) => Math.round(ms * 100) / 100;
