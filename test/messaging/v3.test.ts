import crypto from 'node:crypto';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import pg from 'pg';
import { client, eventually, startApi, type RunningApi } from '../support/system.js';
import { holdsFor } from '../support/wait.js';
import { chatCompletion, startOpenAiUpstream, type OpenAiUpstream, type UpstreamCall } from '../support/openai-upstream.js';
import { testStack } from '../support/stack.js';
import { newPartner } from '../support/fixtures.js';
import { estimateTokens } from '../../lib/messaging/quota.js';
import { chatChunks, collect, newQuotaKey, responseEvents, responseObject, v3Client } from './support.js';

/**
 * The v3 messaging endpoints through the official `openai` client, against a local server that
 * speaks the provider's protocol: shapes, streaming, what reaches the provider, quota keys and
 * every error path.
 */
describe('messaging v3: chat completions and responses through the openai client', function () {
  let upstream: OpenAiUpstream;
  let api: RunningApi;
  let http: ReturnType<typeof client>;
  let key: string;
  let openai: OpenAI;

  const defaultResponder = (call: UpstreamCall) => {
    const stream = call.body?.stream === true;
    if (call.path.endsWith('/chat/completions')) return stream ? { sse: chatChunks(call, 'Hello there, traveller.') } : { json: chatCompletion(call, 'Hello there, traveller.') };
    return stream ? { sse: responseEvents(call, 'The answer.', ['  First,\n\tthink. ', '\n\nThen  answer.  ']), named: true, done: false } : { json: responseObject(call, 'The answer.') };
  };

  before(async () => {
    upstream = await startOpenAiUpstream(defaultResponder);
    api = await startApi({ OPENAI_BASE_URL: upstream.baseUrl, OPENAI_API_KEY: 'provider-secret', MESSAGING_SSE_KEEPALIVE_MS: '150', MESSAGING_SERVER_TIMING: 'true' });
    http = client(api.url);
    ({ key } = await newQuotaKey(http));
    openai = v3Client(api.url, key);
  });
  beforeEach(() => upstream.respond(defaultResponder));
  after(async () => {
    await api?.close();
    await upstream?.close();
  });

  const lastCall = (path: string) => upstream.callsTo(path).at(-1)!;

  describe('chat completions', () => {
    it('answers a normal chat completion; reasoning and limits reach the model, service fields do not', async () => {
      const before = upstream.callsTo('/v1/chat/completions').length;
      const completion = await openai.chat.completions.create({
        model: 'small-model',
        messages: [{ role: 'user', content: 'Hi' }],
        max_completion_tokens: 50,
        reasoning: { effort: 'low' },
        fallback_model: 'other-model',
        metadata: { service: { character: { name: 'Ada', prompt: 'You are Ada, a patient tutor.' } }, conversation: 'c-1' },
      } as any);
      assert.equal(completion.object, 'chat.completion');
      assert.equal(completion.choices[0]!.message.content, 'Hello there, traveller.');
      assert.equal(upstream.callsTo('/v1/chat/completions').length, before + 1, 'one provider call, no fallback');
      const sent = lastCall('/v1/chat/completions').body;
      assert.equal(sent.model, 'small-model');
      assert.equal(sent.max_completion_tokens, 50);
      assert.deepEqual(sent.reasoning, { effort: 'low' });
      assert.equal(sent.fallback_model, undefined);
      assert.deepEqual(sent.metadata, { conversation: 'c-1' }, 'metadata.service is stripped, the rest forwarded');
      assert.deepEqual(sent.messages[0], { role: 'system', content: 'You are Ada, a patient tutor.' });
      assert.equal(lastCall('/v1/chat/completions').headers.authorization, 'Bearer provider-secret', 'the provider gets our provider key, never the quota key');
    });

    it('answers a message that is one unbroken string of 200,000 characters (its token bound is counted in linear time)', async () => {
      const completion = await openai.chat.completions.create({ model: 'small-model', messages: [{ role: 'user', content: 'x'.repeat(200_000) }] });
      assert.equal(completion.choices[0]!.message.content, 'Hello there, traveller.');
      assert.equal(lastCall('/v1/chat/completions').body.messages[0].content.length, 200_000);
    });

    it('takes optional fields sent as null as not given, as OpenAI does', async () => {
      const chat = await http('POST', '/v3/chat/completions', {
        key,
        json: { model: 'small-model', messages: [{ role: 'user', content: 'Hi' }], stream: null, max_tokens: null, max_completion_tokens: null, metadata: null, reasoning: null, fallback_model: null },
      });
      assert.equal(chat.status, 200, JSON.stringify(chat.body));
      assert.equal(chat.body.choices[0].message.content, 'Hello there, traveller.');
      assert.equal(lastCall('/v1/chat/completions').body.stream, false);
      const responses = await http('POST', '/v3/responses', { key, json: { model: 'small-model', input: 'Hi', stream: null, instructions: null, max_output_tokens: null, metadata: null } });
      assert.equal(responses.status, 200, JSON.stringify(responses.body));
      assert.equal(responses.body.object, 'response');
      assert.equal(lastCall('/v1/responses').body.instructions, undefined);
      const wrong = await http('POST', '/v3/chat/completions', { key, json: { model: 'small-model', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 'many' } });
      assert.equal(wrong.status, 400);
    });

    it('streams chat completion chunks as SSE and ends with [DONE]', async () => {
      const stream = await openai.chat.completions.create({ model: 'small-model', messages: [{ role: 'user', content: 'Hi' }], stream: true, max_tokens: 30 });
      const chunks = await collect(stream);
      assert.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Hello there, traveller.');
      assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk'));
      assert.ok(chunks.every((c) => !c.usage), 'the usage chunk the service asked for is not shown to a client that did not ask');
      const sent = lastCall('/v1/chat/completions').body;
      assert.equal(sent.stream, true);
      assert.equal(sent.max_tokens, 30);
      assert.equal(sent.stream_options.include_usage, true);
    });

    it('passes the usage chunk through when the client asks for it', async () => {
      const stream = await openai.chat.completions.create({ model: 'small-model', messages: [{ role: 'user', content: 'Hi' }], stream: true, stream_options: { include_usage: true } });
      const chunks = await collect(stream);
      assert.ok(chunks.at(-1)!.usage, 'last chunk carries usage');
    });
  });

  describe('responses', () => {
    it('answers a responses request without a character unchanged', async () => {
      const r = await openai.responses.create({ model: 'small-model', input: 'Hi', max_output_tokens: 40, reasoning: { effort: 'none' } as any });
      assert.equal(r.object, 'response');
      assert.equal(r.output_text, 'The answer.');
      assert.ok(!r.output.some((i) => (i.id ?? '').startsWith('rs_service_') || (i.id ?? '').startsWith('fs_service_')), 'no visibility items without knowledge');
      const sent = lastCall('/v1/responses').body;
      assert.equal(sent.max_output_tokens, 40);
      assert.deepEqual(sent.reasoning, { effort: 'none' });
      // OpenAI's Reasoning object takes effort null (the model's default) and a summary setting.
      await openai.responses.create({ model: 'small-model', input: 'Hi', reasoning: { effort: null, summary: 'auto' } });
      assert.deepEqual(lastCall('/v1/responses').body.reasoning, { effort: null, summary: 'auto' });
    });

    it('streams the provider events; thinking text keeps its whitespace exactly', async () => {
      const stream = await openai.responses.create({ model: 'thinking-model', input: 'Hi', stream: true, reasoning: { max_tokens: 500 } as any });
      const events = await collect(stream);
      const types = events.map((e) => e.type);
      assert.equal(types[0], 'response.created');
      assert.equal(types.at(-1), 'response.completed');
      const deltas = events.filter((e) => e.type === 'response.reasoning_text.delta').map((e: any) => e.delta);
      assert.deepEqual(deltas, ['  First,\n\tthink. ', '\n\nThen  answer.  ']);
      const done: any = events.find((e) => e.type === 'response.reasoning_text.done');
      assert.equal(done.text, '  First,\n\tthink. \n\nThen  answer.  ');
      assert.ok(events.some((e: any) => e.type === 'response.content_part.done' && e.part.type === 'reasoning_text'));
      assert.equal(events.filter((e) => e.type === 'response.output_text.delta').map((e: any) => e.delta).join(''), 'The answer.');
      assert.deepEqual(lastCall('/v1/responses').body.reasoning, { max_tokens: 500 });
    });

    it("puts a character's prompt before the client's instructions, streamed or not", async () => {
      const character = { service: { character: { name: 'Ada', prompt: 'You are Ada, a patient tutor.' } } };
      for (const stream of [false, true]) {
        const r = await openai.responses.create({ model: 'small-model', input: 'Hi', instructions: 'Answer briefly.', stream, metadata: character } as any);
        if (stream) await collect(r as any);
        const sent = lastCall('/v1/responses').body;
        assert.equal(sent.instructions, 'You are Ada, a patient tutor.\n\nAnswer briefly.', `stream: ${stream}`);
        assert.equal(sent.metadata, undefined, 'metadata.service is stripped');
      }
    });
  });

  describe('models', () => {
    const list = { object: 'list', data: [{ id: 'small-model', object: 'model', created: 1, owned_by: 'provider' }, { id: 'large-model', object: 'model', created: 2, owned_by: 'provider' }] };
    const modelsResponder = (call: UpstreamCall) => {
      if (call.path === '/v1/models') return { json: list };
      const found = list.data.find((m) => call.path === `/v1/models/${m.id}`);
      return found ? { json: found } : { status: 404, json: { error: { message: `The model '${call.path.split('/').at(-1)}' does not exist`, type: 'invalid_request_error', code: 'model_not_found' } } };
    };

    it("lists the provider's models through the openai client (kept 60 s), and reads one; an unknown one is the provider's 404", async () => {
      upstream.respond(modelsResponder);
      const before = upstream.callsTo('/v1/models').length;
      const ids: string[] = [];
      for await (const m of openai.models.list()) ids.push(m.id);
      assert.deepEqual(ids, ['small-model', 'large-model']);
      const again: string[] = [];
      for await (const m of openai.models.list()) again.push(m.id);
      assert.deepEqual(again, ids);
      assert.ok(upstream.callsTo('/v1/models').length - before <= 1, 'the second list came from the process');
      assert.equal(upstream.callsTo('/v1/models')[0]?.method, 'GET');
      assert.equal((await openai.models.retrieve('large-model')).created, 2);
      await assert.rejects(openai.models.retrieve('no-such-model'), (e: any) => e.status === 404 && /does not exist/.test(e.message));
    });

    it('needs a chat, responses or any key; costs no quota', async () => {
      upstream.respond(modelsResponder);
      assert.equal((await http('GET', '/v3/models')).status, 401);
      const speech = await newQuotaKey(http, { quota_type: 'speech' });
      const refused = await http('GET', '/v3/models', { headers: { Authorization: `Bearer ${speech.key}` } });
      assert.equal(refused.status, 403);
      assert.equal(refused.body.detail.code, 'forbidden');
      assert.match(refused.body.detail.message, /needs a chat or responses \(or any\) key/);
      const responsesKey = await newQuotaKey(http, { quota_type: 'responses', token_amount: 1 });
      const listed = await http('GET', '/v3/models', { headers: { Authorization: `Bearer ${responsesKey.key}` } });
      assert.equal(listed.status, 200);
      assert.equal(listed.body.data.length, 2);
      const keys = await http('GET', '/api/quota-keys', { key: testStack().adminApiKey });
      assert.equal(keys.body.find((k: { id: string }) => k.id === responsesKey.id).tokens_consumed, 0);
    });

    it('keys presented at the same moment are each answered for themselves (their lookups share round trips)', async () => {
      upstream.respond(modelsResponder);
      const chat = await Promise.all([1, 2, 3, 4].map(() => newQuotaKey(http, { quota_type: 'chat' })));
      const speech = await Promise.all([1, 2, 3, 4].map(() => newQuotaKey(http, { quota_type: 'speech' })));
      const revoked = await Promise.all([1, 2, 3, 4].map(() => newQuotaKey(http, { quota_type: 'chat' })));
      for (const k of revoked) assert.equal((await http('DELETE', `/api/quota-keys/${k.id}`, { key: testStack().adminApiKey })).status, 200);
      const unknown = [1, 2, 3, 4].map((i) => `${chat[0]!.key.slice(0, -4)}x${i}yz`);
      const presented = [
        ...chat.map((k) => ({ key: k.key, status: 200 })),
        ...speech.map((k) => ({ key: k.key, status: 403 })),
        ...revoked.map((k) => ({ key: k.key, status: 401 })),
        ...unknown.map((k) => ({ key: k, status: 401 })),
      ];
      // The keys' table is held, so that the lookups pile up behind the first and go together.
      const holder = new pg.Client({ connectionString: testStack().databaseUrl });
      await holder.connect();
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE quota_keys IN ACCESS EXCLUSIVE MODE');
      const order = [...presented.keys()].sort((a, b) => (a % 4) - (b % 4) || a - b);
      const answers = Promise.all(order.map((i) => http('GET', '/v3/models', { headers: { Authorization: `Bearer ${presented[i]!.key}` } })));
      await new Promise((resolve) => setTimeout(resolve, 500));
      await holder.query('COMMIT');
      await holder.end();
      assert.deepEqual((await answers).map((a) => a.status), order.map((i) => presented[i]!.status));
    });
  });

  describe('keys', () => {
    it('accepts the key as Authorization: Bearer and as X-API-Key', async () => {
      const body = { model: 'm', messages: [{ role: 'user', content: 'Hi' }] };
      const bearer = await http('POST', '/v3/chat/completions', { json: body, headers: { Authorization: `Bearer ${key}` } });
      assert.equal(bearer.status, 200, JSON.stringify(bearer.body));
      const header = await http('POST', '/v3/chat/completions', { json: body, headers: { 'X-API-Key': key } });
      assert.equal(header.status, 200, JSON.stringify(header.body));
      const other = await newQuotaKey(http, { quota_type: 'chat', token_amount: 10_000 });
      const both = await http('POST', '/v3/chat/completions', { json: body, headers: { Authorization: `Bearer ${key}`, 'X-API-Key': other.key } });
      assert.equal(both.status, 401);
      assert.equal(both.body.detail.code, 'invalid_api_key');
      assert.match(both.body.detail.message, /two different keys/);
    });

    it('lists keys with their usage and never the key; a revoked key is refused', async () => {
      const created = await newQuotaKey(http, { quota_type: 'chat', token_amount: 10_000 });
      const c = v3Client(api.url, created.key);
      await c.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'count me' }], max_tokens: 20 });
      // The answer does not wait for the settlement: it lands a moment later.
      const list = await eventually('the settlement', async () => {
        const l = await http('GET', '/api/quota-keys', { key: testStack().adminApiKey });
        return l.body.find((k: { id: string }) => k.id === created.id)?.tokens_reserved === 0 && l;
      });
      assert.equal(list.status, 200);
      assert.ok(!JSON.stringify(list.body).includes(created.key), 'no listing shows a key');
      const mine = list.body.find((k: { id: string }) => k.id === created.id);
      const expected = lastCall('/v1/chat/completions').body;
      assert.equal(mine.unit, 'tokens');
      assert.equal(mine.quota_type, 'chat');
      assert.ok(mine.tokens_consumed > 0, JSON.stringify(mine));
      assert.equal(mine.tokens_reserved, 0, 'the hold is settled');
      assert.equal(mine.tokens_remaining, 10_000 - mine.tokens_consumed);
      assert.ok(expected);

      const revoked = await http('DELETE', `/api/quota-keys/${created.id}`, { key: testStack().adminApiKey });
      assert.equal(revoked.status, 200);
      assert.equal(revoked.body.status, 'revoked');
      await assert.rejects(c.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] }), (e: any) => e.status === 401);
    });

    it('the admin endpoints need the administrator key', async () => {
      const partner = await newPartner(http);
      for (const k of [null, partner.key, key]) {
        const res = await http('POST', '/api/quota-keys', { key: k, json: { name: 'x', quota_type: 'any', token_amount: 5 } });
        assert.ok(res.status === 401 || res.status === 403, `${res.status}`);
        assert.equal(typeof res.body.detail, 'string');
      }
    });
  });

  describe('errors, in the body {detail: {code, message, context: {request_id, endpoint}}}', () => {
    const assertError = (res: { status: number; body: any; headers: Headers }, status: number, code: string, endpoint: string) => {
      assert.equal(res.status, status, JSON.stringify(res.body));
      assert.equal(res.body.detail.code, code);
      assert.equal(typeof res.body.detail.message, 'string');
      assert.equal(res.body.detail.context.endpoint, endpoint);
      assert.match(res.body.detail.context.request_id, /^[0-9a-f-]{36}$/);
      assert.equal(res.body.detail.context.request_id, res.headers.get('x-request-id'));
      // And as OpenAI's error object, the only part the official OpenAI clients read (a provider's
      // failure carries the provider's own).
      if (code === 'upstream_error') return;
      assert.deepEqual({ message: res.body.error.message, code: res.body.error.code }, { message: res.body.detail.message, code });
      assert.equal(res.body.error.type, status >= 500 ? 'server_error' : 'invalid_request_error');
    };
    const chatBody = { model: 'm', messages: [{ role: 'user', content: 'Hi' }] };

    it('401 invalid_api_key without a key and with an unknown key; the provider is not called', async () => {
      const before = upstream.calls.length;
      for (const path of ['/v3/chat/completions', '/v3/responses']) {
        assertError(await http('POST', path, { json: { ...chatBody, input: 'x' } }), 401, 'invalid_api_key', path);
        assertError(await http('POST', path, { json: { ...chatBody, input: 'x' }, headers: { Authorization: 'Bearer qk_not-a-key' } }), 401, 'invalid_api_key', path);
      }
      await assert.rejects(v3Client(api.url, 'qk_wrong').chat.completions.create(chatBody as any), (e: any) => e.status === 401 && e.code === 'invalid_api_key' && /^401 /.test(e.message) && !/no body/.test(e.message));
      assert.equal(upstream.calls.length, before);
    });

    it('403 for a key whose quota type does not open the endpoint', async () => {
      const chatOnly = await newQuotaKey(http, { quota_type: 'chat' });
      assertError(await http('POST', '/v3/responses', { json: { model: 'm', input: 'x' }, headers: { Authorization: `Bearer ${chatOnly.key}` } }), 403, 'forbidden', '/v3/responses');
      const responsesOnly = await newQuotaKey(http, { quota_type: 'responses' });
      assertError(await http('POST', '/v3/chat/completions', { json: chatBody, headers: { Authorization: `Bearer ${responsesOnly.key}` } }), 403, 'forbidden', '/v3/chat/completions');
    });

    it('429 quota_exceeded when the key cannot cover the request, and once it is used up', async () => {
      const small = await newQuotaKey(http, { token_amount: 100 });
      const res = await http('POST', '/v3/chat/completions', { json: { ...chatBody, max_tokens: 500 }, headers: { Authorization: `Bearer ${small.key}` } });
      assertError(res, 429, 'quota_exceeded', '/v3/chat/completions');
      upstream.respond((call) => ({ json: chatCompletion(call, 'ok', { usage: { prompt_tokens: 60, completion_tokens: 40 } }) }));
      const ok = await http('POST', '/v3/chat/completions', { json: { ...chatBody, max_tokens: 20 }, headers: { Authorization: `Bearer ${small.key}` } });
      assert.equal(ok.status, 200);
      const after = await http('POST', '/v3/chat/completions', { json: { ...chatBody, max_tokens: 1 }, headers: { Authorization: `Bearer ${small.key}` } });
      assertError(after, 429, 'quota_exceeded', '/v3/chat/completions');
      assert.match(after.body.detail.message, /used up/);
      // No retry can pass either: the OpenAI clients are told not to retry on their own.
      for (const refused of [res, after]) assert.equal(refused.headers.get('x-should-retry'), 'false');
      let sent = 0;
      const sdk = new OpenAI({ baseURL: `${api.url}/v3`, apiKey: small.key, maxRetries: 2, fetch: (url, init) => (sent++, fetch(url, init)) });
      await assert.rejects(sdk.chat.completions.create({ ...chatBody, max_tokens: 1 } as any), (e: any) => e.status === 429);
      assert.equal(sent, 1, 'the SDK did not retry');
    });

    it('a hold covers every one of n choices, the larger of two output limits, and the tools and response formats the model reads as input', async () => {
      const base = estimateTokens(JSON.stringify(chatBody.messages));
      const callsNow = () => upstream.calls.length;
      const asKey = (k: { key: string }) => ({ Authorization: `Bearer ${k.key}` });

      // Room for two choices of 100 tokens, not three.
      const forTwo = await newQuotaKey(http, { quota_type: 'chat', token_amount: base + 250 });
      let before = callsNow();
      assertError(await http('POST', '/v3/chat/completions', { json: { ...chatBody, n: 3, max_tokens: 100 }, headers: asKey(forTwo) }), 429, 'quota_exceeded', '/v3/chat/completions');
      assert.equal(callsNow(), before, 'a refused request never reaches the provider');
      const two = await http('POST', '/v3/chat/completions', { json: { ...chatBody, n: 2, max_tokens: 100 }, headers: asKey(forTwo) });
      assert.equal(two.status, 200, JSON.stringify(two.body));
      assert.equal(lastCall('/v1/chat/completions').body.n, 2, 'n reaches the provider');
      for (const n of [0, 1.5, 129, '2']) {
        const res = await http('POST', '/v3/chat/completions', { json: { ...chatBody, n, max_tokens: 10 }, headers: { Authorization: `Bearer ${key}` } });
        assertError(res, 400, 'bad_request', '/v3/chat/completions');
        assert.match(res.body.detail.message, /body\.n /);
      }

      // With both output limits the larger is held: a provider may honour either.
      const bothLimits = await newQuotaKey(http, { quota_type: 'chat', token_amount: base + 500 });
      assertError(await http('POST', '/v3/chat/completions', { json: { ...chatBody, max_completion_tokens: 10, max_tokens: 1000 }, headers: asKey(bothLimits) }), 429, 'quota_exceeded', '/v3/chat/completions');
      assert.equal((await http('POST', '/v3/chat/completions', { json: { ...chatBody, max_completion_tokens: 400, max_tokens: 10 }, headers: asKey(bothLimits) })).status, 200);

      // A short message with 6 KB of tool definitions costs the tools' tokens too.
      const tools = [{ type: 'function', function: { name: 'lookup', description: 'Looks things up. '.repeat(350), parameters: { type: 'object', properties: {} } } }];
      const small = await newQuotaKey(http, { quota_type: 'any', token_amount: 1_000 });
      before = callsNow();
      assertError(await http('POST', '/v3/chat/completions', { json: { ...chatBody, tools, max_tokens: 10 }, headers: asKey(small) }), 429, 'quota_exceeded', '/v3/chat/completions');
      const format = { format: { type: 'json_schema', name: 'answer', schema: { type: 'object', description: 'An answer. '.repeat(500) } } };
      assertError(await http('POST', '/v3/responses', { json: { model: 'm', input: 'Hi', text: format, max_output_tokens: 10 }, headers: asKey(small) }), 429, 'quota_exceeded', '/v3/responses');
      assert.equal(callsNow(), before, 'neither reached the provider');
      // The same requests without them fit, and sampling controls add nothing worth refusing.
      assert.equal((await http('POST', '/v3/chat/completions', { json: { ...chatBody, max_tokens: 10, temperature: 0.2, top_p: 0.9, seed: 7 }, headers: asKey(small) })).status, 200);
      assert.equal((await http('POST', '/v3/responses', { json: { model: 'm', input: 'Hi', max_output_tokens: 10 }, headers: asKey(small) })).status, 200);
    });

    it('an inline image holds what an image costs, not its bytes; the same text in a message counts as text', async () => {
      const photo = `data:image/jpeg;base64,${crypto.randomBytes(1_500_000).toString('base64')}`;
      // A key each: the fake provider's usage counts the base64 as words.
      const headersOf = async () => ({ Authorization: `Bearer ${(await newQuotaKey(http, { token_amount: 60_000 })).key}` });
      const chat = await http('POST', '/v3/chat/completions', {
        headers: await headersOf(),
        json: { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in this photo?' }, { type: 'image_url', image_url: { url: photo, detail: 'high' } }] }] },
      });
      assert.equal(chat.status, 200, JSON.stringify(chat.body).slice(0, 300));
      assert.equal(lastCall('/v1/chat/completions').body.messages[0].content[1].image_url.url, photo, 'the image reaches the provider whole');
      const response = await http('POST', '/v3/responses', {
        headers: await headersOf(),
        json: { model: 'm', max_output_tokens: 10, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Describe it.' }, { type: 'input_image', image_url: photo }] }] },
      });
      assert.equal(response.status, 200, JSON.stringify(response.body).slice(0, 300));
      // Base64 written as text is read by the model as text: it holds its tokens.
      const asText = photo.slice(0, 400_000);
      const refused = await http('POST', '/v3/chat/completions', { headers: await headersOf(), json: { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: asText }] } });
      assertError(refused, 429, 'quota_exceeded', '/v3/chat/completions');
      assert.match(refused.body.detail.message, /the request needs up to \d+ tokens/);
    });

    it('background responses are refused before the provider: their answer could never be read here', async () => {
      const before = upstream.calls.length;
      const res = await http('POST', '/v3/responses', { json: { model: 'm', input: 'Write a long essay.', background: true }, headers: { Authorization: `Bearer ${key}` } });
      assertError(res, 400, 'bad_request', '/v3/responses');
      assert.match(res.body.detail.message, /background mode is not offered/);
      assert.equal(upstream.calls.length, before);
      const foreground = await http('POST', '/v3/responses', { json: { model: 'm', input: 'Hi', background: false }, headers: { Authorization: `Bearer ${key}` } });
      assert.equal(foreground.status, 200);
    });

    it('charges input + output when the provider reports a total below them', async () => {
      const k = await newQuotaKey(http, { quota_type: 'chat', token_amount: 100_000 });
      upstream.respond((call) => ({ json: { ...chatCompletion(call, 'ok'), usage: { prompt_tokens: 60, completion_tokens: 40, total_tokens: 0 } } }));
      assert.equal((await http('POST', '/v3/chat/completions', { json: { ...chatBody, max_tokens: 50 }, headers: { Authorization: `Bearer ${k.key}` } })).status, 200);
      const settled = await eventually('the settlement', async () => {
        const list = await http('GET', '/api/quota-keys', { key: testStack().adminApiKey });
        const found = list.body.find((x: { id: string }) => x.id === k.id);
        return found?.tokens_reserved === 0 && found;
      });
      assert.equal(settled.tokens_consumed, 100);
    });

    it("429 without x-should-retry when only the key's requests in flight hold the room; a retry after they finish passes", async () => {
      const slowMessages = [{ role: 'user', content: 'slow' }];
      const held = estimateTokens(JSON.stringify(slowMessages)) + 100;
      const needed = estimateTokens(JSON.stringify(chatBody.messages)) + 100;
      // Room for either request alone, not for both at once.
      const k = await newQuotaKey(http, { quota_type: 'chat', token_amount: held + needed - 1 });
      const headers = { Authorization: `Bearer ${k.key}` };
      const isSlow = (call: UpstreamCall) => call.body?.messages?.[0]?.content === 'slow';
      upstream.respond((call) => ({ json: chatCompletion(call, 'ok', { usage: { prompt_tokens: 5, completion_tokens: 5 } }), delayMs: isSlow(call) ? 1500 : 0 }));
      const slow = http('POST', '/v3/chat/completions', { json: { model: 'm', messages: slowMessages, max_tokens: 100 }, headers });
      await upstream.waitForCalls(isSlow, 1);
      const refused = await http('POST', '/v3/chat/completions', { json: { ...chatBody, max_tokens: 100 }, headers });
      assertError(refused, 429, 'quota_exceeded', '/v3/chat/completions');
      assert.match(refused.body.detail.message, /held by this key's requests in flight/);
      assert.equal(refused.headers.get('x-should-retry'), null);
      assert.equal((await slow).status, 200);
      await eventually('the slow request settled', async () => {
        const list = await http('GET', '/api/quota-keys', { key: testStack().adminApiKey });
        return list.body.find((x: { id: string }) => x.id === k.id)?.tokens_reserved === 0;
      });
      assert.equal((await http('POST', '/v3/chat/completions', { json: { ...chatBody, max_tokens: 100 }, headers })).status, 200);
    });

    it('400 for a message role the OpenAI API does not have, before the provider is called', async () => {
      const before = upstream.calls.length;
      const res = await http('POST', '/v3/chat/completions', { json: { model: 'm', messages: [{ role: 'user', content: 'Hi' }, { role: 'wizard', content: 'x' }] }, headers: { Authorization: `Bearer ${key}` } });
      assertError(res, 400, 'bad_request', '/v3/chat/completions');
      assert.equal(res.body.detail.message, 'body.messages.1.role must be one of system, developer, user, assistant, tool, function');
      // What a user of the OpenAI client sees.
      await assert.rejects(
        v3Client(api.url, key).chat.completions.create({ model: 'm', messages: [{ role: 'wizard', content: 'x' }] } as any),
        (e: any) => e.status === 400 && e.message === '400 body.messages.0.role must be one of system, developer, user, assistant, tool, function' && e.param === 'messages.0.role' && e.code === 'bad_request',
      );
      assert.equal(upstream.calls.length, before);
    });

    it('400 for an invalid metadata.service, before the provider is called', async () => {
      const before = upstream.calls.length;
      for (const service of [{}, { character: {} }, { character: { name: 'A', mood: 'x' } }, { character: { name: 'A', knowledge_base: { partner: 'p' } } }, 'Ada']) {
        const res = await http('POST', '/v3/responses', { json: { model: 'm', input: 'x', metadata: { service } }, headers: { Authorization: `Bearer ${key}` } });
        assertError(res, 400, 'bad_request', '/v3/responses');
        assert.match(res.body.detail.message, /metadata/);
      }
      const named = async (service: unknown) => (await http('POST', '/v3/responses', { json: { model: 'm', input: 'x', metadata: { service } }, headers: { Authorization: `Bearer ${key}` } })).body.detail.message;
      assert.equal(await named({ character: { name: 'A', mood: 'x' } }), 'invalid metadata.service: metadata.service.character.mood is not allowed');
      assert.equal(
        await named({ character: { name: 'A', knowledge_base: { partner: 'a b', kb: 'k' } } }),
        'invalid metadata.service: metadata.service.character.knowledge_base.partner must be a partner name: 1-64 letters, digits, ".", "_" or "-", the first a letter or digit',
      );
      assert.equal(upstream.calls.length, before);
    });

    it('403 for a knowledge base outside the key\'s partner scope', async () => {
      const partner = await newPartner(http);
      const service = { character: { name: 'A', knowledge_base: { partner: partner.name, kb: 'any' } } };
      const res = await http('POST', '/v3/responses', { json: { model: 'm', input: 'x', metadata: { service } }, headers: { Authorization: `Bearer ${key}` } });
      assertError(res, 403, 'forbidden', '/v3/responses');
      const scoped = await newQuotaKey(http, { partner: partner.name });
      const missing = await http('POST', '/v3/responses', { json: { model: 'm', input: 'x', metadata: { service } }, headers: { Authorization: `Bearer ${scoped.key}` } });
      assertError(missing, 400, 'bad_request', '/v3/responses');
      assert.match(missing.body.detail.message, /character validation failed/);
    });

    it('400 for an invalid body (missing messages)', async () => {
      assertError(await http('POST', '/v3/chat/completions', { json: { model: 'm' }, headers: { Authorization: `Bearer ${key}` } }), 400, 'bad_request', '/v3/chat/completions');
    });

    it('provider 5xx without fallback_model: 502 with an OpenAI-shaped error, quota hold released', async () => {
      const k = await newQuotaKey(http, { token_amount: 5000 });
      upstream.respond(() => ({ status: 500, json: { error: { message: 'model exploded', type: 'server_error', code: null } } }));
      const res = await http('POST', '/v3/chat/completions', { json: { ...chatBody, max_tokens: 100 }, headers: { Authorization: `Bearer ${k.key}` } });
      assertError(res, 502, 'upstream_error', '/v3/chat/completions');
      assert.equal(res.body.error.message, 'model exploded');
      await assert.rejects(v3Client(api.url, k.key).responses.create({ model: 'm', input: 'x' }), (e: any) => e.status === 502 && /model exploded/.test(e.message));
      const mine = await eventually('the holds to be released', async () => {
        const list = await http('GET', '/api/quota-keys', { key: testStack().adminApiKey });
        const found = list.body.find((x: { id: string }) => x.id === k.id);
        return found?.tokens_reserved === 0 && found;
      });
      assert.equal(mine.tokens_consumed, 0, 'a request the model never answered costs nothing');
      assert.equal(mine.tokens_reserved, 0);
    });

    it('provider 5xx with fallback_model: the fallback answers (chat, responses, streaming)', async () => {
      upstream.respond((call) => (call.body.model === 'broken' ? { status: 503, json: { error: { message: 'overloaded', type: 'server_error' } } } : defaultResponder(call)));
      const before = upstream.calls.length;
      const c = await openai.chat.completions.create({ model: 'broken', fallback_model: 'steady', messages: [{ role: 'user', content: 'Hi' }] } as any);
      assert.equal(c.model, 'steady');
      assert.deepEqual(upstream.calls.slice(before).map((x) => x.body.model), ['broken', 'steady']);
      const r = await openai.responses.create({ model: 'broken', fallback_model: 'steady', input: 'Hi' } as any);
      assert.equal(r.model, 'steady');
      const s = await collect(await openai.chat.completions.create({ model: 'broken', fallback_model: 'steady', messages: [{ role: 'user', content: 'Hi' }], stream: true } as any) as any);
      assert.equal((s as any[]).map((x) => x.choices[0]?.delta?.content ?? '').join(''), 'Hello there, traveller.');
      assert.ok(upstream.calls.slice(before).every((x) => x.body.fallback_model === undefined));
    });

    it('both models failing: the last failure is answered', async () => {
      upstream.respond(() => ({ status: 500, json: { error: { message: 'down', type: 'server_error' } } }));
      const res = await http('POST', '/v3/responses', { json: { model: 'a', fallback_model: 'b', input: 'x' }, headers: { Authorization: `Bearer ${key}` } });
      assertError(res, 502, 'upstream_error', '/v3/responses');
      assert.match(res.body.detail.message, /model b/);
    });
  });

  describe('streaming behaviour', () => {
    it('a client that disconnects cancels the provider call', async () => {
      const chunks = Array.from({ length: 200 }, (_, i) => i);
      upstream.respond((call) => ({ sse: chatChunks(call, chunks.map((i) => `word${i} `).join('')), eventDelayMs: 50 }));
      const before = upstream.calls.length;
      const controller = new AbortController();
      const res = await fetch(`${api.url}/v3/chat/completions`, {
        method: 'POST', signal: controller.signal,
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'long' }], stream: true }),
      });
      const reader = res.body!.getReader();
      await reader.read();
      controller.abort();
      const call = upstream.calls[before]!;
      await eventually('the provider connection to close', async () => call.abortedAt !== undefined, 5000);
      assert.ok(call.abortedAt! - call.at < 5000, 'cancelled long before the 10 s answer would have ended');
    });

    it('sends keep-alive comments while a slow provider is quiet', async () => {
      upstream.respond((call) => ({ sse: chatChunks(call, 'slow answer'), eventDelayMs: 500 }));
      const res = await fetch(`${api.url}/v3/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true }),
      });
      assert.equal(res.headers.get('content-type'), 'text/event-stream; charset=utf-8');
      const text = await res.text();
      assert.match(text, /^: keep-alive$/m);
      assert.match(text, /data: \[DONE\]\n\n$/);
    });
  });

  describe('relaying streams as the provider sends them', () => {
    const streamOf = async (k: string, body: Record<string, unknown>, path = '/v3/chat/completions') => {
      const res = await fetch(`${api.url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${k}` }, body: JSON.stringify(body) });
      assert.equal(res.status, 200);
      return res.text();
    };
    const dataOf = (text: string) => text.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));

    it('events split across network reads, with CRLF line ends, arrive whole and in order', async () => {
      const chunk = (content: string) => JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: null }] });
      const wire = `data: ${chunk('Hel')}\r\n\r\ndata: ${chunk('lo, ')}\r\n\r\ndata: ${chunk('wörld')}\r\n\r\n`;
      // Cut in the middle of a line, between the CR and the LF of a line end, and inside the blank line that ends an event.
      const cuts = [17, wire.indexOf('\r\n\r\n') + 1, wire.indexOf('ö') + 1, wire.length - 3];
      const pieces = [0, ...cuts].map((from, i, all) => wire.slice(from, all[i + 1] ?? wire.length));
      upstream.respond(() => ({ sse: [...pieces, 'data: [DONE]\r\n\r\n'], eventDelayMs: 30, done: false }));
      const text = await streamOf(key, { model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true });
      const data = dataOf(text);
      assert.equal(data.at(-1), '[DONE]');
      assert.equal(data.slice(0, -1).map((d) => JSON.parse(d).choices[0].delta.content).join(''), 'Hello, wörld');
    });

    it('chunks with "usage": null pass as sent; the usage chunk, however spaced and wherever it arrives, is charged and kept from a client that did not ask', async () => {
      // OpenAI sends `"usage": null` in every chunk once usage is asked for; the last one carries it.
      const chunk = (delta: Record<string, string>, finish: string | null) => JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] }).replace(/\}$/, ', "usage": null}');
      const plain = `data: ${chunk({ role: 'assistant', content: '' }, null)}\n\ndata: ${chunk({ content: 'Grüße, ' }, null)}\n\n`;
      const usage = 'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage" :\t {"prompt_tokens":70,"completion_tokens":30,"total_tokens":100}}\n\n';
      const arrivals = [
        // the usage chunk alone, after the finish chunk
        [plain, `data: ${chunk({ content: 'world' }, null)}\n\n`, `data: ${chunk({}, 'stop')}\n\n`, usage, 'data: [DONE]\n\n'],
        // finish, usage and [DONE] in the piece that also carries the last words
        [plain, `data: ${chunk({ content: 'world' }, null)}\n\ndata: ${chunk({}, 'stop')}\n\n${usage}data: [DONE]\n\n`],
      ];
      for (const sse of arrivals) {
        const k = await newQuotaKey(http, { quota_type: 'chat', token_amount: 100_000 });
        upstream.respond(() => ({ sse, eventDelayMs: 20, done: false }));
        const data = dataOf(await streamOf(k.key, { model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true, max_tokens: 50 }));
        assert.equal(data.at(-1), '[DONE]');
        const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
        assert.equal(chunks.map((c) => c.choices[0].delta.content ?? '').join(''), 'Grüße, world');
        assert.deepEqual(chunks.map((c) => c.usage), [null, null, null, null], 'no usage chunk for a client that did not ask');
        const settled = await eventually('the settlement', async () => {
          const list = await http('GET', '/api/quota-keys', { key: testStack().adminApiKey });
          const found = list.body.find((x: { id: string }) => x.id === k.id);
          return found?.tokens_reserved === 0 && found;
        });
        assert.equal(settled.tokens_consumed, 100);
      }
    });

    it('an error event in the middle of a chat stream: the chunks before it, then the error', async () => {
      upstream.respond((call) => {
        const chunks = chatChunks(call, 'one two three').slice(0, 3);
        return { sse: [...chunks, { error: { message: 'the model went away', type: 'server_error', code: 'overloaded' } }], eventDelayMs: 5 };
      });
      const text = await streamOf(key, { model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true });
      const data = dataOf(text);
      assert.equal(data.slice(0, -1).map((d) => JSON.parse(d).choices[0].delta.content ?? '').join(''), 'one two ');
      assert.deepEqual(JSON.parse(data.at(-1)!).error, { message: 'the model went away', type: 'server_error', code: 'overloaded', param: null });
      assert.ok(!text.includes('[DONE]'));
    });

    it('a chat stream the provider ends mid-answer (no finish_reason, no [DONE]) ends in an error, not [DONE]; a finished one without [DONE] ends in [DONE]', async () => {
      upstream.respond((call) => ({ sse: chatChunks(call, 'one two three').slice(0, 3), done: false }));
      const cut = dataOf(await streamOf(key, { model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true }));
      assert.equal(cut.slice(0, -1).map((d) => JSON.parse(d).choices[0].delta.content ?? '').join(''), 'one two ');
      assert.equal(JSON.parse(cut.at(-1)!).error.code, 'upstream_invalid_response');
      assert.match(JSON.parse(cut.at(-1)!).error.message, /stream ended before the answer did/);
      assert.ok(!cut.includes('[DONE]'));

      upstream.respond((call) => ({ sse: chatChunks(call, 'one two three'), done: false }));
      const whole = dataOf(await streamOf(key, { model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true }));
      assert.equal(whole.at(-1), '[DONE]');
      assert.equal(whole.slice(0, -1).map((d) => JSON.parse(d).choices[0].delta.content ?? '').join(''), 'one two three');
    });

    it('a responses stream the provider ends before response.completed ends in an error event', async () => {
      upstream.respond((call) => ({ sse: responseEvents(call, 'The answer.').slice(0, 5), named: true, done: false }));
      const text = await streamOf(key, { model: 'm', input: 'x', stream: true }, '/v3/responses');
      const events = text.split('\n\n').filter(Boolean).map((e) => ({ type: /^event: (.*)$/m.exec(e)?.[1], data: JSON.parse(/^data: (.*)$/m.exec(e)![1]!) }));
      assert.ok(!events.some((e) => e.type === 'response.completed'));
      const last = events.at(-1)!;
      assert.equal(last.type, 'error');
      assert.equal(last.data.code, 'upstream_invalid_response');
      assert.equal(last.data.sequence_number, 5);
    });

    it("a 200 answer that is not JSON is a 502 saying the provider's answer could not be used", async () => {
      upstream.respond(() => ({ raw: '<html><body>Bad gateway page</body></html>', contentType: 'text/html' }));
      const res = await http('POST', '/v3/chat/completions', { json: { model: 'm', messages: [{ role: 'user', content: 'x' }] }, headers: { Authorization: `Bearer ${key}` } });
      assert.equal(res.status, 502);
      assert.equal(res.body.detail.code, 'upstream_error');
      assert.equal(res.body.error.code, 'upstream_invalid_response');
      assert.match(res.body.detail.message, /answer could not be used: its answer is not JSON \(text\/html/);
    });

    it('a responses stream that ends incomplete or failed is charged the usage it reports, not its whole hold', async () => {
      for (const end of ['response.incomplete', 'response.failed'] as const) {
        const k = await newQuotaKey(http, { quota_type: 'responses', token_amount: 100_000 });
        upstream.respond((call) => {
          const events = responseEvents(call, 'The answer was cut');
          const last = events.at(-1);
          const status = end === 'response.incomplete' ? 'incomplete' : 'failed';
          events[events.length - 1] = { ...last, type: end, response: { ...last.response, status, usage: { input_tokens: 30, output_tokens: 20, total_tokens: 50 } } };
          return { sse: events, named: true, done: false };
        });
        const text = await streamOf(k.key, { model: 'm', input: 'x', stream: true, max_output_tokens: 4000 }, '/v3/responses');
        assert.match(text, new RegExp(`event: ${end.replace('.', '\\.')}\n`));
        const settled = await eventually(`the settlement after ${end}`, async () => {
          const list = await http('GET', '/api/quota-keys', { key: testStack().adminApiKey });
          const found = list.body.find((x: { id: string }) => x.id === k.id);
          return found?.tokens_reserved === 0 && found;
        });
        assert.equal(settled.tokens_consumed, 50, end);
      }
    });

    it('an error event in the middle of a responses stream ends it with an error event numbered after the last', async () => {
      upstream.respond((call) => ({ sse: [...responseEvents(call, 'The answer.').slice(0, 4), { type: 'error', code: 'overloaded', message: 'the model went away', sequence_number: 4 }], named: true, done: false }));
      const text = await streamOf(key, { model: 'm', input: 'x', stream: true }, '/v3/responses');
      const events = text.split('\n\n').filter(Boolean).map((e) => ({ type: /^event: (.*)$/m.exec(e)?.[1], data: JSON.parse(/^data: (.*)$/m.exec(e)![1]!) }));
      assert.deepEqual(events.slice(0, 4).map((e) => e.type), ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
      const last = events.at(-1)!;
      assert.equal(last.type, 'error');
      assert.equal(last.data.message, 'the model went away');
      assert.equal(last.data.sequence_number, 4);
    });
  });

  describe('Server-Timing (MESSAGING_SERVER_TIMING)', () => {
    it('tells where the time before the provider answered went, on streams and JSON answers', async () => {
      const phases = (header: string | null): Record<string, number> => Object.fromEntries((header ?? '').split(', ').map((p) => /^(\w+);dur=(\d+\.\d{3})$/.exec(p)!).map((m) => [m[1], Number(m[2])]));
      for (const stream of [true, false]) {
        const res = await fetch(`${api.url}/v3/chat/completions`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
          body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream }),
        });
        assert.equal(res.status, 200);
        const t = phases(res.headers.get('server-timing'));
        // A stream's header goes out with its first events, which it times too (`relay`).
        assert.deepEqual(Object.keys(t), ['arrival', 'auth', 'route', 'admit', 'provider', ...(stream ? ['relay'] : [])], `stream: ${stream}`);
        assert.ok(Object.values(t).every((ms) => ms >= 0));
        await res.text();
      }
    });
  });

  describe('long inputs', () => {
    it('are admitted on their byte bound, without counting tokens first; the hold is brought down to the counted estimate once the stream runs, and near the limit the count decides', async () => {
      const content = 'The committee met on Tuesday to discuss the budget for the coming year. '.repeat(300); // ~21 KiB
      const messages = [{ role: 'user', content }];
      const estimate = estimateTokens(JSON.stringify(messages)) + 10;
      assert.ok(estimate < Buffer.byteLength(JSON.stringify(messages)) / 2, 'English holds about its tokens, not its bytes');
      const holdOf = async (id: string) => {
        const conn = new pg.Client({ connectionString: testStack().databaseUrl });
        await conn.connect();
        try {
          return (await conn.query<{ tokens: string; status: string }>('SELECT tokens, status FROM quota_reservations WHERE "quotaKeyId" = $1', [id])).rows;
        } finally {
          await conn.end();
        }
      };

      const roomy = await newQuotaKey(http, { token_amount: 1_000_000 });
      upstream.respond((call) => ({ sse: chatChunks(call, 'one two three four five six'), eventDelayMs: 150 }));
      const res = await fetch(`${api.url}/v3/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${roomy.key}` },
        body: JSON.stringify({ model: 'm', messages, stream: true, max_tokens: 10 }),
      });
      const reader = res.body!.getReader();
      await reader.read();
      await eventually('the hold to come down to the estimate', async () => {
        const [row] = await holdOf(roomy.id);
        return row?.status === 'pending' && Number(row.tokens) === estimate;
      }, 10_000);
      while (!(await reader.read()).done);

      // A key that the byte bound would not fit, but the estimate does: admitted all the same.
      const tight = await newQuotaKey(http, { token_amount: estimate + 5 });
      upstream.respond(defaultResponder);
      const ok = await http('POST', '/v3/chat/completions', { json: { model: 'm', messages, max_tokens: 10 }, headers: { Authorization: `Bearer ${tight.key}` } });
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
      const [held] = await holdOf(tight.id);
      assert.equal(Number(held!.tokens), estimate);
    });
  });

  describe('settlement never delays the client', () => {
    /** Holds the key's row lock, as a long admission would: a settlement waits for it, the client must not. */
    async function lockKeyRow(id: string) {
      const conn = new pg.Client({ connectionString: testStack().databaseUrl });
      await conn.connect();
      await conn.query('BEGIN');
      await conn.query('SELECT 1 FROM quota_keys WHERE id = $1 FOR UPDATE', [id]);
      return async () => {
        await conn.query('COMMIT');
        await conn.end();
      };
    }
    const usageOf = async (id: string) => (await http('GET', '/api/quota-keys', { key: testStack().adminApiKey })).body.find((x: { id: string }) => x.id === id);

    it('a stream ends, and a JSON answer is sent, while their settlements still wait', async () => {
      const k = await newQuotaKey(http, { token_amount: 100_000 });
      // Stream: the key's row is taken after the admission (the first chunk has arrived) and kept
      // until the client has the whole stream.
      upstream.respond((call) => ({ sse: chatChunks(call, 'a b c d e f'), eventDelayMs: 40 }));
      const res = await fetch(`${api.url}/v3/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${k.key}` },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true, max_tokens: 50 }),
      });
      const reader = res.body!.getReader();
      const first = await reader.read();
      const unlock = await lockKeyRow(k.id);
      try {
        let text = new TextDecoder().decode(first.value);
        for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
        assert.match(text, /data: \[DONE\]\n\n$/, 'the whole stream arrived');
        assert.ok((await usageOf(k.id)).tokens_reserved > 0, 'its settlement is still waiting for the row');
      } finally {
        await unlock();
      }
      await eventually('the stream to be settled', async () => (await usageOf(k.id)).tokens_reserved === 0);

      // JSON: the provider answers once the row is taken.
      upstream.respond((call) => ({ json: chatCompletion(call, 'done'), delayMs: 300 }));
      const before = upstream.calls.length;
      const answer = http('POST', '/v3/chat/completions', { json: { model: 'm', messages: [{ role: 'user', content: 'x' }], max_tokens: 50 }, headers: { Authorization: `Bearer ${k.key}` } });
      await upstream.waitForCalls((c) => upstream.calls.indexOf(c) >= before, 1);
      const unlockAgain = await lockKeyRow(k.id);
      try {
        assert.equal((await answer).status, 200, 'answered');
        assert.ok((await usageOf(k.id)).tokens_reserved > 0, 'its settlement is still waiting for the row');
      } finally {
        await unlockAgain();
      }
      const settled = await eventually('the answer to be settled', async () => {
        const u = await usageOf(k.id);
        return u.tokens_reserved === 0 && u;
      });
      assert.ok(settled.tokens_consumed > 0);
    });
  });

  describe('quota admission under concurrency', () => {
    it('racing requests of one key admit exactly what the amount covers', async () => {
      const messages = [{ role: 'user', content: 'race' }];
      const maxTokens = 50;
      const bound = estimateTokens(JSON.stringify(messages)) + maxTokens;
      const fits = 4;
      const k = await newQuotaKey(http, { quota_type: 'chat', token_amount: bound * fits });
      // The provider reports exactly the held bound, so settled usage never frees room for more.
      upstream.respond((call) => ({ json: chatCompletion(call, 'ok', { usage: { prompt_tokens: bound - maxTokens, completion_tokens: maxTokens } }), delayMs: 100 }));
      const results = await Promise.all(
        Array.from({ length: 16 }, () => http('POST', '/v3/chat/completions', { json: { model: 'm', messages, max_tokens: maxTokens }, headers: { Authorization: `Bearer ${k.key}` } })),
      );
      const statuses = results.map((r) => r.status).sort();
      assert.equal(statuses.filter((s) => s === 200).length, fits, JSON.stringify(statuses));
      assert.equal(statuses.filter((s) => s === 429).length, 16 - fits);
      const mine = await eventually('the settlements', async () => {
        const list = await http('GET', '/api/quota-keys', { key: testStack().adminApiKey });
        const found = list.body.find((x: { id: string }) => x.id === k.id);
        return found?.tokens_reserved === 0 && found;
      });
      assert.equal(mine.tokens_consumed, bound * fits);
      assert.equal(mine.tokens_remaining, 0);
    });
  });

  describe('the provider call during admission (MESSAGING_CALL_DURING_ADMISSION_SECONDS)', () => {
    /** Holds a quota key's row locked, so that its admission waits until `release`. */
    async function lockKey(id: string) {
      const locker = new pg.Client({ connectionString: testStack().databaseUrl });
      await locker.connect();
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM quota_keys WHERE id = $1 FOR UPDATE', [id]);
      return async () => {
        await locker.query('COMMIT');
        await locker.end();
      };
    }
    const chat = (k: string, content: string, stream = false) =>
      http('POST', '/v3/chat/completions', { json: { model: 'm', messages: [{ role: 'user', content }], max_tokens: 20, stream }, headers: { Authorization: `Bearer ${k}` } });
    const callWith = (content: string) => (call: UpstreamCall) => call.body?.messages?.some((m: { content?: unknown }) => m.content === content);

    it('calls the provider while the hold of a key with known room is made; nothing reaches the client before the hold', async () => {
      const k = await newQuotaKey(http, { quota_type: 'chat', token_amount: 100_000 });
      assert.equal((await chat(k.key, 'learn the room')).status, 200);
      const release = await lockKey(k.id);
      let answered = false;
      const pending = chat(k.key, 'early call', true).finally(() => (answered = true));
      try {
        await upstream.waitForCalls(callWith('early call'), 1, 10_000);
        await holdsFor('no answer while the hold waits', {
          ms: 200,
          why: 'the provider fake answers at once: an answer not held back for the hold would reach the client within a few ms',
        }, () => !answered);
      } finally {
        await release();
      }
      const res = await pending;
      assert.equal(res.status, 200);
      assert.match(String(res.body), /data: \[DONE\]/, 'the whole stream');
      const mine = await eventually('the settlement', async () => {
        const list = await http('GET', '/api/quota-keys', { key: testStack().adminApiKey });
        const found = list.body.find((x: { id: string }) => x.id === k.id);
        return found?.tokens_reserved === 0 && found;
      });
      assert.ok(mine.tokens_consumed > 0, 'both requests settled');
    });

    it('a key this process knows nothing of is admitted first: no provider call while its hold waits', async () => {
      const k = await newQuotaKey(http, { quota_type: 'chat', token_amount: 100_000 });
      const release = await lockKey(k.id);
      const pending = chat(k.key, 'admitted first');
      try {
        await holdsFor('the provider waits for the admission', {
          ms: 300,
          why: 'a request reaches the API and its admission within a few ms here: a provider call that did not wait for it would follow at once',
        }, () => upstream.calls.filter(callWith('admitted first')).length === 0);
      } finally {
        await release();
      }
      assert.equal((await pending).status, 200);
      assert.equal(upstream.calls.filter(callWith('admitted first')).length, 1);
    });

    it('a forecast gone wrong: the hold is refused, the provider call is aborted, the client gets 429 and nothing is held or charged', async () => {
      const k = await newQuotaKey(http, { quota_type: 'chat', token_amount: 100_000 });
      assert.equal((await chat(k.key, 'learn the room')).status, 200);
      const consumed = await eventually('the settlement', async () => {
        const list = await http('GET', '/api/quota-keys', { key: testStack().adminApiKey });
        const found = list.body.find((x: { id: string }) => x.id === k.id);
        return found?.tokens_reserved === 0 && found.tokens_consumed;
      });
      // Another replica used the key up meanwhile (as far as this process knows, it still has room).
      const db = new pg.Client({ connectionString: testStack().databaseUrl });
      await db.connect();
      await db.query('UPDATE quota_keys SET "tokensConsumed" = "tokenAmount" WHERE id = $1', [k.id]);
      await db.end();
      upstream.respond((call) => (callWith('too late')(call) ? { json: chatCompletion(call, 'never seen'), delayMs: 3000 } : defaultResponder(call)));
      const res = await chat(k.key, 'too late');
      assert.equal(res.status, 429, JSON.stringify(res.body));
      assert.equal(res.body.detail.code, 'quota_exceeded');
      assert.ok(!JSON.stringify(res.body).includes('never seen'));
      const [call] = upstream.calls.filter(callWith('too late'));
      assert.ok(call, 'the provider was called during the admission');
      await eventually('the aborted provider call', async () => call.abortedAt !== undefined);
      const list = await http('GET', '/api/quota-keys', { key: testStack().adminApiKey });
      const after = list.body.find((x: { id: string }) => x.id === k.id);
      assert.equal(after.tokens_reserved, 0);
      assert.equal(after.tokens_consumed, 100_000, `unchanged by the refused request (was ${consumed} before the key was used up)`);
    });
  });

  describe('a key revoked through another replica (MESSAGING_KEY_CACHE_SECONDS)', () => {
    it('is refused past the cache time without a provider call, where this process holds an escrow slice of it or not', async () => {
      // Keys verified for 1 s here; slices lent from for 30 s, so this process still holds one.
      const replica = await startApi({ OPENAI_BASE_URL: upstream.baseUrl, MESSAGING_KEY_CACHE_SECONDS: '1', MESSAGING_QUOTA_ESCROW_SECONDS: '30' });
      const db = new pg.Client({ connectionString: testStack().databaseUrl });
      await db.connect();
      try {
        const chatWith = (key: string) => (content: string) =>
          client(replica.url)('POST', '/v3/chat/completions', { json: { model: 'm', messages: [{ role: 'user', content }], max_tokens: 20 }, headers: { Authorization: `Bearer ${key}` } });
        const noProviderCall = (what: string, content: string) =>
          holdsFor(what, { ms: 300, why: 'a call begun during the admission reaches the provider fake within a few ms' }, () => upstream.calls.filter((call) => call.body?.messages?.[0]?.content === content).length === 0);
        const revokeElsewhere = async (id: string) => {
          await db.query('UPDATE quota_keys SET "revokedAt" = now() WHERE id = $1', [id]);
          // Past the cache time, with no request meanwhile (a request would have it looked up again).
          await new Promise((resolve) => setTimeout(resolve, 1_500));
        };

        const k = await newQuotaKey(http, { quota_type: 'chat', token_amount: 1_000_000 });
        const chat = chatWith(k.key);
        for (const n of [1, 2, 3]) assert.equal((await chat(`busy ${n}`)).status, 200);
        const slices = async () => (await db.query(`SELECT 1 FROM quota_reservations WHERE "quotaKeyId" = $1 AND endpoint = 'escrow' AND status = 'pending'`, [k.id])).rowCount;
        await eventually('an escrow slice of the busy key', async () => (await slices()) === 1);
        await revokeElsewhere(k.id);
        const refused = await chat('after the revocation');
        assert.equal(refused.status, 401, JSON.stringify(refused.body));
        assert.equal(refused.body.detail.code, 'invalid_api_key');
        await noProviderCall('no provider call for the revoked key', 'after the revocation');

        // A key used once (no slice) is served past the cache time without a lookup; its admission refuses it.
        const once = await newQuotaKey(http, { quota_type: 'chat', token_amount: 1_000_000 });
        const chatOnce = chatWith(once.key);
        assert.equal((await chatOnce('once')).status, 200);
        await revokeElsewhere(once.id);
        const refusedOnce = await chatOnce('once revoked');
        assert.equal(refusedOnce.status, 401, JSON.stringify(refusedOnce.body));
        await noProviderCall('no provider call during the admission of a key not verified lately', 'once revoked');
      } finally {
        await db.end();
        await replica.close();
      }
    });
  });
});
