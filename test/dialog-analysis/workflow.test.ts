import assert from 'node:assert/strict';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newPartner } from '../support/fixtures.js';
import { chatCompletion, refusalCompletion, responseFormatRejected, startOpenAiUpstream, jsonCompletion, type OpenAiUpstream, type UpstreamCall } from '../support/openai-upstream.js';
import { dialogAnalysisWorkflowId, progressQuery } from '../../lib/contracts/dialog-analysis.js';
import { searchAttributes } from '../../lib/contracts/search-attributes.js';
import {
  callOf,
  create,
  dialogInput,
  feedbackMap,
  forDialog,
  invalidAnswer,
  json,
  newToken,
  profileFull,
  profileMap,
  uuidOf,
  validAnswer,
  waitForState,
} from './support.js';

/**
 * The workflow against the local OpenAI-protocol server: a worker process, the API in-process, on
 * a task queue of their own. Each test's dialog carries a token, and the upstream answers only that
 * dialog's calls with the test's script.
 */
describe('dialog analysis workflow: answers conform to the schemas, or the analysis fails', function () {
  let upstream: OpenAiUpstream;
  let api: RunningApi;
  let worker: RunningWorker;
  let http: ReturnType<typeof client>;
  let partner: { name: string; key: string };
  const env = (upstreamUrl: string) => ({
    TEMPORAL_TASK_QUEUE: `dialog-${process.pid}`,
    OPENAI_BASE_URL: upstreamUrl,
    DIALOG_ANALYSIS_MODEL: 'dialog-model',
    DIALOG_ANALYSIS_RETENTION_SECONDS: '600',
    DIALOG_ANALYSIS_RATE_LIMIT_PER_MINUTE: '1000',
    DIALOG_ANALYSIS_VALIDATION_TIMEOUT_MS: '1000',
    DIALOG_ANALYSIS_MAX_OUTAGE_SECONDS: '4',
  });

  before(async function () {
    this.timeout(120_000);
    upstream = await startOpenAiUpstream();
    api = await startApi(env(upstream.baseUrl));
    worker = await startWorker(env(upstream.baseUrl));
    http = client(api.url);
    partner = await newPartner(http);
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
    await upstream?.close();
  });

  const callsOf = (token: string) => upstream.calls.filter(callOf(token));
  const progressOf = (path: string) => api.deps.temporal.workflow.getHandle(dialogAnalysisWorkflowId(uuidOf(path))).query(progressQuery);
  /**
   * The progress of a finished analysis. Its row shows the outcome as soon as the model call's
   * activity stored it; the run counts the attempt once that activity has returned: wait on the run.
   */
  const finishedProgress = (path: string) =>
    eventually('the run to record its outcome', async () => {
      const progress = await progressOf(path);
      return progress.state === 'in-progress' ? null : progress;
    });
  const lastUserMessage = (call: UpstreamCall) => call.body.messages.at(-1).content as string;

  it('a schema-valid answer completes: {id, state, created_at, server_runtime, output}, asked once with structured outputs', async () => {
    const token = newToken();
    upstream.respond(forDialog(token, [json(validAnswer)]));
    const created = await create(http, partner.key, dialogInput(token, { language: 'de', current_profile: { name: 'Ana', level: 'A1' }, prompt_extra_text: 'Be encouraging.' }));
    const done = await waitForState(http, partner.key, created.id, 'completed');
    assert.deepEqual(Object.keys(done), ['id', 'state', 'created_at', 'server_runtime', 'output']);
    assert.equal(JSON.stringify(done.output), JSON.stringify(validAnswer), 'the output, in the order the model wrote it');
    assert.equal(typeof done.server_runtime, 'number');
    assert.ok(done.server_runtime > 0 && done.server_runtime < 60);

    const calls = callsOf(token);
    assert.equal(calls.length, 1);
    const sent = calls[0]!.body;
    assert.equal(sent.model, 'dialog-model');
    assert.equal(sent.response_format.type, 'json_schema');
    assert.equal(sent.response_format.json_schema.strict, true);
    const schema = sent.response_format.json_schema.schema;
    assert.deepEqual(schema.required, ['profile', 'feedback']);
    assert.deepEqual(schema.properties.profile.required, ['name', 'age', 'level']);
    assert.equal(schema.properties.profile.additionalProperties, false);
    assert.deepEqual(schema.properties.profile.properties.level.enum, ['A1', 'A2', 'B1', 'B2']);
    const [system, user] = sent.messages;
    assert.equal(system.role, 'system');
    assert.match(system.content, /written in this language: de\./);
    assert.ok(system.content.includes(JSON.stringify(feedbackMap.summary)), 'the caller schemas are in the prompt');
    assert.ok(system.content.includes(JSON.stringify(profileMap.age)));
    assert.match(system.content, /Additional instructions:\nBe encouraging\./);
    assert.ok(user.content.includes('{"name":"Ana","level":"A1"}'), 'the current profile');
    assert.ok(user.content.includes('Ich heiße Ana und bin 34.'), 'the dialog');

    const description = await api.deps.temporal.workflow.getHandle(dialogAnalysisWorkflowId(uuidOf(created.id))).describe();
    assert.equal(description.typedSearchAttributes.get(searchAttributes.partner), partner.name);
    await eventually('JobStatus completed', async () =>
      (await api.deps.temporal.workflow.getHandle(dialogAnalysisWorkflowId(uuidOf(created.id))).describe()).typedSearchAttributes.get(searchAttributes.jobStatus) === 'completed');
    const progress = await progressOf(created.id);
    assert.equal(progress.state, 'completed');
    assert.equal(progress.step, 'retained');
    assert.equal(progress.attempts, 1);
  });

  it('an invalid answer is retried with the validation errors, and the corrected answer completes', async () => {
    const token = newToken();
    upstream.respond(forDialog(token, [json(invalidAnswer), json(validAnswer)]));
    const created = await create(http, partner.key, dialogInput(token));
    const done = await waitForState(http, partner.key, created.id, 'completed');
    assert.deepEqual(done.output, validAnswer);
    const calls = callsOf(token);
    assert.equal(calls.length, 2);
    const second = calls[1]!.body.messages;
    assert.deepEqual(second.at(-2), { role: 'assistant', content: JSON.stringify(invalidAnswer) });
    assert.match(second.at(-1).content, /does not conform to the schemas:\n- profile\.age: must be integer\nAnswer again/);
    assert.equal((await finishedProgress(created.id)).attempts, 2);
  });

  it('an answer that never conforms ends failed after DIALOG_ANALYSIS_MAX_ATTEMPTS (3) calls, with the reason', async () => {
    const token = newToken();
    upstream.respond(forDialog(token, [json(invalidAnswer)]));
    const created = await create(http, partner.key, dialogInput(token));
    const failed = await waitForState(http, partner.key, created.id, 'failed');
    assert.deepEqual(Object.keys(failed), ['id', 'state', 'created_at', 'error']);
    assert.match(failed.error, /did not conform to the schemas after 3 attempts: profile\.age: must be integer/);
    assert.equal(callsOf(token).length, 3);
    await eventually('JobStatus failed', async () =>
      (await api.deps.temporal.workflow.getHandle(dialogAnalysisWorkflowId(uuidOf(created.id))).describe()).typedSearchAttributes.get(searchAttributes.jobStatus) === 'failed');
  });

  it('a schema no answer can satisfy is accepted, and the analysis ends failed, never completed', async () => {
    const token = newToken();
    upstream.respond(forDialog(token, [json({ profile: { age: 7 }, feedback: validAnswer.feedback })]));
    const created = await create(http, partner.key, dialogInput(token, { profile_schema: { age: { type: 'integer', minimum: 10, maximum: 5 } } }));
    const failed = await waitForState(http, partner.key, created.id, 'failed');
    assert.match(failed.error, /profile\.age: must be >= 10/);
    assert.equal(callsOf(token).length, 3);
  });

  it('schemas strict mode cannot express go in JSON mode with the schemas in the prompt; ajv still checks what the mode cannot', async () => {
    const token = newToken();
    const profile = {
      scores: { type: 'object', additionalProperties: { type: 'integer' } },
      code: { type: 'string', pattern: '^[A-Z]{3}$' },
      tags: { type: 'array', items: { anyOf: [{ type: 'string', maxLength: 3 }, { type: 'integer', minimum: 0 }] } },
    };
    const answer = (code: string, tags: unknown[]) => ({ profile: { scores: { grammar: 3 }, code, tags }, feedback: validAnswer.feedback });
    upstream.respond(forDialog(token, [json(answer('abc', ['abcd', -1, true, 'ok'])), json(answer('ABC', ['ok', 4]))]));
    const created = await create(http, partner.key, dialogInput(token, { profile_schema: profile }));
    const done = await waitForState(http, partner.key, created.id, 'completed');
    assert.deepEqual(done.output, answer('ABC', ['ok', 4]));
    const calls = callsOf(token);
    assert.equal(calls.length, 2);
    assert.deepEqual(calls[0]!.body.response_format, { type: 'json_object' });
    assert.ok(calls[0]!.body.messages[0].content.includes('"additionalProperties":{"type":"integer"}'));
    assert.match(lastUserMessage(calls[1]!), /profile\.code: must match pattern "\^\[A-Z\]\{3\}\$"/);
    // Of alternatives, the one of the value's type says what is wrong; a value of no alternative's type is told the types.
    const tagLines = lastUserMessage(calls[1]!).split('\n').filter((line) => line.includes('profile.tags'));
    assert.deepEqual(tagLines, ['- profile.tags.0: must NOT have more than 3 characters', '- profile.tags.1: must be >= 0', '- profile.tags.2: must be string or integer']);
  });

  it('a model without structured outputs: the 400 about response_format switches to JSON mode without using an attempt', async () => {
    const token = newToken();
    upstream.respond(forDialog(token, [(call) => (call.body.response_format?.type === 'json_schema' ? responseFormatRejected : { json: jsonCompletion(call, validAnswer) })]));
    const created = await create(http, partner.key, dialogInput(token));
    const done = await waitForState(http, partner.key, created.id, 'completed');
    assert.deepEqual(done.output, validAnswer);
    assert.deepEqual(callsOf(token).map((c) => c.body.response_format.type), ['json_schema', 'json_object']);
    const progress = await finishedProgress(created.id);
    assert.equal(progress.attempts, 1);
    assert.equal(progress.responseMode, 'json_object');
    const row = await api.deps.db.dialogAnalysis.findUnique({ where: { id: uuidOf(created.id) } });
    assert.equal(row!.responseMode, 'json_object');
  });

  it('an answer that is not JSON, and a refusal, are retried with what was wrong', async () => {
    const notJson = newToken();
    const refused = newToken();
    const r1 = forDialog(notJson, [(call) => ({ json: chatCompletion(call, 'Sure! Here it is') }), json(validAnswer)]);
    const r2 = forDialog(refused, [(call) => ({ json: refusalCompletion(call, "I can't help with that.") }), json(validAnswer)]);
    upstream.respond((call, i) => (callOf(notJson)(call) ? r1(call, i) : r2(call, i)));
    const [a, b] = await Promise.all([create(http, partner.key, dialogInput(notJson)), create(http, partner.key, dialogInput(refused))]);
    assert.deepEqual((await waitForState(http, partner.key, a.id, 'completed')).output, validAnswer);
    assert.deepEqual((await waitForState(http, partner.key, b.id, 'completed')).output, validAnswer);
    assert.match(lastUserMessage(callsOf(notJson)[1]!), /answer: is not valid JSON/);
    const retried = callsOf(refused)[1]!.body.messages;
    assert.deepEqual(retried.at(-2), { role: 'assistant', content: "I can't help with that." });
    assert.match(retried.at(-1).content, /answer: the model refused: I can't help with that\./);
  });

  it("a full-form schema with optional members: strict mode makes them nullable, and a null the caller's schema does not allow is dropped", async () => {
    const token = newToken();
    const answer = { profile: { name: 'Ana', nickname: null, address: { city: 'Bonn', zip: null } }, feedback: validAnswer.feedback };
    upstream.respond(forDialog(token, [json(answer)]));
    const created = await create(http, partner.key, dialogInput(token, { profile_schema: profileFull }));
    const done = await waitForState(http, partner.key, created.id, 'completed');
    assert.deepEqual(done.output.profile, { name: 'Ana', address: { city: 'Bonn' } });
    const skeleton = callsOf(token)[0]!.body.response_format.json_schema.schema.properties.profile;
    assert.deepEqual(skeleton.required, ['name', 'nickname', 'address']);
    assert.deepEqual(skeleton.properties.nickname, { anyOf: [{ type: 'string' }, { type: 'null' }] });
  });

  it('transient provider failures (503, 429) are waited out without using attempts, 1, 2, 4 ... s apart; failures in a row for DIALOG_ANALYSIS_MAX_OUTAGE_SECONDS (4) fail the analysis', async () => {
    // The provider asks for 100 ms; the exponential step is never shortened, so an outage costs few calls.
    const unavailable = { status: 503, json: { error: { message: 'overloaded', type: 'server_error' } }, headers: { 'retry-after-ms': '100' } };
    const limited = { status: 429, json: { error: { message: 'slow down', type: 'rate_limit_error' } }, headers: { 'retry-after-ms': '200' } };
    const recovers = newToken();
    const never = newToken();
    const twoOutages = newToken();
    const r1 = forDialog(recovers, [unavailable, limited, json(validAnswer)]);
    const r2 = forDialog(never, [unavailable]);
    // An answer between two outages ends the first: each is waited out on its own.
    const r3 = forDialog(twoOutages, [unavailable, unavailable, json(invalidAnswer), unavailable, unavailable, json(validAnswer)]);
    upstream.respond((call, i) => (callOf(recovers)(call) ? r1(call, i) : callOf(never)(call) ? r2(call, i) : r3(call, i)));
    const [a, b, c] = await Promise.all([
      create(http, partner.key, dialogInput(recovers)),
      create(http, partner.key, dialogInput(never)),
      create(http, partner.key, dialogInput(twoOutages)),
    ]);
    assert.deepEqual((await waitForState(http, partner.key, a.id, 'completed')).output, validAnswer);
    const progress = await finishedProgress(a.id);
    assert.equal(progress.transientFailures, 2);
    assert.equal(progress.attempts, 1);
    const failed = await waitForState(http, partner.key, b.id, 'failed');
    // The message gives the outage as measured: the window, plus the last call's round trip (which
    // rounds up to 5 s on a loaded machine).
    const over = /^the model API failed 4 times in a row over (\d+) seconds: .*overloaded/.exec(failed.error);
    assert.ok(over && Number(over[1]) >= 4, failed.error);
    const times = callsOf(never).map((call) => call.at);
    assert.equal(times.length, 4, 'calls after 0, 1, 2 s and at the end of the window');
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    assert.ok(gaps[0]! >= 950 && gaps[1]! >= 1950, `waits of at least 1 s and 2 s, not the provider's 100 ms: ${gaps.join(', ')} ms`);
    assert.deepEqual((await waitForState(http, partner.key, c.id, 'completed')).output, validAnswer);
    const two = await finishedProgress(c.id);
    assert.equal(two.transientFailures, 4);
    assert.equal(two.attempts, 2);
  });

  it("a caller's pattern that backtracks catastrophically on the answer is cut off (DIALOG_ANALYSIS_VALIDATION_TIMEOUT_MS), and the worker goes on", async () => {
    const slow = newToken();
    const normal = newToken();
    const feedback = { summary: { type: 'string' }, code: { type: 'string', pattern: '^(a|a)*$' } };
    const r1 = forDialog(slow, [json({ profile: validAnswer.profile, feedback: { summary: 'ok', code: `${'a'.repeat(40)}b` } })]);
    const r2 = forDialog(normal, [json(validAnswer)]);
    upstream.respond((call, i) => (callOf(slow)(call) ? r1(call, i) : r2(call, i)));
    const a = await create(http, partner.key, dialogInput(slow, { feedback_schema: feedback }));
    const failed = await waitForState(http, partner.key, a.id, 'failed');
    assert.match(failed.error, /took longer than 1 second/);
    const b = await create(http, partner.key, dialogInput(normal));
    assert.deepEqual((await waitForState(http, partner.key, b.id, 'completed')).output, validAnswer);
  });

  describe('retention (DIALOG_ANALYSIS_RETENTION_SECONDS=6)', () => {
    let shortApi: RunningApi;
    before(async () => {
      shortApi = await startApi({ ...env(upstream.baseUrl), DIALOG_ANALYSIS_RETENTION_SECONDS: '6' });
    });
    after(async () => shortApi?.close());

    it('a completed and a failed analysis are readable, then 404 {message}, their rows deleted and their workflows closed', async () => {
      const shttp = client(shortApi.url);
      const ok = newToken();
      const bad = newToken();
      const r1 = forDialog(ok, [json(validAnswer)]);
      const r2 = forDialog(bad, [json(invalidAnswer)]);
      upstream.respond((call, i) => (callOf(ok)(call) ? r1(call, i) : r2(call, i)));
      const [a, b] = await Promise.all([create(shttp, partner.key, dialogInput(ok)), create(shttp, partner.key, dialogInput(bad))]);
      // Both are watched at once: each is readable only for the retention period after it finishes.
      await Promise.all([
        waitForState(shttp, partner.key, a.id, 'completed'),
        waitForState(shttp, partner.key, b.id, 'failed'),
      ]);
      await Promise.all([a.id, b.id].map(async (path) => {
        const gone = await eventually(`${path} to expire`, async () => {
          const r = await shttp('GET', path, { key: partner.key });
          return r.status === 404 ? r : null;
        }, 30_000);
        assert.deepEqual(Object.keys(gone.body), ['message']);
        assert.match(gone.body.message, /not found: unknown, or its result expired \(results are kept for 6 seconds after completion\)/);
        const id = uuidOf(path);
        await eventually(`${path}'s rows to be deleted`, async () => (await api.deps.db.dialogAnalysis.count({ where: { id } })) === 0, 30_000);
        assert.equal(await api.deps.db.dialogAnalysisCall.count({ where: { analysisId: id } }), 0);
        await eventually(`${path}'s workflow to close`, async () => (await api.deps.temporal.workflow.getHandle(dialogAnalysisWorkflowId(id)).describe()).status.name === 'COMPLETED', 30_000);
      }));
    }).timeout(120_000);
  });
});
