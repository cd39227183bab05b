import crypto from 'node:crypto';
import { defaultChunking } from '../retrieval/chunking.js';
import { AppError } from '../platform/errors.js';
import type { GenerationContext } from './generation.js';
import type { Character } from './service-metadata.js';
import type { ChatCompletionBody } from './upstream.js';
import { estimateTokens, holdLifetimeMs, holdsBeingMade, quickTokenBound, refineHold, releaseHold, roomForeseen, settleQuota, type QuotaHold } from './quota.js';
import { holdOnKey } from './quota-escrow.js';
import { keyAdmitted } from './quota-keys.js';

/**
 * A /v3 request's quota admission: what it holds (lib/messaging/quota.ts makes the hold), when the
 * provider may be called, and the settlement once the answer is out.
 */

/**
 * Request members that the model does not read as input: routing, limits and sampling controls
 * (a few bytes each). Every other member (tools, function definitions, a response format's JSON
 * schema, a prediction...) is input the provider charges like the messages, so it counts in the
 * hold: otherwise a request of a short message and a large tool list would hold a fraction of what
 * it costs. A member unknown here counts, which can only make a hold larger.
 */
const NOT_MODEL_INPUT = new Set([
  'model', 'stream', 'stream_options', 'max_tokens', 'max_completion_tokens', 'max_output_tokens', 'n', 'metadata', 'reasoning',
  'previous_response_id', 'store', 'user', 'temperature', 'top_p', 'seed', 'service_tier', 'parallel_tool_calls', 'logprobs',
  'top_logprobs', 'presence_penalty', 'frequency_penalty', 'logit_bias', 'truncation', 'background', 'include', 'modalities',
  'safety_identifier', 'prompt_cache_key',
]);

/** The members of a request that are model input beyond its `counted` ones, as JSON ('' when none). */
export function otherModelInput(forwarded: Record<string, unknown>, counted: readonly string[]): string {
  let other: Record<string, unknown> | null = null;
  for (const [member, value] of Object.entries(forwarded)) {
    if (value === null || value === undefined || counted.includes(member) || NOT_MODEL_INPUT.has(member)) continue;
    (other ??= {})[member] = value;
  }
  return other ? JSON.stringify(other) : '';
}

/** A chat request's output limit; with both fields the larger, as a provider may honour either. */
export function chatOutputLimit(body: ChatCompletionBody): number | undefined {
  const limits = [body.max_completion_tokens, body.max_tokens].filter((n): n is number => typeof n === 'number');
  return limits.length ? Math.max(...limits) : undefined;
}

/** Room held for injected knowledge before it is known (full chunks plus their headings), by max_results; a memo of a pure function. */
const allowances = new Map<number, number>();
function knowledgeAllowance(c: Character | null): number {
  if (!c?.knowledge) return 0;
  const n = c.knowledge.maxResults;
  let tokens = allowances.get(n);
  if (tokens === undefined) allowances.set(n, (tokens = estimateTokens('x'.repeat((defaultChunking.maxChars + 200) * n + 300))));
  return tokens;
}

export interface Admission {
  hold: QuotaHold;
  /** For a hold admitted on the quick bound: brings it down to the counted estimate (after the first byte). */
  refine: (() => void) | null;
}

/** A request's admission, not made yet, and whether the provider may be called while it is made. */
export interface PlannedAdmission {
  early: boolean;
  run: () => Promise<Admission>;
}

/**
 * The overlap pays where the admission's round trip is pure waiting: a request that comes alone.
 * In a burst the requests share their round trip (group commit) and the processors are what they
 * wait for; calling the provider meanwhile then only adds work beside the admission (measured in
 * bench:messaging: at 50 concurrent streams the overlap made the first token later).
 */
const EARLY_CALL_MAX_HOLDS_IN_FLIGHT = 4;

/**
 * Holds the request's bound on its key. A long input is admitted on its byte bound, without
 * counting its tokens first (quickTokenBound); when that bound does not fit, the tokens are counted
 * and the request asks again with the estimate, so nothing the estimate would admit is refused.
 * The provider may be called during the hold when the key was verified lately (quota-keys.ts), the
 * request needs no knowledge search (which must wait for the admission), comes while few other
 * holds are being made, and this process heard lately that the key has room for the bound
 * (roomForeseen, MESSAGING_CALL_DURING_ADMISSION_SECONDS). A hold made in the database confirms an
 * unverified key; one refused as revoked has it forgotten.
 */
export function planAdmission(ctx: GenerationContext, endpoint: 'chat' | 'responses', input: { text: string; imageTokens: number }, output: { limit: number | undefined; choices?: number }, character: Character | null): PlannedAdmission {
  const operationKey = `${endpoint}-${ctx.requestId}-${crypto.randomUUID()}`;
  const { text: inputText } = input;
  // Each of n choices may use the whole output limit, and the provider charges them all.
  const rest = input.imageTokens + knowledgeAllowance(character) + (output.limit ?? ctx.deps.config.messaging.defaultOutputTokenBound) * (output.choices ?? 1);
  const settings = { drawMs: ctx.deps.config.messaging.quotaEscrowSeconds * 1000, holdMs: holdLifetimeMs(ctx.deps.config.messaging.upstreamTimeoutSeconds) };
  const { key } = ctx;
  const cacheSeconds = ctx.deps.config.messaging.keyCacheSeconds;
  const ask = async (tokens: number) => {
    try {
      const hold = await holdOnKey(ctx.deps.db, ctx.log, settings, { quotaKeyId: key.id, operationKey, endpoint, tokens, keyVerified: key.verified });
      keyAdmitted(ctx.deps.db, key, hold.escrow ? 'lent' : 'held', cacheSeconds);
      return hold;
    } catch (err) {
      if (err instanceof AppError && err.code === 'invalid_api_key') keyAdmitted(ctx.deps.db, key, 'revoked', cacheSeconds);
      throw err;
    }
  };
  const quick = quickTokenBound(inputText);
  const forecastMs = ctx.deps.config.messaging.callDuringAdmissionSeconds * 1000;
  const early =
    key.verified &&
    !character?.knowledge &&
    forecastMs > 0 &&
    holdsBeingMade(ctx.deps.db) < EARLY_CALL_MAX_HOLDS_IN_FLIGHT &&
    roomForeseen(ctx.deps.db, ctx.key.id, quick.tokens + rest, forecastMs);
  const run = async (): Promise<Admission> => {
    if (quick.exact) return { hold: await ask(quick.tokens + rest), refine: null };
    try {
      const hold = await ask(quick.tokens + rest);
      const refine = () =>
        setImmediate(() => {
          refineHold(ctx.deps.db, hold, estimateTokens(inputText) + rest).catch((err) => ctx.log.warn('quota hold not refined', { err, operation_key: hold.operationKey }));
        });
      return { hold, refine };
    } catch (err) {
      if (!(err instanceof AppError && err.code === 'quota_exceeded')) throw err;
      return { hold: await ask(estimateTokens(inputText) + rest), refine: null };
    }
  };
  return { early, run };
}

/**
 * The provider call of an admitted request. Normally the hold comes first (a refused request costs
 * no search and no call). When the plan allows it, the call starts at once and the hold is made
 * meanwhile, so the provider's time to answer hides the admission's round trip; nothing of the
 * answer reaches the client before the hold is made, and a refused hold aborts the call (the
 * provider may have begun reading the prompt: the price of a forecast gone wrong, which takes the
 * key's room going within moments). A failed call releases the hold.
 */
export async function callAdmitted<T>(ctx: GenerationContext, plan: PlannedAdmission, call: () => Promise<T>): Promise<Admission & { result: T }> {
  let calling: Promise<T> | null = null;
  let admission: Admission;
  if (plan.early) {
    calling = call();
    // Observed now, so that a call failing before the hold is made is not an unhandled rejection.
    calling.catch(() => undefined);
    try {
      admission = await plan.run();
    } catch (err) {
      ctx.answer.abort.abort();
      // The call's outcome no longer matters; what it opened closes with the abort.
      await calling.catch(() => undefined);
      throw err;
    }
  } else admission = await plan.run();
  ctx.answer.mark('admitted');
  try {
    return { ...admission, result: await (calling ?? call()) };
  } catch (err) {
    settle(ctx, admission.hold, { released: true });
    throw err;
  }
}

/**
 * Settles with the provider's usage; a failure before the model answered releases the hold. The
 * caller does not wait: the answer (or the end of the stream) goes out first, and the settlement,
 * one round trip, follows. Until it lands the key's capacity stays held, so a settlement late by a
 * moment can only make a following request wait for room, never admit too much.
 */
export function settle(ctx: GenerationContext, hold: QuotaHold, outcome: { usedTokens: number | null } | { released: true }): void {
  const settlement = 'released' in outcome ? releaseHold(ctx.deps.db, hold) : settleQuota(ctx.deps.db, hold, outcome.usedTokens);
  // The hold expires on its own; the answer the client got stays right.
  settlement.catch((err: unknown) => ctx.log.error('quota settlement failed', { err, operation_key: hold.operationKey }));
}
