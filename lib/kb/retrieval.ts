import type { EmbeddingProvider } from '../providers/embeddings.js';
import type { SearchHit, VectorIndex } from '../providers/vector-index.js';

/**
 * Retrieval over one knowledge base: each retriever produces its own ranked stream and the streams
 * are fused by weighted reciprocal rank fusion, score(d) = Σ_s w_s / (k + rank_s(d)), ranks from 1.
 */
export interface RetrievalSettings {
  topK: number;
  searchMultiplier: number;
  rrfK: number;
  weights: { dense: number; bm25: number };
}

export const retrievalDefaults: RetrievalSettings = { topK: 12, searchMultiplier: 6, rrfK: 15, weights: { dense: 1, bm25: 1 } };

export interface FusedHit extends SearchHit {
  /** Rank (from 1) of this chunk in each stream that found it. */
  ranks: Partial<Record<keyof RetrievalSettings['weights'], number>>;
}

export function fuseByWeightedRrf(
  streams: Partial<Record<keyof RetrievalSettings['weights'], SearchHit[]>>,
  weights: RetrievalSettings['weights'],
  rrfK: number,
  topK: number,
): FusedHit[] {
  const fused = new Map<string, FusedHit>();
  for (const [name, hits] of Object.entries(streams) as [keyof RetrievalSettings['weights'], SearchHit[]][]) {
    hits.forEach((hit, i) => {
      const entry = fused.get(hit.id) ?? { ...hit, score: 0, ranks: {} };
      entry.ranks[name] = i + 1;
      entry.score += weights[name] / (rrfK + i + 1);
      fused.set(hit.id, entry);
    });
  }
  return [...fused.values()].sort((a, b) => b.score - a.score || a.id.localeCompare(b.id)).slice(0, topK);
}

export async function searchKnowledgeBase(
  deps: { index: VectorIndex; embedder: EmbeddingProvider },
  knowledgeBaseId: string,
  query: string,
  settings: RetrievalSettings,
) {
  const candidates = settings.topK * settings.searchMultiplier;
  const started = performance.now();
  const [vector] = await deps.embedder.embed([query]);
  const embeddedAt = performance.now();
  const filter = { knowledgeBaseId };
  const [dense, bm25] = await Promise.all([deps.index.searchDense(filter, vector!, candidates), deps.index.searchBm25(filter, query, candidates)]);
  const searchedAt = performance.now();
  const combined = fuseByWeightedRrf({ dense, bm25 }, settings.weights, settings.rrfK, settings.topK);
  return {
    streams: { dense, bm25 },
    combined,
    timings_ms: {
      embed_query: round(embeddedAt - started),
      search: round(searchedAt - embeddedAt),
      fuse: round(performance.now() - searchedAt),
      total: round(performance.now() - started),
    },
  };
}

const round = (ms: number) => Math.round(ms * 100) / 100;
