import type { ActualUsage, Bound } from '../contracts/budget-admission.js';
import type { EmbeddingProvider } from '../providers/embeddings.js';

/**
 * Budget bounds of paid embedding calls. The verified token bound of a batch is its UTF-8 byte
 * count plus two per input: a tokenizer token covers at least one byte, and begin/end markers are
 * the only tokens that cover none. Embedding APIs have no output tokens. Dollars follow the
 * configured list price (none: unpriced, tokens only).
 */
export function embeddingBatchBound(texts: string[], embedder: Pick<EmbeddingProvider, 'priceUsdPerMillionTokens'>): Bound {
  const tokens = texts.reduce((sum, t) => sum + Buffer.byteLength(t, 'utf8') + 2, 0);
  return { tokens, ...(embedder.priceUsdPerMillionTokens != null ? { dollars: dollarsFor(tokens, embedder.priceUsdPerMillionTokens) } : {}) };
}

/** Rounded up to the ledger's 8 decimal places, so a bound is never below the settled cost. */
function dollarsFor(tokens: number, pricePerMillion: number): string {
  const micro = Math.ceil((tokens * pricePerMillion * 1e8) / 1e6);
  return (micro / 1e8).toFixed(8);
}

/** What a call used, as the ledger records it; unknown token counts make the operation uncertain. */
export function embeddingUsage(inputTokens: number | null, embedder: Pick<EmbeddingProvider, 'priceUsdPerMillionTokens' | 'profile'>): ActualUsage {
  return {
    inputTokens,
    outputTokens: inputTokens === null ? null : 0,
    costUsd: inputTokens !== null && embedder.priceUsdPerMillionTokens != null ? dollarsFor(inputTokens, embedder.priceUsdPerMillionTokens) : null,
    model: embedder.profile.model,
  };
}
