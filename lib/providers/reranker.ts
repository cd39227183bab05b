/**
 * A cross-encoder re-ranker behind the widely served Cohere-style `/rerank` protocol (Infinity,
 * Jina, Cohere, and servers compatible with them such as Text Embeddings Inference's):
 *
 *   POST {baseUrl}/rerank  {"model", "query", "documents": [string], "top_n", "return_documents": false}
 *   -> {"results": [{"index", "relevance_score"}], "usage": {"total_tokens" | "prompt_tokens"}}
 *
 * A bare array `[{"index", "score"}]` (the native TEI answer) is read as well. This module speaks
 * the protocol and nothing else: which results to send, budget admission and what the scores mean
 * for the ranking belong to lib/retrieval.
 */
export interface RerankerOptions {
  baseUrl: string;
  apiKey: string | null;
  model: string;
  timeoutMs: number;
}

export interface RerankResult {
  /** Position of the document in the request. */
  index: number;
  relevanceScore: number;
}

export interface RerankResponse {
  /** Best first, as the server ordered them (every document when top_n covers them all). */
  results: RerankResult[];
  /** Tokens the server reported (usage.total_tokens, else usage.prompt_tokens); null: none reported. */
  tokens: number | null;
}

/** Why a re-ranking failed: `rejected` (the server answered an error: it did no billable work) or `ambiguous` (no answer). */
export class RerankError extends Error {
  override name = 'RerankError';
  constructor(
    message: string,
    readonly kind: 'rejected' | 'ambiguous',
  ) {
    super(message);
  }
}

export class Reranker {
  constructor(readonly options: RerankerOptions) {}

  get model(): string {
    return this.options.model;
  }

  async rerank(query: string, documents: string[], topN = documents.length): Promise<RerankResponse> {
    if (documents.length === 0) return { results: [], tokens: 0 };
    let res: Response;
    try {
      res = await fetch(`${this.options.baseUrl}/rerank`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          ...(this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {}),
        },
        body: JSON.stringify({ model: this.options.model, query, documents, top_n: topN, return_documents: false }),
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
    } catch (err) {
      throw new RerankError(`the re-ranker did not answer: ${(err as Error).message}`, 'ambiguous');
    }
    const text = await res.text().catch(() => '');
    if (!res.ok) throw new RerankError(`the re-ranker answered ${res.status}: ${text.slice(0, 300)}`, 'rejected');
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new RerankError('the re-ranker answered something that is not JSON', 'ambiguous');
    }
    return parseRerankBody(body, documents.length);
  }
}

function parseRerankBody(body: unknown, count: number): RerankResponse {
  const b = body as { results?: unknown; usage?: { total_tokens?: unknown; prompt_tokens?: unknown } } | unknown[];
  const raw = Array.isArray(b) ? b : Array.isArray(b?.results) ? (b.results as unknown[]) : null;
  if (!raw) throw new RerankError('the re-ranker answer has no results', 'ambiguous');
  const results: RerankResult[] = [];
  for (const r of raw as Array<{ index?: unknown; relevance_score?: unknown; score?: unknown }>) {
    const score = typeof r?.relevance_score === 'number' ? r.relevance_score : r?.score;
    if (!Number.isInteger(r?.index) || (r.index as number) < 0 || (r.index as number) >= count || typeof score !== 'number' || !Number.isFinite(score)) {
      throw new RerankError(`the re-ranker answered an invalid result: ${JSON.stringify(r).slice(0, 200)}`, 'ambiguous');
    }
    results.push({ index: r.index as number, relevanceScore: score });
  }
  const usage = Array.isArray(b) ? undefined : b?.usage;
  const tokens = typeof usage?.total_tokens === 'number' ? usage.total_tokens : typeof usage?.prompt_tokens === 'number' ? usage.prompt_tokens : null;
  return { results: results.sort((x, y) => y.relevanceScore - x.relevanceScore || x.index - y.index), tokens };
}
