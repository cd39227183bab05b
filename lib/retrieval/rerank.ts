import crypto from 'node:crypto';
import { budgetBlockedMessage, type Bound } from '../contracts/budget-admission.js';
import { markUncertain, release, reserve, settle } from '../budget/ledger.js';
import type { RerankerSettings } from '../platform/config.js';
import type { Db } from '../platform/db.js';
import { Reranker, RerankError } from '../providers/reranker.js';
import type { FusedHit } from './hybrid-search.js';

/**
 * The optional re-ranking stage after fusion: the first RERANK_CANDIDATES fused results go to a
 * cross-encoder (lib/providers/reranker.ts, the Cohere-style /rerank protocol), which orders them
 * by its relevance score; the fused results after them keep their fused order. With a price
 * (RERANK_PRICE_USD_PER_MILLION_TOKENS) each call is usage of the KB and is admitted through its
 * budget first, exactly like a paid query embedding: a KB that cannot hold it is answered without
 * re-ranking, and the diagnostics say why. A re-ranker that fails never fails the search: its
 * hold is released when the server refused the work, or left uncertain (as every ambiguous
 * provider outcome) when it did not answer.
 */
export interface RerankedHit extends FusedHit {
  /** Rank (from 1) in the fused ranking, before re-ranking. */
  fusedRank: number;
  /** The cross-encoder's relevance score; absent for results that were not sent to it. */
  rerankScore?: number;
}

export interface RerankOutcome {
  /** The final ranking (re-ranked candidates first), cut to top_k. */
  ranked: RerankedHit[];
  /** Set when re-ranking ran. */
  applied: { model: string; candidates: number; tokens: number | null } | null;
  /** Set when a configured re-ranker was not used: `BUDGET_BLOCKED:<reason>: <detail>` or `RERANK_FAILED: <message>`. */
  skipped: string | null;
  ms: number;
}

const rerankers = new WeakMap<RerankerSettings, Reranker>();
function rerankerFor(settings: RerankerSettings): Reranker {
  let r = rerankers.get(settings);
  if (!r) rerankers.set(settings, (r = new Reranker(settings)));
  return r;
}

/**
 * Verified token bound of one call: a cross-encoder reads the query with each document; every
 * token covers at least one UTF-8 byte, and a pair carries at most four special tokens.
 */
export function rerankBound(query: string, documents: string[], pricePerMillion: number | null): Bound {
  const q = Buffer.byteLength(query, 'utf8');
  const tokens = documents.reduce((sum, d) => sum + q + Buffer.byteLength(d, 'utf8') + 4, 0);
  return { tokens, ...(pricePerMillion !== null ? { dollars: dollars(tokens, pricePerMillion) } : {}) };
}

/** Rounded up to the ledger's 8 decimal places. */
const dollars = (tokens: number, pricePerMillion: number) => (Math.ceil((tokens * pricePerMillion * 1e8) / 1e6) / 1e8).toFixed(8);

const unranked = (fused: FusedHit[], topK: number): RerankedHit[] => fused.slice(0, topK).map((h, i) => ({ ...h, fusedRank: i + 1 }));

export async function rerankStage(
  deps: { db: Db },
  settings: RerankerSettings,
  knowledgeBaseId: string,
  query: string,
  fused: FusedHit[],
  topK: number,
): Promise<RerankOutcome> {
  const started = performance.now();
  const done = (o: Omit<RerankOutcome, 'ms'>): RerankOutcome => ({ ...o, ms: Math.round((performance.now() - started) * 100) / 100 });
  const candidates = fused.slice(0, settings.candidates);
  if (candidates.length === 0) return done({ ranked: [], applied: null, skipped: null });
  const documents = candidates.map((h) => h.text);

  let operationKey: string | null = null;
  if (settings.priceUsdPerMillionTokens !== null) {
    operationKey = `search-rerank-${crypto.randomUUID()}`;
    const admission = await reserve(deps.db, { knowledgeBaseId, operationKey, workflowId: 'api-search', category: 'other', bound: rerankBound(query, documents, settings.priceUsdPerMillionTokens) });
    if (!admission.admitted) return done({ ranked: unranked(fused, topK), applied: null, skipped: budgetBlockedMessage(admission.reason, admission.detail) });
  }

  const reranker = rerankerFor(settings);
  let response;
  try {
    response = await reranker.rerank(query, documents);
  } catch (err) {
    const message = (err as Error).message.slice(0, 500);
    if (operationKey) {
      if (err instanceof RerankError && err.kind === 'rejected') await release(deps.db, operationKey, `re-ranking refused: ${message}`);
      else await markUncertain(deps.db, operationKey, `re-ranking outcome unknown: ${message}`);
    }
    return done({ ranked: unranked(fused, topK), applied: null, skipped: `RERANK_FAILED: ${message}` });
  }
  if (operationKey) {
    const tokens = response.tokens;
    await settle(deps.db, operationKey, {
      inputTokens: tokens,
      outputTokens: tokens === null ? null : 0,
      costUsd: tokens !== null ? dollars(tokens, settings.priceUsdPerMillionTokens!) : null,
      model: settings.model,
    });
  }

  // Results the server left out (a top_n it capped) follow the scored ones, in fused order.
  const scored = new Map(response.results.map((r) => [r.index, r.relevanceScore]));
  const order = candidates
    .map((h, i) => ({ h, i, score: scored.get(i) }))
    .sort((a, b) => (b.score ?? -Infinity) - (a.score ?? -Infinity) || a.i - b.i);
  const ranked: RerankedHit[] = [
    ...order.map(({ h, i, score }) => ({ ...h, fusedRank: i + 1, ...(score !== undefined ? { rerankScore: score } : {}) })),
    ...fused.slice(candidates.length).map((h, j) => ({ ...h, fusedRank: candidates.length + j + 1 })),
  ].slice(0, topK);
  return done({ ranked, applied: { model: settings.model, candidates: candidates.length, tokens: response.tokens }, skipped: null });
}

