import crypto from 'node:crypto';
import { AppError } from '../platform/errors.js';
import { ProviderAnswerError } from '../providers/openai-http.js';
import { callAdmitted, otherModelInput, planAdmission, settle, type Admission, type PlannedAdmission } from './admission.js';
import { lastUserText, logFallback, splitRequest, type GenerationContext, type GenerationOutcome, type ModelChoice } from './generation.js';
import { composeInstructions, isServiceItem, retrieveKnowledge, visibilityItems, type KnowledgeContext } from './knowledge.js';
import { inputJson, tokensUsed, type QuotaHold } from './quota.js';
import { FINAL_RESPONSE_EVENTS, KnowledgeSearchFailed, relayBatches, renderResponseEvents, responsePiecePasses, responseStreamError, STREAM_CUT_SHORT, type ResponseRelayState } from './relay.js';
import { providerResponseId, recordResponseAlias, SERVICE_RESPONSE_PREFIX } from './response-aliases.js';
import { resolveCharacter, type Character } from './service-metadata.js';
import { isClientAbort, providerCalls, upstreamClient, withFallback, type ProviderUsage, type ResponsesBody } from './upstream.js';

/**
 * POST /v3/responses: quota admission, the character (metadata.service) and its knowledge context
 * in `instructions`, then the provider call with fallback, as one JSON answer or as a stream. A
 * knowledge answer starts with the visibility items of spec 2.4 (streamed: spec section 4).
 */
export async function responses(ctx: GenerationContext, body: ResponsesBody): Promise<GenerationOutcome> {
  ctx.answer.mark('handler');
  // A background response is answered "queued" and read later with GET /responses/{id}, which
  // this service does not relay: the client would pay for an answer it can never read.
  if (body.background === true) throw new AppError('bad_request', 'background mode is not offered: send the request without background (stream it for long answers)');
  const { forwarded, models, service } = splitRequest(body);
  // A client that sends a knowledge answer's output back as the next turn's input (OpenAI's
  // stateless conversations) sends our visibility items too: the provider never issued their ids.
  if (Array.isArray(forwarded.input)) forwarded.input = forwarded.input.filter((item) => !isServiceItem(item));
  if (forwarded.previous_response_id !== undefined) forwarded.previous_response_id = await providerResponseId(ctx.deps.db, ctx.key.id, forwarded.previous_response_id);
  const character = await resolveCharacter(ctx.deps.db, ctx.key, service);
  const { signal } = ctx.answer.abort;
  const client = upstreamClient(ctx.deps.config);
  const query = lastUserText(forwarded.input);
  const input = inputJson(forwarded.input ?? '');
  const inputText = input.json + (forwarded.instructions ?? '') + (character?.prompt ?? '') + otherModelInput(forwarded, ['input', 'instructions']);
  const plan = planAdmission(ctx, 'responses', { text: inputText, imageTokens: input.imageTokens }, { limit: forwarded.max_output_tokens }, character);

  if (!forwarded.stream) {
    const { hold, result: answered } = await callAdmitted(ctx, plan, async () => {
      const knowledge = character?.knowledge ? await retrieveKnowledge(ctx.deps, character, query) : null;
      const request = knowledgeRequest(forwarded, character, knowledge);
      const { result } = await withFallback(models, (model) => providerCalls.response(client, { ...request, model, stream: false }, signal), logFallback(ctx));
      return { knowledge, result };
    });
    const { knowledge, result } = answered;
    ctx.answer.mark('provider');
    settle(ctx, hold, { usedTokens: tokensUsed(result.usage) });
    if (!knowledge) return { json: result };
    const items = visibilityItems();
    const output = [items.searching, items.fileSearch(query, 'completed', knowledge.sources), items.found(knowledge.sources.length), ...(result.output ?? [])];
    return { json: { ...result, instructions: echoedInstructions(forwarded, character), output } };
  }

  if (!character?.knowledge) return passThroughStream(ctx, client, knowledgeRequest(forwarded, character, null), models, plan);
  const admission = await plan.run();
  ctx.answer.mark('admitted');
  return knowledgeStream(ctx, { client, forwarded, character, query, models, admission });
}

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

type Client = ReturnType<typeof upstreamClient>;

/** Without knowledge context the provider's events go out as they came. */
async function passThroughStream(ctx: GenerationContext, client: Client, forwarded: ResponsesBody, models: ModelChoice, plan: PlannedAdmission): Promise<GenerationOutcome> {
  const { signal } = ctx.answer.abort;
  const { hold, refine, result: stream } = await callAdmitted(ctx, plan, async () =>
    (await withFallback(models, (model) => providerCalls.responseStream(client, { ...forwarded, model, stream: true }, signal), logFallback(ctx))).result,
  );
  ctx.answer.mark('provider');
  refine?.();
  const out = ctx.answer.stream();
  out.start();
  const relay: ResponseRelayState = { usage: null, last: 0, ended: false };
  try {
    await relayBatches(out, stream, (batch) => renderResponseEvents(batch, relay), (piece) => responsePiecePasses(piece, relay));
    if (!out.closed && !relay.ended) throw new ProviderAnswerError(STREAM_CUT_SHORT);
  } catch (err) {
    if (!isClientAbort(err)) await out.event('error', responseStreamError(err, models.model, relay.last + 1, ctx.log));
  } finally {
    out.end();
    settle(ctx, hold, { usedTokens: tokensUsed(relay.usage) });
  }
  return { streamed: true };
}

interface KnowledgeStreamRequest {
  client: Client;
  forwarded: ResponsesBody;
  character: Character;
  query: string;
  models: ModelChoice;
  admission: Admission;
}

/**
 * Spec section 4: created, in_progress, the searching item, the file search's in_progress /
 * searching / completed, the "found N" item, then the model's events (their output indexes moved
 * past the three service items), then response.completed with every item in order.
 */
async function knowledgeStream(ctx: GenerationContext, req: KnowledgeStreamRequest): Promise<GenerationOutcome> {
  const { forwarded, character, query, models } = req;
  const hold: QuotaHold = req.admission.hold;
  const out = ctx.answer.stream();
  const items = visibilityItems();
  const SERVICE_ITEMS = 3;
  let seq = 0;
  const emit = (type: string, fields: Record<string, unknown>) => out.event(type, { type, ...fields, sequence_number: seq++ });
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
    if (out.closed) return { streamed: true };

    const request = knowledgeRequest(forwarded, character, knowledge);
    const { result: stream } = await withFallback(models, (model) => providerCalls.responseEvents(req.client, { ...request, model, stream: true }, ctx.answer.abort.signal), logFallback(ctx));
    reachedModel = true;
    req.admission.refine?.();
    for await (const event of stream) {
      if (out.closed) break;
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
    if (!out.closed && !ended) throw new ProviderAnswerError(STREAM_CUT_SHORT);
  } catch (err) {
    if (!isClientAbort(err)) {
      out.start();
      await out.event('error', responseStreamError(err, models.model, seq++, ctx.log));
    }
  } finally {
    out.end();
    settle(ctx, hold, reachedModel ? { usedTokens: tokensUsed(usage) } : { released: true });
  }
  return { streamed: true };
}
