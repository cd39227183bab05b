/**
 * Contract of budget admission (lib/budget/ledger.ts), shared by the workflows that reserve before
 * a paid operation and the activities that settle it: what an operation may consume, and why it
 * was not admitted.
 */
export type Category = 'digitization' | 'rewrite' | 'embedding' | 'discovery' | 'other';

export interface Bound {
  characters?: number;
  tokens?: number;
  /** Decimal string, exact. */
  dollars?: string;
}

export interface ReserveRequest {
  knowledgeBaseId: string;
  operationKey: string;
  workflowId: string;
  documentId?: string | null;
  category: Category;
  bound: Bound;
  /** Request-level character cap: the smaller of it and the KB limit applies. */
  requestCharacterLimit?: number | null;
  /**
   * Admit only while the KB has capacity left in every limit that is set (and no unresolved or
   * unknown usage blocks capped work), whatever the bound: for work that exists only to feed
   * later paid work, such as channel discovery feeding video imports.
   */
  requireHeadroom?: boolean;
}

export type BlockReason =
  | 'character_limit_exhausted'
  | 'token_limit_exhausted'
  | 'dollar_limit_exhausted'
  | 'request_character_limit'
  | 'unknown_historical_usage'
  | 'unresolved_provider_outcome';

/**
 * How a budget block reads for users and operators (a document's processing_error, a channel
 * source's last_error, a search's skipped step): `BUDGET_BLOCKED:<reason>: <detail>`.
 */
export const budgetBlockedMessage = (reason: string, detail: string): string => `BUDGET_BLOCKED:${reason}: ${detail}`;

export type ReserveResult =
  | { admitted: true; reservationId: string }
  | { admitted: false; reason: BlockReason; detail: string };

export interface ActualUsage {
  characters?: number;
  inputTokens?: number | null;
  outputTokens?: number | null;
  /** Null or omitted: unpriced. */
  costUsd?: string | null;
  model?: string | null;
  fallback?: boolean;
  rejected?: boolean;
}
