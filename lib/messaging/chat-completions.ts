import { ProviderAnswerError } from '../providers/openai-http.js';
import { callAdmitted, chatOutputLimit, otherModelInput, planAdmission, settle } from './admission.js';
import { lastUserText, logFallback, splitRequest, type GenerationContext, type GenerationOutcome } from './generation.js';
import { composeInstructions, retrieveKnowledge } from './knowledge.js';
import { inputJson, tokensUsed } from './quota.js';
import { chatPiecePasses, relayBatches, renderChatChunks, type ChatRelayState } from './relay.js';
import { resolveCharacter } from './service-metadata.js';
import { isClientAbort, providerCalls, toUpstreamError, upstreamClient, withFallback, type ChatCompletionBody } from './upstream.js';

/**
 * POST /v3/chat/completions: quota admission, the character (metadata.service) and its knowledge
 * context as a system message (chat completions keep their normal shape: no visibility items),
 * then the provider call with fallback, as one JSON answer or as a stream.
 */
export async function chatCompletions(ctx: GenerationContext, body: ChatCompletionBody): Promise<GenerationOutcome> {
  ctx.answer.mark('handler');
  const { forwarded, models, service } = splitRequest(body);
  const character = await resolveCharacter(ctx.deps.db, ctx.key, service);
  const client = upstreamClient(ctx.deps.config);
  const { signal } = ctx.answer.abort;
  // Room is held for the knowledge to come: a refused request costs no search.
  const messages = inputJson(forwarded.messages);
  const inputText = messages.json + (character?.prompt ?? '') + otherModelInput(forwarded, ['messages']);
  const plan = planAdmission(ctx, 'chat', { text: inputText, imageTokens: messages.imageTokens }, { limit: chatOutputLimit(forwarded), choices: forwarded.n ?? 1 }, character);

  const withInstructions = async () => {
    const knowledge = character?.knowledge ? await retrieveKnowledge(ctx.deps, character, lastUserText(forwarded.messages)) : null;
    const system = composeInstructions([character?.prompt, knowledge?.context]);
    if (system) forwarded.messages = [{ role: 'system', content: system }, ...forwarded.messages];
  };

  if (!forwarded.stream) {
    const { hold, result } = await callAdmitted(ctx, plan, async () => {
      await withInstructions();
      return (await withFallback(models, (model) => providerCalls.chat(client, { ...forwarded, model, stream: false }, signal), logFallback(ctx))).result;
    });
    ctx.answer.mark('provider');
    settle(ctx, hold, { usedTokens: tokensUsed(result.usage) });
    return { json: result };
  }

  // Usage arrives in a last chunk when asked for; the client sees that chunk only if it asked too.
  const clientWantsUsage = forwarded.stream_options?.include_usage === true;
  const { hold, refine, result: stream } = await callAdmitted(ctx, plan, async () => {
    await withInstructions();
    const upstreamBody = { ...forwarded, stream: true as const, stream_options: { ...(forwarded.stream_options ?? {}), include_usage: true } };
    return (await withFallback(models, (model) => providerCalls.chatStream(client, { ...upstreamBody, model }, signal), logFallback(ctx))).result;
  });
  ctx.answer.mark('provider');
  refine?.();
  const out = ctx.answer.stream();
  out.start();
  const relay: ChatRelayState = { usage: null, finished: false };
  let last: string | undefined;
  try {
    await relayBatches(out, stream, (batch) => renderChatChunks(batch, clientWantsUsage, relay), (piece) => chatPiecePasses(piece, relay));
    // A stream that stops before its answer did (the connection closed cleanly mid-answer) must
    // not end in [DONE], which tells the client the answer is whole.
    if (!out.closed && !relay.finished && !stream.sawDone) throw new ProviderAnswerError('its stream ended before the answer did (no finish_reason, no [DONE])');
    last = 'data: [DONE]\n\n';
  } catch (err) {
    if (!isClientAbort(err)) last = `data: ${JSON.stringify({ error: toUpstreamError(err, models.model).openaiError })}\n\n`;
  } finally {
    out.end(last);
    // An abandoned stream may have been generated up to its limit: without usage, the hold is charged.
    settle(ctx, hold, { usedTokens: tokensUsed(relay.usage) });
  }
  return { streamed: true };
}
