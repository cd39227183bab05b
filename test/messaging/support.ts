import OpenAI from 'openai';
import { testStack } from '../support/stack.js';
import { eventually, type client } from '../support/system.js';
import { newKnowledgeBase, unique } from '../support/fixtures.js';
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

/** Uploads a markdown document to a knowledge base and waits until it is embedded (a worker must run); returns its id. */
export async function embeddedDocument(http: Http, partner: { name: string; key: string }, kb: string, folder: string, name: string, content: string): Promise<string> {
  const create = () => http('POST', `/api/documents/${partner.name}/${kb}`, { key: partner.key, form: { type: 'file', folder, use_original_as_rewritten: 'true', file: { name, content, type: 'text/markdown' } } });
  let created = await create();
  // A folder looked up under the partner's old name a moment ago: 409, "send the request again".
  if (created.status === 409) created = await create();
  if (created.status !== 201) throw new Error(`creating document failed: ${created.status} ${JSON.stringify(created.body)}`);
  const id = created.body.id as string;
  await eventually(`${name} to be embedded`, async () => (await http('GET', `/api/document/${partner.name}/${kb}/${id}`, { key: partner.key })).body.embedding_status === 'success', 120_000);
  return id;
}

/**
 * A partner with a knowledge base holding one embedded markdown document and a second, empty
 * knowledge base, and a quota key of that partner: what a knowledge-enabled character needs (a
 * worker must run). `service(kb)` is the `metadata.service` of a character searching `kb`.
 */
export async function knowledgeCharacter(http: Http, document: { name: string; content: string }, character: { name: string; prompt: string } = { name: 'Keeper', prompt: 'You are the lighthouse keeper.' }) {
  const { partner, kb, folder } = await newKnowledgeBase(http);
  const documentId = await embeddedDocument(http, partner, kb, folder, document.name, document.content);
  const emptyKb = 'empty-kb';
  const k = await http('POST', `/api/knowledgebases/${partner.name}`, { key: partner.key, form: { name: emptyKb } });
  if (k.status !== 201) throw new Error(`creating KB failed: ${k.status} ${JSON.stringify(k.body)}`);
  const quota = await newQuotaKey(http, { partner: partner.name });
  const service = (base: string) => ({ character: { ...character, knowledge_base: { partner: partner.name, kb: base } } });
  return { partner, kb, folder, emptyKb, documentId, quota, service };
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

/** Usage as OpenAI reports it on a finished response, details included. */
const responseUsage = (reasoningTokens: number) => ({
  input_tokens: 12,
  input_tokens_details: { cached_tokens: 0 },
  output_tokens: 7,
  output_tokens_details: { reasoning_tokens: reasoningTokens },
  total_tokens: 19,
});

/**
 * A streamed response as OpenAI sends it (every member its API sends, in its order of events):
 * created, in_progress, a reasoning item when the model thinks (`thinking`: reasoning-text
 * deltas, whitespace kept exactly, as open-weight models stream them; `summary`: reasoning-summary
 * deltas, as OpenAI's models stream them when `reasoning.summary` is asked for), a message with
 * text deltas, completed.
 */
export function responseEvents(call: UpstreamCall, text: string, thinking: string[] = [], options: { summary?: string[] } = {}) {
  const id = `resp_${Math.random().toString(36).slice(2)}`;
  const summary = options.summary ?? [];
  const reasons = thinking.length > 0 || summary.length > 0;
  let seq = 0;
  const request = call.body ?? {};
  const response = (status: string, output: unknown[]) => ({
    id,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status,
    background: false,
    error: null,
    incomplete_details: null,
    // OpenAI's answer repeats the instructions the model was given.
    instructions: request.instructions ?? null,
    max_output_tokens: request.max_output_tokens ?? null,
    model: request.model ?? 'unknown',
    output,
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    previous_response_id: request.previous_response_id ?? null,
    reasoning: { effort: request.reasoning?.effort ?? null, summary: request.reasoning?.summary ?? null },
    store: request.store ?? true,
    temperature: request.temperature ?? 1,
    text: { format: { type: 'text' } },
    tool_choice: request.tool_choice ?? 'auto',
    tools: request.tools ?? [],
    top_p: request.top_p ?? 1,
    truncation: 'disabled',
    usage: status === 'completed' ? responseUsage(reasons ? 3 : 0) : null,
    metadata: request.metadata ?? {},
  });
  const events: any[] = [];
  const ev = (type: string, fields: Record<string, unknown>) => events.push({ type, ...fields, sequence_number: seq++ });
  ev('response.created', { response: response('in_progress', []) });
  ev('response.in_progress', { response: response('in_progress', []) });
  const output: unknown[] = [];
  let index = 0;
  if (reasons) {
    const rs = { id: `rs_${id}`, type: 'reasoning', summary: [] as unknown[], ...(thinking.length ? { content: [] as unknown[] } : {}) };
    ev('response.output_item.added', { output_index: index, item: rs });
    let done: Record<string, unknown> = { ...rs };
    if (summary.length) {
      const item_id = rs.id;
      ev('response.reasoning_summary_part.added', { item_id, output_index: index, summary_index: 0, part: { type: 'summary_text', text: '' } });
      for (const d of summary) ev('response.reasoning_summary_text.delta', { item_id, output_index: index, summary_index: 0, delta: d });
      const full = summary.join('');
      ev('response.reasoning_summary_text.done', { item_id, output_index: index, summary_index: 0, text: full });
      ev('response.reasoning_summary_part.done', { item_id, output_index: index, summary_index: 0, part: { type: 'summary_text', text: full } });
      done = { ...done, summary: [{ type: 'summary_text', text: full }] };
    }
    if (thinking.length) {
      for (const d of thinking) ev('response.reasoning_text.delta', { output_index: index, item_id: rs.id, content_index: 0, delta: d });
      const full = thinking.join('');
      ev('response.reasoning_text.done', { output_index: index, item_id: rs.id, content_index: 0, text: full });
      ev('response.content_part.done', { output_index: index, item_id: rs.id, content_index: 0, part: { type: 'reasoning_text', text: full } });
      done = { ...done, content: [{ type: 'reasoning_text', text: full }] };
    }
    ev('response.output_item.done', { output_index: index, item: done });
    output.push(done);
    index++;
  }
  const msg = { id: `msg_${id}`, type: 'message', role: 'assistant', status: 'in_progress', content: [] as unknown[] };
  ev('response.output_item.added', { output_index: index, item: msg });
  ev('response.content_part.added', { output_index: index, item_id: msg.id, content_index: 0, part: { type: 'output_text', text: '', annotations: [], logprobs: [] } });
  for (const w of text.split(/(?<= )/)) ev('response.output_text.delta', { output_index: index, item_id: msg.id, content_index: 0, delta: w, logprobs: [] });
  ev('response.output_text.done', { output_index: index, item_id: msg.id, content_index: 0, text, logprobs: [] });
  const part = { type: 'output_text', text, annotations: [], logprobs: [] };
  ev('response.content_part.done', { output_index: index, item_id: msg.id, content_index: 0, part });
  const doneMsg = { ...msg, status: 'completed', content: [part] };
  ev('response.output_item.done', { output_index: index, item: doneMsg });
  output.push(doneMsg);
  ev('response.completed', { response: response('completed', output) });
  return events;
}

/** A non-streamed response object (with a reasoning item when `thinking` or `summary` is given). */
export function responseObject(call: UpstreamCall, text: string, thinking: string[] = [], options: { summary?: string[] } = {}) {
  const events = responseEvents(call, text, thinking, options);
  return events[events.length - 1].response;
}

export async function collect<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const e of stream) out.push(e);
  return out;
}
