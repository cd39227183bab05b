import crypto from 'node:crypto';
import type { Response } from 'express';
import type { Services } from '../services.js';
import type { Logger } from '../platform/logger.js';
import { defaultChunking } from '../retrieval/chunking.js';
import type { QuotaKeyPrincipal } from './quota-keys.js';
import { estimateTokens, holdLifetimeMs, holdsBeingMade, inputJson, quickTokenBound, refineHold, releaseQuota, reserveQuota, roomForeseen, settleQuota, tokensUsed, type QuotaHold } from './quota.js';
import { AppError } from '../platform/errors.js';
import { providerResponseId, recordResponseAlias, SERVICE_RESPONSE_PREFIX } from './response-aliases.js';
import { resolveCharacter, takeServiceMetadata, type Character } from './service-metadata.js';
import { composeInstructions, isServiceItem, retrieveKnowledge, visibilityItems, type KnowledgeContext } from './knowledge.js';
import {
  isClientAbort,
  mayBeFailure,
  providerCalls,
  streamFailure,
  toUpstreamError,
  upstreamClient,
  withFallback,
  type ChatCompletionBody,
  type ChatCompletionResult,
  type ProviderUsage,
  type ResponseEvent,
  type ResponsesBody,
  type UpstreamError,
} from './upstream.js';
import { ProviderAnswerError, type RawStreamEvent } from '../providers/openai-http.js';
import { ServiceUnavailable } from '../providers/service-unavailable.js';
import { clientGone, SseWriter } from './sse.js';
import { mark, sendTiming } from './timing.js';

/**
 * POST /v3/chat/completions and POST /v3/responses: quota admission, the character
 * (metadata.service) and its knowledge context, then the provider call with fallback, as one JSON
 * answer or as a stream. Fields the service owns (fallback_model, metadata.service) never reach the
 * provider; everything else in the request is forwarded as sent (reasoning included, untouched).
 */
export interface GenerationContext {
  deps: Services;
  key: QuotaKeyPrincipal;
  requestId: string;
  log: Logger;
  res: Response;
}

export type GenerationOutcome = { json: unknown } | { streamed: true };

/** What the service takes out of a request before the provider sees it. */
function splitRequest<B extends ChatCompletionBody | ResponsesBody>(body: B) {
  const { fallback_model: fallback, metadata, ...rest } = body;
  const forwarded = rest as unknown as B;
  const { service, rest: otherMetadata } = takeServiceMetadata(metadata);
  if (otherMetadata) forwarded.metadata = otherMetadata;
  return { forwarded, fallback: (fallback as string | undefined) ?? null, service };
}

function lastUserText(items: unknown): string {
  if (typeof items === 'string') return items;
  if (!Array.isArray(items)) return '';
  for (let i = items.length - 1; i >= 0; i--) {
    const m = items[i] as { role?: string; content?: unknown };
    if (m?.role !== 'user') continue;
    if (typeof m.content === 'string') return m.content;
    if (Array.isArray(m.content)) {
      return m.content.map((p: { text?: unknown }) => (typeof p?.text === 'string' ? p.text : '')).filter(Boolean).join('\n');
    }
  }
  return '';
}

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
function otherModelInput(forwarded: Record<string, unknown>, counted: readonly string[]): string {
  let other: Record<string, unknown> | null = null;
  for (const [member, value] of Object.entries(forwarded)) {
    if (value === null || value === undefined || counted.includes(member) || NOT_MODEL_INPUT.has(member)) continue;
    (other ??= {})[member] = value;
  }
  return other ? JSON.stringify(other) : '';
}

/** A chat request's output limit; with both fields the larger, as a provider may honour either. */
function chatOutputLimit(body: ChatCompletionBody): number | undefined {
  const limits = [body.max_completion_tokens, body.max_tokens].filter((n): n is number => typeof n === 'number');
  return limits.length ? Math.max(...limits) : undefined;
}

/** Room held for injected knowledge before it is known (full chunks plus their headings), by max_results. */
const allowances = new Map<number, number>();
function knowledgeAllowance(c: Character | null): number {
  if (!c?.knowledge) return 0;
  const n = c.knowledge.maxResults;
  let tokens = allowances.get(n);
  if (tokens === undefined) allowances.set(n, (tokens = estimateTokens('x'.repeat((defaultChunking.maxChars + 200) * n + 300))));
  return tokens;
}

interface Admission {
  hold: QuotaHold;
  /** For a hold admitted on the quick bound: brings it down to the counted estimate (after the first byte). */
  refine: (() => void) | null;
}

/** A request's admission, not made yet, and whether the provider may be called while it is made. */
interface PlannedAdmission {
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
 * The provider may be called during the hold when the request needs no knowledge search (which
 * must wait for the admission), comes while few other holds are being made, and this process heard
 * lately that the key has room for the bound (roomForeseen, MESSAGING_CALL_DURING_ADMISSION_SECONDS).
 */
function planAdmission(ctx: GenerationContext, endpoint: 'chat' | 'responses', input: { text: string; imageTokens: number }, output: { limit: number | undefined; choices?: number }, character: Character | null): PlannedAdmission {
  const operationKey = `${endpoint}-${ctx.requestId}-${crypto.randomUUID()}`;
  const { text: inputText } = input;
  // Each of n choices may use the whole output limit, and the provider charges them all.
  const rest = input.imageTokens + knowledgeAllowance(character) + (output.limit ?? ctx.deps.config.messaging.defaultOutputTokenBound) * (output.choices ?? 1);
  const ask = (tokens: number) => reserveQuota(ctx.deps.db, { quotaKeyId: ctx.key.id, operationKey, endpoint, tokens, holdMs: holdLifetimeMs(ctx.deps.config.messaging.upstreamTimeoutSeconds) });
  const quick = quickTokenBound(inputText);
  const forecastMs = ctx.deps.config.messaging.callDuringAdmissionSeconds * 1000;
  const early =
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
async function callAdmitted<T>(ctx: GenerationContext, plan: PlannedAdmission, abort: AbortController, call: () => Promise<T>): Promise<{ hold: QuotaHold; refine: Admission['refine']; result: T }> {
  let calling: Promise<T> | null = null;
  let admission: Admission;
  if (plan.early) {
    calling = call();
    // Observed now, so that a call failing before the hold is made is not an unhandled rejection.
    calling.catch(() => undefined);
    try {
      admission = await plan.run();
    } catch (err) {
      abort.abort();
      // The call's outcome no longer matters; what it opened closes with the abort.
      await calling.catch(() => undefined);
      throw err;
    }
  } else admission = await plan.run();
  mark(ctx.res, 'admitted');
  try {
    return { ...admission, result: await (calling ?? call()) };
  } catch (err) {
    finish(ctx, admission.hold, { released: true });
    throw err;
  }
}

/**
 * Settles with the provider's usage; a failure before the model answered releases the hold. The
 * caller does not wait: the answer (or the end of the stream) goes out first, and the settlement,
 * one round trip, follows. Until it lands the key's capacity stays held, so a settlement late by a
 * moment can only make a following request wait for room, never admit too much.
 */
const inFlight = new Set<Promise<void>>();
function finish(ctx: GenerationContext, hold: QuotaHold, outcome: { usedTokens: number | null } | { released: true }): void {
  const settlement = (async () => {
    try {
      if ('released' in outcome) await releaseQuota(ctx.deps.db, hold.operationKey);
      else await settleQuota(ctx.deps.db, hold, outcome.usedTokens);
    } catch (err) {
      // The hold expires on its own; the answer the client got stays right.
      ctx.log.error('quota settlement failed', { err, operation_key: hold.operationKey });
    }
  })();
  inFlight.add(settlement);
  void settlement.finally(() => inFlight.delete(settlement));
}

/** Resolves once every settlement started so far has landed (graceful shutdown, tests). */
export async function settlementsLanded(): Promise<void> {
  while (inFlight.size) await Promise.all([...inFlight]);
}

const logFallback = (ctx: GenerationContext) => (err: UpstreamError) => ctx.log.warn('model failed, trying fallback_model', { status: err.status, detail: err.message });

// ---------------------------------------------------------------------------------------------
// Chat completions

export async function chatCompletions(ctx: GenerationContext, body: ChatCompletionBody): Promise<GenerationOutcome> {
  mark(ctx.res, 'handler');
  const { forwarded, fallback, service } = splitRequest(body);
  const character = await resolveCharacter(ctx.deps.db, ctx.key, service);
  const client = upstreamClient(ctx.deps.config);
  const abort = clientGone(ctx.res);
  // Room is held for the knowledge to come: a refused request costs no search.
  const messages = inputJson(forwarded.messages);
  const inputText = messages.json + (character?.prompt ?? '') + otherModelInput(forwarded, ['messages']);
  const plan = planAdmission(ctx, 'chat', { text: inputText, imageTokens: messages.imageTokens }, { limit: chatOutputLimit(forwarded), choices: forwarded.n ?? 1 }, character);
  const models = { model: forwarded.model as string, fallback };

  // Chat completions keep their normal shape: the character and its knowledge become a system
  // message, with no visibility items.
  const withInstructions = async () => {
    const knowledge = character?.knowledge ? await retrieveKnowledge(ctx.deps, character, lastUserText(forwarded.messages)) : null;
    const system = composeInstructions([character?.prompt, knowledge?.context]);
    if (system) forwarded.messages = [{ role: 'system', content: system }, ...forwarded.messages];
  };

  if (!forwarded.stream) {
    const { hold, result } = await callAdmitted(ctx, plan, abort, async () => {
      await withInstructions();
      return (await withFallback(models, (model) => providerCalls.chat(client, { ...forwarded, model, stream: false }, abort.signal), logFallback(ctx))).result;
    });
    mark(ctx.res, 'provider');
    sendTiming(ctx.res);
    finish(ctx, hold, { usedTokens: tokensUsed(result.usage) });
    return { json: result };
  }

  // Usage arrives in a last chunk when asked for; the client sees that chunk only if it asked too.
  const clientWantsUsage = forwarded.stream_options?.include_usage === true;
  const { hold, refine, result: stream } = await callAdmitted(ctx, plan, abort, async () => {
    await withInstructions();
    const upstreamBody = { ...forwarded, stream: true as const, stream_options: { ...(forwarded.stream_options ?? {}), include_usage: true } };
    return (await withFallback(models, (model) => providerCalls.chatStream(client, { ...upstreamBody, model }, abort.signal), logFallback(ctx))).result;
  });
  mark(ctx.res, 'provider');
  refine?.();
  sendTiming(ctx.res);
  const sse = new SseWriter(ctx.res, ctx.deps.config.messaging.sseKeepAliveMs);
  sse.start();
  const relay = { usage: null as ProviderUsage | null, finished: false };
  try {
    for await (const batch of stream) {
      await sse.write(relayChatChunks(batch, clientWantsUsage, relay));
      if (sse.closed) break;
    }
    if (!sse.closed) {
      // A stream that stops before its answer did (the connection closed cleanly mid-answer) must
      // not end in [DONE], which tells the client the answer is whole.
      if (!relay.finished && !stream.sawDone) throw new ProviderAnswerError('its stream ended before the answer did (no finish_reason, no [DONE])');
      await sse.data('[DONE]');
    }
  } catch (caught) {
    const err = caught instanceof RelayFailure ? caught.cause : caught;
    if (caught instanceof RelayFailure && caught.relayed) await sse.write(caught.relayed);
    if (!isClientAbort(err)) await sse.data({ error: toUpstreamError(err, models.model).openaiError });
  } finally {
    sse.end();
    // An abandoned stream may have been generated up to its limit: without usage, the hold is charged.
    finish(ctx, hold, { usedTokens: tokensUsed(relay.usage) });
  }
  return { streamed: true };
}

/** A provider failure inside a batch, with the text of the events before it (already relayable). */
class RelayFailure extends Error {
  constructor(
    override readonly cause: unknown,
    readonly relayed: string,
  ) {
    super('relay failed');
  }
}

const carriesUsage = /"usage"\s*:\s*\{/;
const namesFinishReason = /"finish_reason"\s*:\s*"/;

/**
 * The SSE text of a batch of chat-completion chunks, as the provider sent them: a chunk is parsed
 * only when it may be an error event or carries usage (recorded; taken out again when the client
 * did not ask for it, the usage-only chunk dropped altogether). Everything else passes unparsed.
 */
function relayChatChunks(batch: RawStreamEvent[], clientWantsUsage: boolean, relay: { usage: ProviderUsage | null; finished: boolean }): string {
  let out = '';
  for (const e of batch) {
    if (!relay.finished && namesFinishReason.test(e.data)) relay.finished = true;
    if (mayBeFailure(e)) {
      const failure = streamFailure(e.event, JSON.parse(e.data) as Record<string, unknown>);
      if (failure) throw new RelayFailure(failure, out);
    }
    if (carriesUsage.test(e.data)) {
      const chunk = JSON.parse(e.data) as ChatCompletionResult;
      if (chunk.usage) relay.usage = chunk.usage;
      if (!clientWantsUsage && chunk.usage) {
        if (Array.isArray(chunk.choices) && chunk.choices.length === 0) continue;
        delete chunk.usage;
        out += `data: ${JSON.stringify(chunk)}\n\n`;
        continue;
      }
    }
    out += `data: ${e.data}\n\n`;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Responses

function knowledgeRequest(forwarded: ResponsesBody, character: Character | null, knowledge: KnowledgeContext | null) {
  const instructions = composeInstructions([character?.prompt, forwarded.instructions, knowledge?.context]);
  const out = { ...forwarded };
  if (instructions) out.instructions = instructions;
  else delete out.instructions;
  return out;
}

/**
 * The `instructions` an answer echoes (OpenAI's answer repeats what the model was instructed):
 * the character's prompt and the client's instructions, both the client's own, without the
 * knowledge excerpts, which are whole chunks (spec: full chunks are never returned).
 */
const echoedInstructions = (forwarded: ResponsesBody, character: Character | null) => composeInstructions([character?.prompt, forwarded.instructions]) ?? null;

export async function responses(ctx: GenerationContext, body: ResponsesBody): Promise<GenerationOutcome> {
  mark(ctx.res, 'handler');
  // A background response is answered "queued" and read later with GET /responses/{id}, which
  // this service does not relay: the client would pay for an answer it can never read.
  if (body.background === true) throw new AppError('bad_request', 'background mode is not offered: send the request without background (stream it for long answers)');
  const { forwarded, fallback, service } = splitRequest(body);
  // A client that sends a knowledge answer's output back as the next turn's input (OpenAI's
  // stateless conversations) sends our visibility items too: the provider never issued their ids.
  if (Array.isArray(forwarded.input)) forwarded.input = forwarded.input.filter((item) => !isServiceItem(item));
  if (forwarded.previous_response_id !== undefined) forwarded.previous_response_id = await providerResponseId(ctx.deps.db, ctx.key.id, forwarded.previous_response_id);
  const character = await resolveCharacter(ctx.deps.db, ctx.key, service);
  const client = upstreamClient(ctx.deps.config);
  const abort = clientGone(ctx.res);
  const query = lastUserText(forwarded.input);
  const input = inputJson(forwarded.input ?? '');
  const inputText = input.json + (forwarded.instructions ?? '') + (character?.prompt ?? '') + otherModelInput(forwarded, ['input', 'instructions']);
  const plan = planAdmission(ctx, 'responses', { text: inputText, imageTokens: input.imageTokens }, { limit: forwarded.max_output_tokens }, character);
  const models = { model: forwarded.model as string, fallback };

  if (!forwarded.stream) {
    const { hold, result: answered } = await callAdmitted(ctx, plan, abort, async () => {
      const knowledge = character?.knowledge ? await retrieveKnowledge(ctx.deps, character, query) : null;
      const request = knowledgeRequest(forwarded, character, knowledge);
      const { result } = await withFallback(models, (model) => providerCalls.response(client, { ...request, model, stream: false }, abort.signal), logFallback(ctx));
      return { knowledge, result };
    });
    const { knowledge, result } = answered;
    mark(ctx.res, 'provider');
    sendTiming(ctx.res);
    finish(ctx, hold, { usedTokens: tokensUsed(result.usage) });
    if (!knowledge) return { json: result };
    const items = visibilityItems();
    const output = [items.searching, items.fileSearch(query, 'completed', knowledge.sources), items.found(knowledge.sources.length), ...(result.output ?? [])];
    return { json: { ...result, instructions: echoedInstructions(forwarded, character), output } };
  }

  if (!character?.knowledge) return passThroughResponses(ctx, client, knowledgeRequest(forwarded, character, null), models, plan, abort);
  const { hold, refine } = await plan.run();
  mark(ctx.res, 'admitted');
  return knowledgeResponsesStream(ctx, client, forwarded, character, query, models, hold, refine, abort);
}

async function openResponsesStream(ctx: GenerationContext, client: ReturnType<typeof upstreamClient>, request: ResponsesBody, models: { model: string; fallback: string | null }, abort: AbortController) {
  const { result } = await withFallback(models, (model) => providerCalls.responseEvents(client, { ...request, model, stream: true }, abort.signal), logFallback(ctx));
  return result;
}

/** Without knowledge context the provider's events go out as they came. */
async function passThroughResponses(ctx: GenerationContext, client: ReturnType<typeof upstreamClient>, forwarded: ResponsesBody, models: { model: string; fallback: string | null }, plan: PlannedAdmission, abort: AbortController): Promise<GenerationOutcome> {
  const { hold, refine, result: stream } = await callAdmitted(ctx, plan, abort, async () =>
    (await withFallback(models, (model) => providerCalls.responseStream(client, { ...forwarded, model, stream: true }, abort.signal), logFallback(ctx))).result,
  );
  mark(ctx.res, 'provider');
  refine?.();
  sendTiming(ctx.res);
  const sse = new SseWriter(ctx.res, ctx.deps.config.messaging.sseKeepAliveMs);
  sse.start();
  const relay = { usage: null as ProviderUsage | null, last: 0, ended: false };
  try {
    for await (const batch of stream) {
      await sse.write(relayResponseEvents(batch, relay));
      if (sse.closed) break;
    }
    if (!sse.closed && !relay.ended) throw new ProviderAnswerError(STREAM_CUT_SHORT);
  } catch (caught) {
    const err = caught instanceof RelayFailure ? caught.cause : caught;
    if (caught instanceof RelayFailure && caught.relayed) await sse.write(caught.relayed);
    if (!isClientAbort(err)) await sse.event('error', streamError(err, models.model, relay.last + 1, ctx.log));
  } finally {
    sse.end();
    finish(ctx, hold, { usedTokens: tokensUsed(relay.usage) });
  }
  return { streamed: true };
}

const sequenceNumber = /"sequence_number"\s*:\s*(\d+)/;

/** The events that end a response stream; one that stops before any of them was cut short. */
const FINAL_RESPONSE_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed']);
const STREAM_CUT_SHORT = 'its stream ended before the response did (no response.completed, .incomplete or .failed)';

/**
 * The SSE text of a batch of response events, as the provider sent them. An event is parsed only
 * when it may be an error event, names no type in its `event:` line, or ends the response (its
 * usage is recorded); its sequence number is read from the text.
 */
function relayResponseEvents(batch: RawStreamEvent[], relay: { usage: ProviderUsage | null; last: number; ended: boolean }): string {
  let out = '';
  for (const e of batch) {
    let parsed: ResponseEvent | null = null;
    if (mayBeFailure(e)) {
      parsed = JSON.parse(e.data) as ResponseEvent;
      const failure = streamFailure(e.event, parsed);
      if (failure) throw new RelayFailure(failure, out);
    }
    let type = e.event;
    if (!type) type = (parsed ??= JSON.parse(e.data) as ResponseEvent).type;
    // An answer cut off by max_output_tokens (.incomplete) or failed by the model carries its usage
    // too: it is charged what it used, as a completed one is, not its whole hold.
    if (FINAL_RESPONSE_EVENTS.has(type)) {
      relay.usage = (parsed ?? (JSON.parse(e.data) as ResponseEvent)).response?.usage ?? null;
      relay.ended = true;
    }
    const seq = sequenceNumber.exec(e.data);
    if (seq) relay.last = Number(seq[1]);
    out += `event: ${type}\ndata: ${e.data}\n\n`;
  }
  return out;
}

/** The knowledge search of a streamed answer failed: no model was asked. */
class KnowledgeSearchFailed extends Error {
  constructor(override readonly cause: unknown) {
    super('the knowledge search failed');
  }
}

function streamError(err: unknown, model: string, sequence: number, log: Logger) {
  const e = err instanceof KnowledgeSearchFailed ? knowledgeSearchError(err.cause, log) : toUpstreamError(err, model).openaiError;
  return { type: 'error', code: e.code, message: e.message, param: e.param, sequence_number: sequence, error: e };
}

/** What a JSON answer would have said (503 for an unavailable index or encoder, else 500), in the stream's error event. */
function knowledgeSearchError(err: unknown, log: Logger): UpstreamError['openaiError'] {
  if (err instanceof ServiceUnavailable) return { message: `the knowledge search failed: ${err.message}; try again shortly`, type: 'server_error', code: 'unavailable', param: null };
  if (err instanceof AppError && err.status < 500) return { message: `the knowledge search failed: ${err.message}`, type: 'invalid_request_error', code: err.code, param: null };
  log.error('knowledge search failed in a stream', { err });
  return { message: 'the knowledge search failed: internal error', type: 'server_error', code: 'internal_error', param: null };
}

/**
 * Spec section 4: created, in_progress, the searching item, the file search's in_progress /
 * searching / completed, the "found N" item, then the model's events (their output indexes moved
 * past the three service items), then response.completed with every item in order.
 */
async function knowledgeResponsesStream(
  ctx: GenerationContext,
  client: ReturnType<typeof upstreamClient>,
  forwarded: ResponsesBody,
  character: Character,
  query: string,
  models: { model: string; fallback: string | null },
  hold: QuotaHold,
  refine: Admission['refine'],
  abort: AbortController,
): Promise<GenerationOutcome> {
  const sse = new SseWriter(ctx.res, ctx.deps.config.messaging.sseKeepAliveMs);
  const items = visibilityItems();
  const SERVICE_ITEMS = 3;
  let seq = 0;
  const emit = (type: string, fields: Record<string, unknown>) => sse.event(type, { type, ...fields, sequence_number: seq++ });
  const base = {
    id: `${SERVICE_RESPONSE_PREFIX}${crypto.randomBytes(16).toString('hex')}`,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status: 'in_progress',
    model: forwarded.model,
    output: [] as unknown[],
    instructions: echoedInstructions(forwarded, character),
    metadata: forwarded.metadata ?? {},
    usage: null,
    // Members every OpenAI Response carries (clients validate them): what the request set, else OpenAI's defaults.
    error: null,
    incomplete_details: null,
    parallel_tool_calls: forwarded.parallel_tool_calls ?? true,
    temperature: forwarded.temperature ?? null,
    tool_choice: forwarded.tool_choice ?? 'auto',
    tools: forwarded.tools ?? [],
    top_p: forwarded.top_p ?? null,
  };
  let usage: ProviderUsage | null = null;
  let reachedModel = false;
  let ended = false;
  let aliasRecorded: Promise<void> | null = null;
  try {
    await emit('response.created', { response: base });
    await emit('response.in_progress', { response: base });
    await emit('response.output_item.added', { output_index: 0, item: items.searching });
    await emit('response.output_item.done', { output_index: 0, item: items.searching });
    await emit('response.file_search_call.in_progress', { output_index: 1, item_id: items.fileSearch(query, 'in_progress', null).id });
    await emit('response.file_search_call.searching', { output_index: 1, item_id: items.fileSearch(query, 'searching', null).id });
    const knowledge = await retrieveKnowledge(ctx.deps, character, query).catch((err: unknown) => {
      throw new KnowledgeSearchFailed(err);
    });
    const fileSearch = items.fileSearch(query, 'completed', knowledge.sources);
    await emit('response.file_search_call.completed', { output_index: 1, item_id: fileSearch.id, item: fileSearch });
    const found = items.found(knowledge.sources.length);
    await emit('response.output_item.added', { output_index: 2, item: found });
    await emit('response.output_item.done', { output_index: 2, item: found });
    if (sse.closed) return { streamed: true };

    const stream = await openResponsesStream(ctx, client, knowledgeRequest(forwarded, character, knowledge), models, abort);
    reachedModel = true;
    refine?.();
    for await (const event of stream) {
      if (sse.closed) break;
      const type = event.type;
      const providerId = event.response?.id;
      if (!aliasRecorded && typeof providerId === 'string') {
        aliasRecorded = recordResponseAlias(ctx.deps.db, { serviceResponseId: base.id, providerResponseId: providerId, quotaKeyId: ctx.key.id }).catch((err: unknown) =>
          ctx.log.error('the id of a streamed answer was not recorded: it cannot be named as previous_response_id', { err, response_id: base.id }),
        );
      }
      if (type === 'response.created' || type === 'response.in_progress' || type === 'response.queued') continue;
      if (FINAL_RESPONSE_EVENTS.has(type)) {
        ended = true;
        // A client that chains from the finished answer finds its id recorded.
        await aliasRecorded;
        usage = event.response?.usage ?? null;
        const response = { ...event.response, id: base.id, instructions: base.instructions, output: [items.searching, fileSearch, found, ...(event.response?.output ?? [])] };
        await emit(type, { response });
        continue;
      }
      const { sequence_number: _ignored, ...fields } = event;
      if (typeof fields.output_index === 'number') fields.output_index += SERVICE_ITEMS;
      await emit(type, fields);
    }
    if (!sse.closed && !ended) throw new ProviderAnswerError(STREAM_CUT_SHORT);
  } catch (err) {
    if (!isClientAbort(err)) {
      sse.start();
      await sse.event('error', streamError(err, models.model, seq++, ctx.log));
    }
  } finally {
    sse.end();
    finish(ctx, hold, reachedModel ? { usedTokens: tokensUsed(usage) } : { released: true });
  }
  return { streamed: true };
}
