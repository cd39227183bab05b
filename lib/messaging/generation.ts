import crypto from 'node:crypto';
import type { Response } from 'express';
import type { Services } from '../runtime.js';
import type { Logger } from '../logger.js';
import { defaultChunking } from '../kb/chunking.js';
import type { QuotaKeyPrincipal } from './quota-keys.js';
import { estimateTokens, holdLifetimeMs, releaseQuota, reserveQuota, settleQuota } from './quota.js';
import { resolveCharacter, takeServiceMetadata, type Character } from './service-metadata.js';
import { composeInstructions, retrieveKnowledge, visibilityItems, type KnowledgeResult } from './knowledge.js';
import { isClientAbort, toUpstreamError, upstreamClient, withFallback, type UpstreamError } from './upstream.js';
import { clientGone, SseWriter } from './sse.js';

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

type Body = Record<string, any>;

export type GenerationOutcome = { json: unknown } | { streamed: true };

/** What the service takes out of a request before the provider sees it. */
function splitRequest(body: Body) {
  const { fallback_model: fallback, metadata, ...forwarded } = body;
  const { service, rest } = takeServiceMetadata(metadata);
  if (rest) forwarded.metadata = rest;
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

/** Room held for injected knowledge before it is known (full chunks plus their headings). */
const knowledgeAllowance = (c: Character | null) => (c?.knowledge ? estimateTokens('x'.repeat((defaultChunking.maxChars + 200) * c.knowledge.maxResults + 300)) : 0);

async function admit(ctx: GenerationContext, endpoint: 'chat' | 'responses', inputText: string, outputLimit: number | undefined, character: Character | null) {
  const operationKey = `${endpoint}-${ctx.requestId}-${crypto.randomUUID()}`;
  const tokens = estimateTokens(inputText) + knowledgeAllowance(character) + (outputLimit ?? ctx.deps.config.messaging.defaultOutputTokenBound);
  return reserveQuota(ctx.deps.db, {
    quotaKeyId: ctx.key.id,
    operationKey,
    endpoint,
    tokens,
    holdMs: holdLifetimeMs(ctx.deps.config.messaging.upstreamTimeoutSeconds),
  });
}

/** Settles with the provider's usage; a failure before the model answered releases the hold. */
async function finish(ctx: GenerationContext, operationKey: string, outcome: { usedTokens: number | null } | { released: true }) {
  try {
    if ('released' in outcome) await releaseQuota(ctx.deps.db, operationKey);
    else await settleQuota(ctx.deps.db, operationKey, outcome.usedTokens);
  } catch (err) {
    // The hold expires on its own; the answer the client got stays right.
    ctx.log.error('quota settlement failed', { err, operation_key: operationKey });
  }
}

const usedTokensOf = (usage: any): number | null => {
  if (!usage || typeof usage !== 'object') return null;
  if (typeof usage.total_tokens === 'number') return usage.total_tokens;
  const a = usage.prompt_tokens ?? usage.input_tokens;
  const b = usage.completion_tokens ?? usage.output_tokens;
  return typeof a === 'number' && typeof b === 'number' ? a + b : null;
};

const logFallback = (ctx: GenerationContext) => (err: UpstreamError) => ctx.log.warn('model failed, trying fallback_model', { status: err.status, detail: err.message });

// ---------------------------------------------------------------------------------------------
// Chat completions

export async function chatCompletions(ctx: GenerationContext, body: Body): Promise<GenerationOutcome> {
  const { forwarded, fallback, service } = splitRequest(body);
  const character = await resolveCharacter(ctx.deps.db, ctx.key, service);
  const client = upstreamClient(ctx.deps.config);
  const abort = clientGone(ctx.res);

  // Chat completions keep their normal shape: the character and its knowledge become a system
  // message, with no visibility items.
  const knowledge = character?.knowledge ? await retrieveKnowledge(ctx.deps, character, lastUserText(forwarded.messages)) : null;
  const system = composeInstructions([character?.prompt, knowledge?.context]);
  if (system) forwarded.messages = [{ role: 'system', content: system }, ...forwarded.messages];

  const hold = await admit(ctx, 'chat', JSON.stringify(forwarded.messages), forwarded.max_completion_tokens ?? forwarded.max_tokens, null);
  const models = { model: forwarded.model as string, fallback };

  if (!forwarded.stream) {
    try {
      const { result } = await withFallback(models, (model) => client.chat.completions.create({ ...forwarded, model, stream: false } as any, { signal: abort.signal }), logFallback(ctx));
      await finish(ctx, hold.operationKey, { usedTokens: usedTokensOf((result as any).usage) });
      return { json: result };
    } catch (err) {
      await finish(ctx, hold.operationKey, { released: true });
      throw err;
    }
  }

  // Usage arrives in a last chunk when asked for; the client sees that chunk only if it asked too.
  const clientWantsUsage = forwarded.stream_options?.include_usage === true;
  const upstreamBody = { ...forwarded, stream: true, stream_options: { ...(forwarded.stream_options ?? {}), include_usage: true } };
  let stream: AsyncIterable<any>;
  try {
    stream = (await withFallback(models, (model) => client.chat.completions.create({ ...upstreamBody, model } as any, { signal: abort.signal }) as any, logFallback(ctx))).result as AsyncIterable<any>;
  } catch (err) {
    await finish(ctx, hold.operationKey, { released: true });
    throw err;
  }
  const sse = new SseWriter(ctx.res, ctx.deps.config.messaging.sseKeepAliveMs);
  sse.start();
  let usage: unknown = null;
  try {
    for await (const chunk of stream) {
      if (chunk?.usage) usage = chunk.usage;
      if (!clientWantsUsage && chunk?.usage && Array.isArray(chunk.choices) && chunk.choices.length === 0) continue;
      if (!clientWantsUsage && chunk?.usage) delete chunk.usage;
      await sse.data(chunk);
      if (sse.closed) break;
    }
    if (!sse.closed) await sse.data('[DONE]');
  } catch (err) {
    if (!isClientAbort(err)) await sse.data({ error: toUpstreamError(err, models.model).openaiError });
  } finally {
    sse.end();
    // An abandoned stream may have been generated up to its limit: without usage, the hold is charged.
    await finish(ctx, hold.operationKey, { usedTokens: usedTokensOf(usage) });
  }
  return { streamed: true };
}

// ---------------------------------------------------------------------------------------------
// Responses

function knowledgeRequest(forwarded: Body, character: Character | null, knowledge: KnowledgeResult | null) {
  const instructions = composeInstructions([character?.prompt, forwarded.instructions, knowledge?.context]);
  const out = { ...forwarded };
  if (instructions) out.instructions = instructions;
  else delete out.instructions;
  return out;
}

export async function responses(ctx: GenerationContext, body: Body): Promise<GenerationOutcome> {
  const { forwarded, fallback, service } = splitRequest(body);
  const character = await resolveCharacter(ctx.deps.db, ctx.key, service);
  const client = upstreamClient(ctx.deps.config);
  const abort = clientGone(ctx.res);
  const query = lastUserText(forwarded.input);
  const inputText = JSON.stringify(forwarded.input ?? '') + (forwarded.instructions ?? '') + (character?.prompt ?? '');
  const hold = await admit(ctx, 'responses', inputText, forwarded.max_output_tokens, character);
  const models = { model: forwarded.model as string, fallback };

  if (!forwarded.stream) {
    try {
      const knowledge = character?.knowledge ? await retrieveKnowledge(ctx.deps, character, query) : null;
      const request = knowledgeRequest(forwarded, character, knowledge);
      const { result } = await withFallback(models, (model) => client.responses.create({ ...request, model, stream: false } as any, { signal: abort.signal }), logFallback(ctx));
      await finish(ctx, hold.operationKey, { usedTokens: usedTokensOf((result as any).usage) });
      if (!knowledge) return { json: result };
      const items = visibilityItems();
      const r = result as any;
      return { json: { ...r, output: [items.searching, items.fileSearch(query, 'completed', knowledge.sources), items.found(knowledge.sources.length), ...(r.output ?? [])] } };
    } catch (err) {
      await finish(ctx, hold.operationKey, { released: true });
      throw err;
    }
  }

  if (!character?.knowledge) return passThroughResponses(ctx, client, forwarded, models, hold.operationKey, abort);
  return knowledgeResponsesStream(ctx, client, forwarded, character, query, models, hold.operationKey, abort);
}

async function openResponsesStream(ctx: GenerationContext, client: ReturnType<typeof upstreamClient>, request: Body, models: { model: string; fallback: string | null }, abort: AbortController) {
  const { result } = await withFallback(models, (model) => client.responses.create({ ...request, model, stream: true } as any, { signal: abort.signal }) as any, logFallback(ctx));
  return result as AsyncIterable<any>;
}

/** Without knowledge context the provider's events go out as they came. */
async function passThroughResponses(ctx: GenerationContext, client: ReturnType<typeof upstreamClient>, forwarded: Body, models: { model: string; fallback: string | null }, operationKey: string, abort: AbortController): Promise<GenerationOutcome> {
  let stream: AsyncIterable<any>;
  try {
    stream = await openResponsesStream(ctx, client, forwarded, models, abort);
  } catch (err) {
    await finish(ctx, operationKey, { released: true });
    throw err;
  }
  const sse = new SseWriter(ctx.res, ctx.deps.config.messaging.sseKeepAliveMs);
  sse.start();
  let usage: unknown = null;
  let last = 0;
  try {
    for await (const event of stream) {
      if (event?.type === 'response.completed') usage = event.response?.usage;
      if (typeof event?.sequence_number === 'number') last = event.sequence_number;
      await sse.event(event.type, event);
      if (sse.closed) break;
    }
  } catch (err) {
    if (!isClientAbort(err)) await sse.event('error', streamError(err, models.model, last + 1));
  } finally {
    sse.end();
    await finish(ctx, operationKey, { usedTokens: usedTokensOf(usage) });
  }
  return { streamed: true };
}

function streamError(err: unknown, model: string, sequence: number) {
  const e = toUpstreamError(err, model);
  return { type: 'error', code: e.openaiError.code, message: e.openaiError.message, param: e.openaiError.param ?? null, sequence_number: sequence, error: e.openaiError };
}

/**
 * Spec section 4: created, in_progress, the searching item, the file search's in_progress /
 * searching / completed, the "found N" item, then the model's events (their output indexes moved
 * past the three service items), then response.completed with every item in order.
 */
async function knowledgeResponsesStream(
  ctx: GenerationContext,
  client: ReturnType<typeof upstreamClient>,
  forwarded: Body,
  character: Character,
  query: string,
  models: { model: string; fallback: string | null },
  operationKey: string,
  abort: AbortController,
): Promise<GenerationOutcome> {
  const sse = new SseWriter(ctx.res, ctx.deps.config.messaging.sseKeepAliveMs);
  const items = visibilityItems();
  const SERVICE_ITEMS = 3;
  let seq = 0;
  const emit = (type: string, fields: Record<string, unknown>) => sse.event(type, { type, ...fields, sequence_number: seq++ });
  const base = {
    id: `resp_service_${crypto.randomBytes(16).toString('hex')}`,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status: 'in_progress',
    model: forwarded.model,
    output: [] as unknown[],
    instructions: null,
    metadata: forwarded.metadata ?? {},
    usage: null,
  };
  let usage: unknown = null;
  let reachedModel = false;
  try {
    await emit('response.created', { response: base });
    await emit('response.in_progress', { response: base });
    await emit('response.output_item.added', { output_index: 0, item: items.searching });
    await emit('response.output_item.done', { output_index: 0, item: items.searching });
    await emit('response.file_search_call.in_progress', { output_index: 1, item_id: items.fileSearch(query, 'in_progress', null).id });
    await emit('response.file_search_call.searching', { output_index: 1, item_id: items.fileSearch(query, 'searching', null).id });
    const knowledge = await retrieveKnowledge(ctx.deps, character, query);
    const fileSearch = items.fileSearch(query, 'completed', knowledge.sources);
    await emit('response.file_search_call.completed', { output_index: 1, item_id: fileSearch.id, item: fileSearch });
    const found = items.found(knowledge.sources.length);
    await emit('response.output_item.added', { output_index: 2, item: found });
    await emit('response.output_item.done', { output_index: 2, item: found });
    if (sse.closed) return { streamed: true };

    const stream = await openResponsesStream(ctx, client, knowledgeRequest(forwarded, character, knowledge), models, abort);
    reachedModel = true;
    for await (const event of stream) {
      if (sse.closed) break;
      const type = event?.type as string;
      if (type === 'response.created' || type === 'response.in_progress' || type === 'response.queued') continue;
      if (type === 'response.completed' || type === 'response.incomplete' || type === 'response.failed') {
        usage = event.response?.usage ?? null;
        const response = { ...event.response, id: base.id, output: [items.searching, fileSearch, found, ...(event.response?.output ?? [])] };
        await emit(type, { response });
        continue;
      }
      const { sequence_number: _ignored, ...fields } = event;
      if (typeof fields.output_index === 'number') fields.output_index += SERVICE_ITEMS;
      await emit(type, fields);
    }
  } catch (err) {
    if (!isClientAbort(err)) {
      sse.start();
      await sse.event('error', streamError(err, models.model, seq++));
    }
  } finally {
    sse.end();
    await finish(ctx, operationKey, reachedModel ? { usedTokens: usedTokensOf(usage) } : { released: true });
  }
  return { streamed: true };
}
