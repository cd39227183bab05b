import crypto from 'node:crypto';
import { release, reserve, settle } from '../budget/ledger.js';
import { embeddingBatchBound, embeddingUsage } from './embedding-budget.js';
import type { Config } from '../platform/config.js';
import type { Db } from '../platform/db.js';
import { badRequest, forbidden } from '../platform/errors.js';
import { isBlank } from '../platform/text.js';
import type { EmbeddingProvider } from '../providers/embeddings.js';
import { chunkClassFor, type SearchHit, type VectorIndex } from '../providers/vector-index.js';
import { findKnowledgeBase } from '../knowledge/lookup.js';
import { budgetBlockedMessage } from '../contracts/budget-admission.js';
import { supportedBm25Languages } from './language-analysis.js';
import { fusionUnit, retrievalDefaults, searchKnowledgeBase, streamNames, type FusionMethod, type RetrievalSettings, type StreamName } from './hybrid-search.js';
import { rescoringFeatures } from './rescoring.js';
import { rerankStage, type RerankOutcome } from './rerank.js';

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
  fusion?: FusionMethod;
  rerank?: boolean;
  collection_override?: string;
  rag_index_override?: string;
}

export interface RagDeps {
  db: Db;
  index: VectorIndex;
  embedder: EmbeddingProvider;
  /**
   * The process configuration (Services.config): fusion defaults and the re-ranker. The API and
   * messaging pass their Services, which carry it; without it the built-in defaults apply and
   * nothing is re-ranked.
   */
  config?: Pick<Config, 'retrieval'>;
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
  fusion?: FusionMethod;
  weights?: Partial<RetrievalSettings['weights']>;
  queryWeights?: Partial<RetrievalSettings['queryWeights']>;
  characterReplacementName?: string | null;
  /** Admin diagnostics only: search another Weaviate class than the configured profile's. */
  className?: string;
}

/** Spreads only defined values, so a partial override never erases a default. */
const defined = <T extends object>(o: T | undefined): Partial<T> => Object.fromEntries(Object.entries(o ?? {}).filter(([, v]) => v !== undefined)) as Partial<T>;

/** The defaults of this process: the built-in ones, with RETRIEVAL_FUSION / RETRIEVAL_WEIGHT_* / RETRIEVAL_RESCORING applied. */
export function configuredDefaults(config?: Pick<Config, 'retrieval'>): RetrievalSettings {
  const r = config?.retrieval;
  const w = retrievalDefaults.weights;
  return {
    ...retrievalDefaults,
    fusion: r?.fusion ?? retrievalDefaults.fusion,
    weights: { dense: r?.weights.dense ?? w.dense, sparse: r?.weights.sparse ?? w.sparse, bm25: r?.weights.bm25 ?? w.bm25 },
    rescoring: r?.rescoring === false ? null : retrievalDefaults.rescoring,
  };
}

function settingsFrom(options: KnowledgeSearchOptions, config?: Pick<Config, 'retrieval'>): RetrievalSettings {
  const defaults = configuredDefaults(config);
  return {
    topK: options.topK ?? defaults.topK,
    searchMultiplier: options.searchMultiplier ?? defaults.searchMultiplier,
    rrfK: options.rrfK ?? defaults.rrfK,
    fusion: options.fusion ?? defaults.fusion,
    weights: { ...defaults.weights, ...defined(options.weights) },
    queryWeights: { ...retrievalDefaults.queryWeights, ...defined(options.queryWeights) },
    characterReplacementName: options.characterReplacementName ?? null,
    rescoring: defaults.rescoring,
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
      skipped.reason = budgetBlockedMessage(admission.reason, admission.detail);
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
  const settings = settingsFrom(options, deps.config);
  const languages = await knowledgeBaseLanguages(deps.db, knowledgeBaseId);
  const skipped = { reason: null as string | null };
  const outcome = await searchKnowledgeBase(deps, { knowledgeBaseId, languages }, query, settings, {
    className: options.className,
    filterHits: liveFilter(deps.db),
    embedQueries: budgetedQueryEmbedder(deps, knowledgeBaseId, skipped),
  });
  return { settings, languages, outcome, denseSkipped: skipped.reason };
}

const COLLECTION_PATTERN = /^(?:Chunk_\w+|KnowledgeChunk)$/;

/**
 * POST /api/rag-test/search. Partner keys get the default retrieval shape and a response without
 * internal routing or identifiers (chunk object IDs, Weaviate class, KB UUID, profile); the
 * administrator sees everything and may point the search at another class. `resolvedKbId`: the
 * knowledge base a caller has already looked up and checked (a messaging character's, by the
 * key's partner id), searched as it is rather than looked up by name again, which a partner
 * renamed meanwhile (and another given its old name) would answer with another partner's.
 */
export async function ragSearch(deps: RagDeps, req: RagSearchRequest, isAdmin: boolean, resolvedKbId?: string) {
  if (!isAdmin) {
    for (const field of adminOnly) if (req[field] !== undefined) throw forbidden(`${field} needs the administrator key`);
    for (const [field, value] of defaultsOnlyForPartners) {
      if (req[field] !== undefined && req[field] !== value) throw forbidden(`${field} must be the default (${value}) for non-admin keys`);
    }
  }
  const override = req.collection_override ?? req.rag_index_override;
  if (override !== undefined && !COLLECTION_PATTERN.test(override)) throw badRequest('collection_override / rag_index_override must name a chunk class (Chunk_... or KnowledgeChunk)');
  if (override !== undefined && !(await deps.index.chunkClasses()).includes(override)) throw badRequest(`no chunk class ${override} exists`);

  const reranker = deps.config?.retrieval.reranker ?? null;
  if (req.rerank === true && !reranker) throw badRequest('rerank: no re-ranker is configured (RERANK_BASE_URL)');

  const query = [req.user_message, req.robot_message].filter(Boolean).join('\n');
  // A blank query would still be embedded (and charged) and answer with arbitrary chunks.
  if (isBlank(query)) throw badRequest('user_message must contain text, not only whitespace', { fieldErrors: { user_message: ['must contain text, not only whitespace'] } });
  const kbId = resolvedKbId ?? (await findKnowledgeBase(deps.db, req.partner, req.kb)).kb.id;
  const { settings, languages, outcome, denseSkipped } = await runSearch(deps, kbId, query, {
    topK: req.top_k,
    searchMultiplier: req.search_multiplier,
    rrfK: req.rrf_k,
    fusion: req.fusion,
    weights: { dense: req.rrf_weight_dense, sparse: req.rrf_weight_sparse, bm25: req.rrf_weight_bm25 },
    queryWeights: { original: req.query_weight_original, replaced: req.query_weight_replaced },
    characterReplacementName: req.character_replacement_name ?? null,
    className: override,
  });
  const reranked: RerankOutcome | null = reranker && req.rerank !== false ? await rerankStage(deps, reranker, kbId, query, outcome.ranked, settings.topK) : null;
  const final = reranked ? reranked.ranked : outcome.combined.map((h, i) => ({ ...h, fusedRank: i + 1 }));

  const streamItem = (h: SearchHit, i: number) => ({
    rank: i + 1,
    document_id: h.documentId,
    document_name: h.documentName,
    chunk_index: h.chunkIndex,
    score: h.score,
    text: h.text,
    ...(isAdmin ? { chunk_id: h.id } : {}),
  });
  const combinedItem = (h: (typeof final)[number], i: number) => ({
    ...streamItem(h, i),
    retrievers: h.ranks.original ?? {},
    stream_scores: h.streamScores.original ?? {},
    contributions: h.contributions.original ?? {},
    ...(h.features.original ? { features: h.features.original, feature_contributions: h.featureContributions.original } : {}),
    ...(h.ranks.replaced ? { replaced_retrievers: h.ranks.replaced, replaced_stream_scores: h.streamScores.replaced ?? {}, replaced_contributions: h.contributions.replaced ?? {} } : {}),
    ...(h.features.replaced ? { replaced_features: h.features.replaced, replaced_feature_contributions: h.featureContributions.replaced } : {}),
    fused_rank: h.fusedRank,
    rank_without_rescoring: h.rankWithoutRescoring,
    ...('rerankScore' in h && h.rerankScore !== undefined ? { rerank_score: h.rerankScore } : {}),
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
      fusion: settings.fusion,
      fusion_formula: fusionFormulas[settings.fusion] + (settings.rescoring ? rescoringFormula : ''),
      rrf_k: settings.rrfK,
      rrf_weight_dense: settings.weights.dense,
      rrf_weight_sparse: settings.weights.sparse,
      rrf_weight_bm25: settings.weights.bm25,
      query_weight_original: settings.queryWeights.original,
      query_weight_replaced: settings.queryWeights.replaced,
      character_replacement_name: settings.characterReplacementName,
      rescoring: settings.rescoring ? { features: [...rescoringFeatures], weights: settings.rescoring, unit: fusionUnit(settings.fusion, settings.rrfK) } : null,
      retrievers: [...streamNames],
      sparse_representation: 'hashed character 3-5-grams of content words and identifier parts, sublinear tf, cosine',
      bm25_query_languages: languages,
      rerank: reranker && req.rerank !== false ? { model: reranker.model, candidates: reranker.candidates, priced: reranker.priceUsdPerMillionTokens !== null } : null,
      ...(isAdmin
        ? {
            collection: outcome.className,
            collection_overridden: override !== undefined,
            knowledge_base_id: kbId,
            embedding_profile: deps.embedder.profile.name,
            default_collection: chunkClassFor(deps.embedder.profile.name),
          }
        : {}),
    },
    query,
    query_variants: outcome.variants.map((v) => ({ name: v.name, text: v.query, weight: v.weight })),
    streams: streamsOf(original),
    ...(replaced ? { replaced_streams: streamsOf(replaced) } : {}),
    combined_results: final.map(combinedItem),
    ...(reranked?.applied ? { rerank: reranked.applied } : {}),
    ...(reranked?.skipped ? { rerank_skipped: reranked.skipped } : {}),
    supported_bm25_languages: supportedBm25Languages,
    timings_ms: { ...outcome.timings_ms, ...(reranked ? { rerank: reranked.ms, total: round(outcome.timings_ms.total! + reranked.ms) } : {}) },
    total_results: final.length,
    ...(denseSkipped ? { dense_skipped: denseSkipped } : {}),
  };
}

const round = (ms: number) => Math.round(ms * 100) / 100;

/** What the learned re-scoring adds (rescoring.ts), when it is on. */
const rescoringFormula = ' + unit · Σ_variant w_variant · Σ_feature w_feature · feature (name_match, lead_match)';

/** How `score` of combined_results is computed, per fusion (the response's config says which). */
const fusionFormulas: Record<FusionMethod, string> = {
  score: 'score = Σ_variant w_variant · Σ_stream w_stream · (stream score − weakest candidate score) / (best − weakest candidate score)',
  rrf: 'score = Σ_variant w_variant · Σ_stream w_stream / (rrf_k + rank in stream)',
};
