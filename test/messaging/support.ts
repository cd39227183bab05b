import OpenAI from 'openai';
import { testStack } from '../support/stack.js';
import type { client } from '../support/system.js';
import { unique } from '../support/fixtures.js';
import { fakeTokenCount, type UpstreamCall } from '../support/openai-upstream.js';

type Http = ReturnType<typeof client>;

/** Creates a quota key through the admin API; returns the key and its id. */
export async function newQuotaKey(http: Http, opts: { quota_type?: string; token_amount?: number; partner?: string } = {}) {
  const res = await http('POST', '/api/quota-keys', {
    key: testStack().adminApiKey,
    json: { name: unique('qk'), quota_type: opts.quota_type ?? 'any', token_amount: opts.token_amount ?? 1_000_000, ...(opts.partner ? { partner: opts.partner } : {}) },
  });
  if (res.status !== 201) throw new Error(`creating quota key failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { key: res.body.api_key as string, id: res.body.id as string };
}

/** The official client, pointed at our /v3. */
export const v3Client = (apiUrl: string, key: string) => new OpenAI({ baseURL: `${apiUrl}/v3`, apiKey: key, maxRetries: 0 });

/** Chat-completion chunks of a streamed answer, split into words, with a usage chunk when asked for. */
export function chatChunks(call: UpstreamCall, text: string) {
  const id = `chatcmpl-${Math.random().toString(36).slice(2)}`;
  const base = { id, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: call.body?.model ?? 'unknown' };
  const words = text.split(/(?<= )/);
  const chunks: unknown[] = [{ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }];
  for (const w of words) chunks.push({ ...base, choices: [{ index: 0, delta: { content: w }, finish_reason: null }] });
  chunks.push({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
  if (call.body?.stream_options?.include_usage) {
    chunks.push({ ...base, choices: [], usage: { prompt_tokens: 10, completion_tokens: fakeTokenCount(text), total_tokens: 10 + fakeTokenCount(text) } });
  }
  return chunks;
}

/**
 * A streamed response as a provider sends it: created, in_progress, a reasoning item with thinking
 * deltas (whitespace kept exactly), a message with text deltas, completed.
 */
export function responseEvents(call: UpstreamCall, text: string, thinking: string[] = []) {
  const id = `resp_${Math.random().toString(36).slice(2)}`;
  let seq = 0;
  const response = (status: string, output: unknown[]) => ({
    id, object: 'response', created_at: Math.floor(Date.now() / 1000), status, model: call.body?.model ?? 'unknown', output,
    // OpenAI's answer repeats the instructions the model was given.
    instructions: call.body?.instructions ?? null,
    usage: status === 'completed' ? { input_tokens: 12, output_tokens: 7, total_tokens: 19 } : null,
  });
  const events: any[] = [];
  const ev = (type: string, fields: Record<string, unknown>) => events.push({ type, ...fields, sequence_number: seq++ });
  ev('response.created', { response: response('in_progress', []) });
  ev('response.in_progress', { response: response('in_progress', []) });
  const output: unknown[] = [];
  let index = 0;
  if (thinking.length) {
    const rs = { id: `rs_${id}`, type: 'reasoning', summary: [], content: [] as unknown[] };
    ev('response.output_item.added', { output_index: index, item: rs });
    for (const d of thinking) ev('response.reasoning_text.delta', { output_index: index, item_id: rs.id, content_index: 0, delta: d });
    const full = thinking.join('');
    ev('response.reasoning_text.done', { output_index: index, item_id: rs.id, content_index: 0, text: full });
    ev('response.content_part.done', { output_index: index, item_id: rs.id, content_index: 0, part: { type: 'reasoning_text', text: full } });
    const done = { ...rs, content: [{ type: 'reasoning_text', text: full }] };
    ev('response.output_item.done', { output_index: index, item: done });
    output.push(done);
    index++;
  }
  const msg = { id: `msg_${id}`, type: 'message', role: 'assistant', status: 'in_progress', content: [] as unknown[] };
  ev('response.output_item.added', { output_index: index, item: msg });
  ev('response.content_part.added', { output_index: index, item_id: msg.id, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
  for (const w of text.split(/(?<= )/)) ev('response.output_text.delta', { output_index: index, item_id: msg.id, content_index: 0, delta: w });
  ev('response.output_text.done', { output_index: index, item_id: msg.id, content_index: 0, text });
  const part = { type: 'output_text', text, annotations: [] };
  ev('response.content_part.done', { output_index: index, item_id: msg.id, content_index: 0, part });
  const doneMsg = { ...msg, status: 'completed', content: [part] };
  ev('response.output_item.done', { output_index: index, item: doneMsg });
  output.push(doneMsg);
  ev('response.completed', { response: response('completed', output) });
  return events;
}

/** A non-streamed response object. */
export function responseObject(call: UpstreamCall, text: string) {
  const events = responseEvents(call, text);
  return events[events.length - 1].response;
}

export async function collect<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const e of stream) out.push(e);
  return out;
}
