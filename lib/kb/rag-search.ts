import type { Db } from '../db.js';
import { forbidden } from '../errors.js';
import type { EmbeddingProvider } from '../providers/embeddings.js';
import { CHUNK_CLASS, type SearchHit, type VectorIndex } from '../providers/vector-index.js';
import { findKnowledgeBase } from './lookup.js';
import { fuseByWeightedRrf, retrievalDefaults, searchKnowledgeBase, type FusedHit } from './retrieval.js';

export interface RagSearchRequest {
  partner: string;
  kb: string;
  user_message: string;
  robot_message?: string;
  character_replacement_name?: string;
  top_k?: number;
  search_multiplier?: number;
  rrf_k?: number;
  rrf_weight_dense?: number;
  rrf_weight_sparse?: number;
  rrf_weight_bm25?: number;
  query_weight_original?: number;
  query_weight_replaced?: number;
  collection_override?: string;
  rag_index_override?: string;
}

const adminOnly: Array<keyof RagSearchRequest> = ['collection_override', 'rag_index_override'];
const defaultsOnlyForPartners: Array<[keyof RagSearchRequest, number]> = [
  ['top_k', retrievalDefaults.topK],
  ['search_multiplier', retrievalDefaults.searchMultiplier],
  ['rrf_k', retrievalDefaults.rrfK],
];

/**
 * POST /api/rag-test/search. Partner keys get the default retrieval shape and a response without
 * internal identifiers (chunk object IDs, index class); the administrator sees everything.
 */
export async function ragSearch(deps: { db: Db; index: VectorIndex; embedder: EmbeddingProvider }, req: RagSearchRequest, isAdmin: boolean) {
  if (!isAdmin) {
    for (const field of adminOnly) if (req[field] !== undefined) throw forbidden(`${field} needs the administrator key`);
    for (const [field, value] of defaultsOnlyForPartners) {
      if (req[field] !== undefined && req[field] !== value) throw forbidden(`${field} must be the default (${value}) for non-admin keys`);
    }
  }
  const { kb } = await findKnowledgeBase(deps.db, req.partner, req.kb);
  const settings = {
    topK: req.top_k ?? retrievalDefaults.topK,
    searchMultiplier: req.search_multiplier ?? retrievalDefaults.searchMultiplier,
    rrfK: req.rrf_k ?? retrievalDefaults.rrfK,
    weights: { dense: req.rrf_weight_dense ?? retrievalDefaults.weights.dense, bm25: req.rrf_weight_bm25 ?? retrievalDefaults.weights.bm25 },
  };
  const query = [req.user_message, req.robot_message].filter(Boolean).join('\n');
  const result = await searchKnowledgeBase(deps, kb.id, query, settings);
  // Vectors of a document being deleted are removed asynchronously; never show them meanwhile.
  const hitIds = [...new Set([...result.streams.dense, ...result.streams.bm25].map((h) => h.documentId))];
  const live = new Set((await deps.db.document.findMany({ where: { id: { in: hitIds }, deletionRequestedAt: null }, select: { id: true } })).map((d) => d.id));
  const visible = <T extends SearchHit>(hits: T[]) => hits.filter((h) => live.has(h.documentId));
  result.streams.dense = visible(result.streams.dense);
  result.streams.bm25 = visible(result.streams.bm25);
  result.combined = fuseByWeightedRrf(result.streams, settings.weights, settings.rrfK, settings.topK);

  const streamItem = (h: SearchHit, i: number) => ({
    rank: i + 1,
    document_id: h.documentId,
    document_name: h.documentName,
    chunk_index: h.chunkIndex,
    score: h.score,
    text: h.text,
    ...(isAdmin ? { chunk_id: h.id } : {}),
  });
  const combinedItem = (h: FusedHit, i: number) => ({ ...streamItem(h, i), retrievers: h.ranks });

  return {
    config: {
      top_k: settings.topK,
      search_multiplier: settings.searchMultiplier,
      rrf_k: settings.rrfK,
      rrf_weight_dense: settings.weights.dense,
      rrf_weight_bm25: settings.weights.bm25,
      retrievers: ['dense', 'bm25'],
      ...(isAdmin ? { collection: CHUNK_CLASS, knowledge_base_id: kb.id } : {}),
    },
    query,
    streams: { dense: result.streams.dense.map(streamItem), bm25: result.streams.bm25.map(streamItem) },
    combined_results: result.combined.map(combinedItem),
    supported_bm25_languages: ['en'],
    timings_ms: result.timings_ms,
    total_results: result.combined.length,
  };
}
