import assert from 'node:assert/strict';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { chatCompletion, startOpenAiUpstream, type OpenAiUpstream, type UpstreamCall } from '../support/openai-upstream.js';
import { newQuotaKey } from './support.js';
import { testStack } from '../support/stack.js';
import { legacyCompletionWorkflowId } from '../../lib/contracts/legacy-completion.js';

/** Legacy /v2/completions: request, poll, retention, failures, keys. */
describe('messaging v2: legacy completions (deprecated)', function () {
  let upstream: OpenAiUpstream;
  let api: RunningApi;
  let worker: RunningWorker;
  let http: ReturnType<typeof client>;
  let key: string;
  let env: Record<string, string>;

  const echo = (call: UpstreamCall) => ({ json: chatCompletion(call, `echo: ${call.body.messages.at(-1).content}`) });

  before(async function () {
    this.timeout(120_000);
    upstream = await startOpenAiUpstream(echo);
    env = { OPENAI_BASE_URL: upstream.baseUrl, LEGACY_COMPLETION_RETENTION_SECONDS: '4', LEGACY_COMPLETION_MODEL: 'legacy-model' };
    api = await startApi(env);
    worker = await startWorker(env);
    http = client(api.url);
    ({ key } = await newQuotaKey(http, { quota_type: 'legacy' }));
  });
  beforeEach(() => upstream.respond(echo));
  after(async () => {
    await worker?.kill();
    await api?.close();
    await upstream?.close();
  });

  const input = {
    messages: [{ role: 'user', content: 'Hello keeper' }],
    character: { name: 'Keeper', prompt: 'You are {{name}}, keeper of {{place}}.' },
    character_params: { place: 'Skerryvore' },
  };

  it('answers {id, state: in-progress}, runs a workflow, and the poll returns the output; after retention it is gone (404)', async () => {
    const res = await http('POST', '/v2/completions', { headers: { 'X-Api-Key': key }, json: { input } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(Object.keys(res.body).sort(), ['id', 'state']);
    assert.equal(res.body.state, 'in-progress');
    assert.match(res.body.id, /^\/v2\/completions\/[0-9a-f-]{36}$/);
    const id = res.body.id.split('/').at(-1);
    const done = await eventually('the completion to finish', async () => {
      const r = await http('GET', res.body.id, { headers: { 'X-Api-Key': key } });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      return r.body.state === 'completed' ? r.body : null;
    });
    assert.equal(done.id, res.body.id);
    assert.equal(done.output.message.content, 'echo: Hello keeper');
    // The id filled into the documented path GET /v2/completions/{id}, as a client following the spec builds it.
    const documented = await http('GET', `/v2/completions/${res.body.id}`, { headers: { 'X-Api-Key': key } });
    assert.equal(documented.status, 200, JSON.stringify(documented.body));
    assert.deepEqual(documented.body, done);
    assert.equal((await http('GET', `/v2/completions/${res.body.id}`)).status, 401);
    const encoded = await http('GET', `/v2/completions/${encodeURIComponent(res.body.id)}`, { headers: { 'X-Api-Key': key } });
    assert.deepEqual(encoded.body, done);
    const sent = upstream.callsTo('/v1/chat/completions').at(-1)!.body;
    assert.equal(sent.model, 'legacy-model');
    assert.deepEqual(sent.messages[0], { role: 'system', content: 'You are Keeper, keeper of Skerryvore.' });
    const description = await api.deps.temporal.workflow.getHandle(legacyCompletionWorkflowId(id)).describe();
    assert.equal(description.type, 'legacyCompletion');
    await eventually('the result to expire', async () => (await http('GET', res.body.id, { headers: { 'X-Api-Key': key } })).status === 404, 20_000);
    const gone = await http('GET', res.body.id, { headers: { 'X-Api-Key': key } });
    assert.equal(gone.body.detail.code, 'not_found');
    assert.match(gone.body.detail.message, /expired/);
  });

  it("charges the provider's usage when it reports input and output tokens without a total", async () => {
    const k = await newQuotaKey(http, { quota_type: 'legacy', token_amount: 100_000 });
    upstream.respond((call) => {
      const answer = chatCompletion(call, 'counted');
      return { json: { ...answer, usage: { prompt_tokens: 70, completion_tokens: 30 } } };
    });
    const res = await http('POST', '/v2/completions', { headers: { 'X-Api-Key': k.key }, json: { input } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const usage = await eventually('the completion to be settled', async () => {
      const list = await http('GET', '/api/quota-keys', { key: testStack().adminApiKey });
      const found = list.body.find((x: { id: string }) => x.id === k.id);
      return found?.tokens_reserved === 0 && found.tokens_consumed > 0 && found;
    });
    assert.equal(usage.tokens_consumed, 100, 'input + output, not the whole hold');
  });

  it('a provider failure ends in state failed', async () => {
    upstream.respond(() => ({ status: 500, json: { error: { message: 'down', type: 'server_error' } } }));
    const res = await http('POST', '/v2/completions', { headers: { 'X-Api-Key': key }, json: { input } });
    assert.equal(res.status, 200);
    const failed = await eventually('the completion to fail', async () => {
      const r = await http('GET', res.body.id, { headers: { 'X-Api-Key': key } });
      return r.body.state === 'failed' ? r.body : null;
    });
    assert.equal(failed.output, null);
    assert.match(failed.error, /down/);
  });

  it('a worker killed while the model call is in flight: the call is not made again, the completion fails saying why, and its hold is charged', async () => {
    const token = `lost-${Date.now()}`;
    upstream.respond((call) => ({ json: chatCompletion(call, 'too late'), delayMs: JSON.stringify(call.body).includes(token) ? 30_000 : 0 }));
    const calls = () => upstream.callsTo('/v1/chat/completions').filter((c) => JSON.stringify(c.body).includes(token)).length;
    const res = await http('POST', '/v2/completions', { headers: { 'X-Api-Key': key }, json: { input: { messages: [{ role: 'user', content: token }] } } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    await eventually('the model call to be in flight', async () => calls() === 1);
    await worker.kill('SIGKILL');
    worker = await startWorker(env);
    const failed = await eventually('the completion to fail', async () => {
      const r = await http('GET', res.body.id, { headers: { 'X-Api-Key': key } });
      return r.body.state === 'failed' ? r.body : null;
    }, 90_000);
    assert.match(failed.error, /worker was lost while the model call was in flight; it was not repeated/);
    assert.equal(calls(), 1, 'the model was asked once');
    const hold = await api.deps.db.quotaReservation.findUnique({ where: { operationKey: `legacy-completion-${res.body.id.split('/').at(-1)}` } });
    assert.equal(hold?.status, 'settled');
  });

  it('needs a legacy (or any) quota key; other keys cannot read it', async () => {
    assert.equal((await http('POST', '/v2/completions', { json: { input } })).status, 401);
    const chatKey = await newQuotaKey(http, { quota_type: 'chat' });
    assert.equal((await http('POST', '/v2/completions', { headers: { 'X-Api-Key': chatKey.key }, json: { input } })).status, 403);
    const res = await http('POST', '/v2/completions', { headers: { 'X-Api-Key': key }, json: { input } });
    const other = await newQuotaKey(http, { quota_type: 'legacy' });
    assert.equal((await http('GET', res.body.id, { headers: { 'X-Api-Key': other.key } })).status, 404);
    assert.equal((await http('POST', '/v2/completions', { headers: { 'X-Api-Key': key }, json: { input: { messages: [] } } })).status, 400);
    assert.equal((await http('POST', '/v2/completions', { headers: { 'X-Api-Key': key }, json: { input: { ...input, audio_files: ['a.wav'] } } })).status, 501);
  });

  it('is marked deprecated in the OpenAPI document', async () => {
    const doc = await http('GET', '/openapi.json');
    assert.equal(doc.body.paths['/v2/completions'].post.deprecated, true);
    assert.equal(doc.body.paths['/v2/completions/{id}'].get.deprecated, true);
    assert.ok(!doc.body.paths['/v3/responses'].post.deprecated);
  });
});
