import assert from 'node:assert/strict';
import { client, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { chatCompletion, responseFormatRejected, startOpenAiUpstream, type OpenAiUpstream, type UpstreamCall } from '../support/openai-upstream.js';
import { openAiSchemas, sseEvents, type OpenAiSchemas } from '../support/openai-conformance.js';
import { chatChunks, knowledgeCharacter, newQuotaKey, responseEvents, responseObject } from './support.js';

/**
 * Every answer of /v3/responses and /v3/chat/completions, plain and streamed event by event,
 * with and without a knowledge-enabled character and with reasoning, checked against JSON Schemas
 * generated from the official `openai` package's own TypeScript types (see
 * test/support/openai-conformance.ts). The fake provider answers as OpenAI does (every member
 * its types require), so whatever fails here is what the service added or changed.
 */
const article =
  '# Lighthouse keeping\n\nThe keeper trimmed the lamp wicks every evening at dusk.\n\n## Fog signals\n\n' +
  'When fog rolled in, the keeper of Skerryvore sounded a compressed-air horn every ninety seconds so that fishing boats could find the channel between the reefs.\n';
const question = 'How often was the fog horn sounded?';
const answer = 'Every ninety seconds.';
/** A model name for which the fake streams open-weight reasoning text instead of OpenAI's summaries. */
const openWeightModel = 'open-weight-model';

describe("messaging v3: answers conform to the openai package's own types", function () {
  let schemas: OpenAiSchemas;

  before(async function () {
    // The first run generates the schema (a few seconds); later runs read the cache.
    this.timeout(120_000);
    schemas = await openAiSchemas();
  });

  describe('the schema generated from the openai package', () => {
    const fileSearchCall = (attributes: unknown) => ({
      id: 'fs_1',
      type: 'file_search_call',
      status: 'completed',
      queries: ['q'],
      results: [{ file_id: 'doc-1', filename: 'a.md', score: 0.5, text: 'preview', attributes }],
    });

    it('takes attributes whose values are strings, numbers or booleans, and refuses an array among them', () => {
      assert.deepEqual(schemas.mismatches('ResponseFileSearchToolCall', fileSearchCall({ chunk_index: 3, retrievers: 'dense,bm25', exact: true })), []);
      const refused = schemas.mismatches('ResponseFileSearchToolCall', fileSearchCall({ chunk_index: 3, retrievers: ['dense', 'bm25'] }));
      assert.ok(refused.some((m) => m.startsWith('/results/0/attributes/retrievers ')), refused.join('\n'));
      // The same in a whole answer, where the item is one of the output union's members.
      const response = { ...responseObject({ body: { model: 'm' } } as UpstreamCall, answer), output: [fileSearchCall({ retrievers: ['dense'] })] };
      assert.notDeepEqual(schemas.mismatches('OpenAIResponse', response), []);
      assert.deepEqual(schemas.mismatches('OpenAIResponse', { ...response, output: [fileSearchCall({ retrievers: 'dense' })] }), []);
    });

    it('refuses a known member of the wrong type or a missing required one, and lets unknown members pass', () => {
      const delta = { type: 'response.output_text.delta', item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'Hi', logprobs: [], sequence_number: 4 };
      assert.doesNotThrow(() => schemas.assertStreamEventConforms({ ...delta, something_new: { a: 1 } }, 'an event with an unknown member'));
      assert.throws(() => schemas.assertStreamEventConforms({ ...delta, delta: 5 }, 'delta as a number'), /\/delta must be string/);
      assert.throws(() => schemas.assertStreamEventConforms({ ...delta, sequence_number: undefined }, 'without its sequence number'), /must have required property 'sequence_number'/);
      assert.throws(() => schemas.assertStreamEventConforms({ ...delta, type: 'response.made_up' }, 'an unknown event'), /not the type of any event/);
      const { tools: _tools, ...withoutTools } = responseObject({ body: { model: 'm' } } as UpstreamCall, answer);
      assert.throws(() => schemas.assertConforms('OpenAIResponse', withoutTools, 'a response without tools'), /must have required property 'tools'/);
      assert.throws(() => schemas.assertConforms('OpenAIErrorBody', { error: { message: 'no', type: 'server_error', code: null } }, 'an error without param'), /must have required property 'param'/);
      assert.throws(() => schemas.assertConforms('OpenAIChatCompletionChunk', { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: 7 }, finish_reason: null }] }, 'a chunk'), /content must be string/);
    });
  });

  describe('answers of /v3', () => {
    let upstream: OpenAiUpstream;
    let api: RunningApi;
    let worker: RunningWorker;
    let key: string;
    let service: (kb: string) => unknown;
    let kb: string;
    let emptyKb: string;

    const responder = (call: UpstreamCall) => {
      const stream = call.body?.stream === true;
      if (call.path.endsWith('/chat/completions')) return stream ? { sse: chatChunks(call, answer) } : { json: chatCompletion(call, answer) };
      const thinking = call.body?.model === openWeightModel ? ['Check  the\nsources. ', 'Then answer.'] : [];
      const summary = call.body?.reasoning?.summary ? ['The question is about ', 'the fog horn.'] : [];
      return stream ? { sse: responseEvents(call, answer, thinking, { summary }), named: true, done: false } : { json: responseObject(call, answer, thinking, { summary }) };
    };

    before(async function () {
      this.timeout(180_000);
      upstream = await startOpenAiUpstream(responder);
      api = await startApi({ OPENAI_BASE_URL: upstream.baseUrl, MESSAGING_SSE_KEEPALIVE_MS: '50' });
      worker = await startWorker();
      const made = await knowledgeCharacter(client(api.url), { name: 'lighthouse.md', content: article });
      ({ service, kb, emptyKb } = made);
      key = made.quota.key;
    });
    beforeEach(() => upstream.respond(responder));
    after(async () => {
      await worker?.kill();
      await api?.close();
      await upstream?.close();
    });

    const post = async (path: string, body: unknown, as = key) => {
      const res = await fetch(`${api.url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${as}` }, body: JSON.stringify(body) });
      return { status: res.status, type: res.headers.get('content-type') ?? '', text: await res.text() };
    };

    /** A streamed responses answer: every event conforms and its event line names its type. */
    const checkResponseStream = (text: string, where: string) => {
      const events = sseEvents(text);
      assert.ok(events.length > 0, `${where}: no events`);
      return events.map(({ event, data }, i) => {
        const parsed = JSON.parse(data);
        assert.equal(event, parsed.type, `${where}: the event line names the data's type`);
        schemas.assertStreamEventConforms(parsed, `${where}, event ${i}`);
        return parsed;
      });
    };

    /** A streamed chat answer: every chunk conforms (an error chunk to the error body), then [DONE] unless it failed. */
    const checkChatStream = (text: string, where: string) => {
      const events = sseEvents(text).map((e) => e.data);
      const chunks = events.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d));
      chunks.forEach((c, i) => schemas.assertConforms(c.error ? 'OpenAIErrorBody' : 'OpenAIChatCompletionChunk', c, `${where}, chunk ${i}`));
      return { chunks, done: events.at(-1) === '[DONE]' };
    };

    const reasoning = { effort: 'low', summary: 'auto' };
    const responsesCases = () => [
      { name: 'without a character', body: { model: 'm', input: question, reasoning } },
      { name: 'with a character without knowledge', body: { model: 'm', input: question, instructions: 'Be brief.', metadata: { service: { character: { name: 'Ada', prompt: 'You are Ada.' } }, topic: 'fog' } } },
      { name: 'with a knowledge-enabled character', body: { model: 'm', input: question, instructions: 'Be brief.', reasoning, metadata: { service: service(kb) } } },
      { name: 'with a knowledge-enabled character, streaming reasoning text', body: { model: openWeightModel, input: question, reasoning: { effort: 'high' }, metadata: { service: service(kb) } } },
      { name: 'with a knowledge-enabled character and no sources', body: { model: 'm', input: question, metadata: { service: service(emptyKb) } } },
      {
        name: "with a knowledge-enabled character, a tool's output sent back",
        body: { model: 'm', input: [{ type: 'function_call_output', call_id: 'call_1', output: '{"visibility_m": 40}' }], metadata: { service: service(kb) } },
      },
    ];

    it('/v3/responses: every answer conforms to Response', async () => {
      for (const { name, body } of responsesCases()) {
        const res = await post('/v3/responses', body);
        assert.equal(res.status, 200, `${name}: ${res.text}`);
        const parsed = JSON.parse(res.text);
        schemas.assertConforms('OpenAIResponse', parsed, name);
        assert.equal(parsed.output.at(-1).content[0].text, answer);
      }
    });

    it('/v3/responses streamed: every event conforms to its member of ResponseStreamEvent', async () => {
      for (const { name, body } of responsesCases()) {
        const res = await post('/v3/responses', { ...body, stream: true });
        assert.equal(res.status, 200, `${name}: ${res.text}`);
        assert.match(res.type, /^text\/event-stream/);
        const events = checkResponseStream(res.text, name);
        assert.equal(events.at(-1).type, 'response.completed', name);
        assert.equal(events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join(''), answer);
      }
    });

    it('/v3/chat/completions: plain and streamed answers conform to ChatCompletion and ChatCompletionChunk', async () => {
      const messages = [{ role: 'user', content: question }];
      for (const [name, extra] of [
        ['without a character', { reasoning_effort: 'low' }],
        ['with a knowledge-enabled character', { reasoning_effort: 'low', metadata: { service: service(kb), topic: 'fog' } }],
      ] as const) {
        const plain = await post('/v3/chat/completions', { model: 'm', messages, ...extra });
        assert.equal(plain.status, 200, plain.text);
        schemas.assertConforms('OpenAIChatCompletion', JSON.parse(plain.text), name);
        for (const stream_options of [undefined, { include_usage: true }]) {
          const streamed = await post('/v3/chat/completions', { model: 'm', messages, ...extra, stream: true, ...(stream_options ? { stream_options } : {}) });
          assert.equal(streamed.status, 200, streamed.text);
          const { chunks, done } = checkChatStream(streamed.text, `${name}, streamed${stream_options ? ' with usage' : ''}`);
          assert.ok(done, 'ends in [DONE]');
          assert.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), answer);
          assert.equal(chunks.some((c) => c.usage), stream_options !== undefined, 'the usage chunk only when asked for');
        }
      }
    });

    it("error answers carry OpenAI's error object: the service's own, and a provider's refusal relayed", async () => {
      const cases: Array<[string, () => Promise<{ status: number; text: string }>, number]> = [
        ['an invalid body', () => post('/v3/responses', { model: 'm', input: question, max_output_tokens: 'many' }), 400],
        ['an unknown knowledge base', () => post('/v3/responses', { model: 'm', input: question, metadata: { service: service('no-such-kb') } }), 400],
        ['a wrong key', () => post('/v3/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'x' }] }, 'qk_wrong'), 401],
        ['a key of another type', async () => post('/v3/responses', { model: 'm', input: 'x' }, (await newQuotaKey(client(api.url), { quota_type: 'chat' })).key), 403],
        ['a key without room', async () => post('/v3/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'x' }], max_tokens: 500 }, (await newQuotaKey(client(api.url), { token_amount: 10 })).key), 429],
        [
          "the provider's refusal",
          async () => {
            upstream.respond(() => responseFormatRejected);
            return post('/v3/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_schema', json_schema: { name: 'x', schema: {} } } });
          },
          400,
        ],
        [
          'a provider answer that is not JSON',
          async () => {
            upstream.respond(() => ({ raw: '<html>busy</html>', contentType: 'text/html' }));
            return post('/v3/responses', { model: 'm', input: 'x' });
          },
          502,
        ],
      ];
      for (const [name, call, status] of cases) {
        const res = await call();
        assert.equal(res.status, status, `${name}: ${res.text}`);
        schemas.assertConforms('OpenAIErrorBody', JSON.parse(res.text), name);
      }
    });

    it('a knowledge stream that fails ends in an error event that conforms to ResponseErrorEvent', async () => {
      upstream.respond((call) => ({ sse: responseEvents(call, answer).slice(0, 5), named: true, done: false }));
      const res = await post('/v3/responses', { model: 'm', input: question, stream: true, metadata: { service: service(kb) } });
      const events = checkResponseStream(res.text, 'a knowledge stream cut short');
      assert.equal(events.at(-1).type, 'error');
    });

    it('streams the provider ends early end in an error event (responses) or error chunk (chat) that conforms', async () => {
      upstream.respond((call) => ({ sse: responseEvents(call, answer).slice(0, 5), named: true, done: false }));
      const responses = checkResponseStream((await post('/v3/responses', { model: 'm', input: question, stream: true })).text, 'a responses stream cut short');
      assert.equal(responses.at(-1).type, 'error');
      upstream.respond((call) => ({ sse: chatChunks(call, answer).slice(0, 3), done: false }));
      const chat = checkChatStream((await post('/v3/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true })).text, 'a chat stream cut short');
      assert.ok(chat.chunks.at(-1).error && !chat.done);
    });
  });
});
