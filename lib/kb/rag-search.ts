import crypto from 'node:crypto';
import { release, reserve, settle } from '../budget/ledger.js';
import { embeddingBatchBound, embeddingUsage } from './embedding-budget.js';
import type { Db } from '../db.js';
import { badRequest, forbidden } from '../errors.js';
import type { EmbeddingProvider } from '../providers/embeddings.js';
import { chunkClassFor, type SearchHit, type VectorIndex } from '../providers/vector-index.js';
import { findKnowledgeBase } from './lookup.js';
import { supportedBm25Languages } from './language-analysis.js';
import { retrievalDefaults, searchKnowledgeBase, streamNames, type FusedHit, type RetrievalSettings, type StreamName } from './retrieval.js';

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

export interface RagDeps {
  db: Db;
  index: VectorIndex;
  embedder: EmbeddingProvider;
}

const adminOnly: Array<keyof RagSearchRequest> = ['collection_override', 'rag_index_override'];
const defaultsOnlyForPartners: Array<[keyof RagSearchRequest, number]> = [
  ['top_k', retrievalDefaults.topK],
  ['search_multiplier', retrievalDefaults.searchMultiplier],
  ['rrf_k', retrievalDefaults.rrfK],
];

/** Languages of a KB's indexed chunks, from the documents' embedding_bm25_language_counts. */
async function knowledgeBaseLanguages(db: Db, knowledgeBaseId: string): Promise<string[]> {
  const rows = await db.document.findMany({
    where: { knowledgeBaseId, deletionRequestedAt: null, embeddingStatus: 'success' },
    select: { embeddingBm25LanguageCounts: true },
  });
  const langs = new Set<string>();
  for (const r of rows) for (const l of Object.keys((r.embeddingBm25LanguageCounts as Record<string, number> | null) ?? {})) langs.add(l);
  return [...langs];
}

/** Vectors of a document being deleted are removed asynchronously; never show them meanwhile. */
function liveFilter(db: Db) {
  return async (hits: SearchHit[]) => {
    const ids = [...new Set(hits.map((h) => h.documentId))];
    if (ids.length === 0) return hits;
    const live = new Set((await db.document.findMany({ where: { id: { in: ids }, deletionRequestedAt: null }, select: { id: true } })).map((d) => d.id));
    return hits.filter((h) => live.has(h.documentId));
  };
}

export interface KnowledgeSearchOptions {
  topK?: number;
  searchMultiplier?: number;
  rrfK?: number;
  weights?: Partial<RetrievalSettings['weights']>;
  queryWeights?: Partial<RetrievalSettings['queryWeights']>;
  characterReplacementName?: string | null;
  /** Admin diagnostics only: search another Weaviate class than the configured profile's. */
  className?: string;
}

export interface KnowledgeResult {
  document_id: string;
  document_name: string;
  chunk_index: number;
  text: string;
  /** Fused weighted-RRF score. */
  score: number;
}

/** Spreads only defined values, so a partial override never erases a default. */
const defined = <T extends object>(o: T | undefined): Partial<T> => Object.fromEntries(Object.entries(o ?? {}).filter(([, v]) => v !== undefined)) as Partial<T>;

function settingsFrom(options: KnowledgeSearchOptions): RetrievalSettings {
  return {
    topK: options.topK ?? retrievalDefaults.topK,
    searchMultiplier: options.searchMultiplier ?? retrievalDefaults.searchMultiplier,
    rrfK: options.rrfK ?? retrievalDefaults.rrfK,
    weights: { ...retrievalDefaults.weights, ...defined(options.weights) },
    queryWeights: { ...retrievalDefaults.queryWeights, ...defined(options.queryWeights) },
    characterReplacementName: options.characterReplacementName ?? null,
  };
}

/**
 * Query embeddings of a paid embedding model are embedding usage of the KB: each is admitted and
 * settled through the ledger. A KB whose budget cannot hold one is still searched, without its
 * dense stream; `dense_skipped` says why.
 */
function budgetedQueryEmbedder(deps: RagDeps, knowledgeBaseId: string, skipped: { reason: string | null }) {
  return async (queries: string[]): Promise<number[][] | null> => {
    if (!deps.embedder.paid) return deps.embedder.embed(queries);
    const operationKey = `search-query-${crypto.randomUUID()}`;
    const admission = await reserve(deps.db, { knowledgeBaseId, operationKey, workflowId: 'api-search', category: 'embedding', bound: embeddingBatchBound(queries, deps.embedder) });
    if (!admission.admitted) {
      skipped.reason = `BUDGET_BLOCKED:${admission.reason}: ${admission.detail}`;
      return null;
    }
    let result;
    try {
      result = await deps.embedder.embedWithUsage(queries);
    } catch (err) {
      await release(deps.db, operationKey, `query embedding failed: ${(err as Error).message}`.slice(0, 500));
      throw err;
    }
    await settle(deps.db, operationKey, embeddingUsage(result.inputTokens, deps.embedder));
    return result.vectors;
  };
}

async function runSearch(deps: RagDeps, knowledgeBaseId: string, query: string, options: KnowledgeSearchOptions) {
  const settings = settingsFrom(options);
  const languages = await knowledgeBaseLanguages(deps.db, knowledgeBaseId);
  const skipped = { reason: null as string | null };
  const outcome = await searchKnowledgeBase(deps, { knowledgeBaseId, languages }, query, settings, {
    className: options.className,
    filterHits: liveFilter(deps.db),
    embedQueries: budgetedQueryEmbedder(deps, knowledgeBaseId, skipped),
  });
  return { settings, languages, outcome, denseSkipped: skipped.reason };
}

/**
 * Knowledge context for other services (the messaging interface): the fused top results of a
 * KB for a query text. Throws 404 when the partner or KB does not exist.
 */
export async function searchKnowledge(deps: RagDeps, partner: string, kb: string, query: string, options: KnowledgeSearchOptions = {}): Promise<KnowledgeResult[]> {
  const found = await findKnowledgeBase(deps.db, partner, kb);
  const { outcome } = await runSearch(deps, found.kb.id, query, options);
  return outcome.combined.map((h) => ({ document_id: h.documentId, document_name: h.documentName, chunk_index: h.chunkIndex, text: h.text, score: h.score }));
}

const COLLECTION_PATTERN = /^(Chunk_[A-Za-z0-9_]+|KnowledgeChunk)$/;

/**
 * POST /api/rag-test/search. Partner keys get the default retrieval shape and a response without
 * internal routing or identifiers (chunk object IDs, Weaviate class, KB UUID, profile); the
 * administrator sees everything and may point the search at another class.
 */
export async function ragSearch(deps: RagDeps, req: RagSearchRequest, isAdmin: boolean) {
  if (!isAdmin) {
    for (const field of adminOnly) if (req[field] !== undefined) throw forbidden(`${field} needs the administrator key`);
    for (const [field, value] of defaultsOnlyForPartners) {
      if (req[field] !== undefined && req[field] !== value) throw forbidden(`${field} must be the default (${value}) for non-admin keys`);
    }
  }
  const override = req.collection_override ?? req.rag_index_override;
  if (override !== undefined && !COLLECTION_PATTERN.test(override)) throw badRequest('collection_override / rag_index_override must name a chunk class (Chunk_... or KnowledgeChunk)');
  if (override !== undefined && !(await deps.index.chunkClasses()).includes(override)) throw badRequest(`no chunk class ${override} exists`);

  const { kb } = await findKnowledgeBase(deps.db, req.partner, req.kb);
  const query = [req.user_message, req.robot_message].filter(Boolean).join('\n');
  const { settings, languages, outcome, denseSkipped } = await runSearch(deps, kb.id, query, {
    topK: req.top_k,
    searchMultiplier: req.search_multiplier,
    rrfK: req.rrf_k,
    weights: { dense: req.rrf_weight_dense, sparse: req.rrf_weight_sparse, bm25: req.rrf_weight_bm25 },
    queryWeights: { original: req.query_weight_original, replaced: req.query_weight_replaced },
    characterReplacementName: req.character_replacement_name ?? null,
    className: override,
  });

  const streamItem = (h: SearchHit, i: number) => ({
    rank: i + 1,
    document_id: h.documentId,
    document_name: h.documentName,
    chunk_index: h.chunkIndex,
    score: h.score,
    text: h.text,
    ...(isAdmin ? { chunk_id: h.id } : {}),
  });
  const combinedItem = (h: FusedHit, i: number) => ({
    ...streamItem(h, i),
    retrievers: h.ranks.original ?? {},
    ...(h.ranks.replaced ? { replaced_retrievers: h.ranks.replaced } : {}),
  });
  const streamsOf = (v: (typeof outcome.variants)[number]) =>
    Object.fromEntries(streamNames.map((s) => [s, v.streams[s].map(streamItem)])) as Record<StreamName, ReturnType<typeof streamItem>[]>;
  const original = outcome.variants[0]!;
  const replaced = outcome.variants.find((v) => v.name === 'replaced');

  return {
    config: {
      top_k: settings.topK,
      search_multiplier: settings.searchMultiplier,
      candidates_per_stream: settings.topK * settings.searchMultiplier,
      rrf_k: settings.rrfK,
      rrf_weight_dense: settings.weights.dense,
      rrf_weight_sparse: settings.weights.sparse,
      rrf_weight_bm25: settings.weights.bm25,
      query_weight_original: settings.queryWeights.original,
      query_weight_replaced: settings.queryWeights.replaced,
      character_replacement_name: settings.characterReplacementName,
      retrievers: [...streamNames],
      sparse_representation: 'hashed character 3-5-grams of content words, sublinear tf, cosine',
      bm25_query_languages: languages,
      ...(isAdmin
        ? {
            collection: outcome.className,
            collection_overridden: override !== undefined,
            knowledge_base_id: kb.id,
            embedding_profile: deps.embedder.profile.name,
            default_collection: chunkClassFor(deps.embedder.profile.name),
          }
        : {}),
    },
    query,
    query_variants: outcome.variants.map((v) => ({ name: v.name, text: v.query, weight: v.weight })),
    streams: streamsOf(original),
    ...(replaced ? { replaced_streams: streamsOf(replaced) } : {}),
    combined_results: outcome.combined.map(combinedItem),
    supported_bm25_languages: supportedBm25Languages,
    timings_ms: outcome.timings_ms,
    total_results: outcome.combined.length,
    ...(denseSkipped ? { dense_skipped: denseSkipped } : {}),
  };
}
