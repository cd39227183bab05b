import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { client, eventually, startApi, type RunningApi } from '../support/system.js';
import { newPartner } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { dialogAnalysisWorkflowId } from '../../lib/contracts/dialog-analysis.js';
import { create, dialogInput, newToken, padInputTo, uuidOf } from './support.js';

/**
 * POST/GET /v2/dialog_analyses without a worker: analyses are accepted and stay in-progress. The
 * API runs on a task queue of its own, so no other test's worker picks these workflows up.
 */
describe('dialog analysis API: creation, validation, limits, keys', function () {
  let api: RunningApi;
  let http: ReturnType<typeof client>;
  let partner: { name: string; key: string };
  const admin = () => testStack().adminApiKey;
  const env = { TEMPORAL_TASK_QUEUE: `dialog-api-${process.pid}`, DIALOG_ANALYSIS_RATE_LIMIT_PER_MINUTE: '1000' };

  before(async () => {
    api = await startApi(env);
    http = client(api.url);
    partner = await newPartner(http);
  });
  after(async () => {
    await api?.close();
  });

  const rowsOf = async (partnerName: string) => {
    const p = await api.deps.db.partner.findUnique({ where: { name: partnerName } });
    return api.deps.db.dialogAnalysis.count({ where: { partnerId: p!.id } });
  };

  it('accepts an analysis: {id, state: in-progress, created_at}, readable by GET, run by the workflow dialog-analysis-<id>', async () => {
    const res = await http('POST', '/v2/dialog_analyses', { key: partner.key, json: { input: dialogInput(newToken()) } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(Object.keys(res.body), ['id', 'state', 'created_at']);
    assert.match(res.body.id, /^\/v2\/dialog_analyses\/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    assert.equal(res.body.state, 'in-progress');
    assert.ok(Math.abs(Date.parse(res.body.created_at) - Date.now()) < 60_000);
    const got = await http('GET', res.body.id, { key: partner.key });
    assert.equal(got.status, 200);
    assert.deepEqual(got.body, res.body);
    // The id appended to the documented path GET /v2/dialog_analyses/{id}, as a client filling in the path does.
    const filledIn = await http('GET', `/v2/dialog_analyses/${res.body.id}`, { key: partner.key });
    assert.equal(filledIn.status, 200, JSON.stringify(filledIn.body));
    assert.deepEqual(filledIn.body, res.body);
    // ... and percent-encoded, as path templating (encodeURIComponent, OpenAPI generators) fills it in.
    const encoded = await http('GET', `/v2/dialog_analyses/${encodeURIComponent(res.body.id)}`, { key: partner.key });
    assert.equal(encoded.status, 200, JSON.stringify(encoded.body));
    assert.deepEqual(encoded.body, res.body);
    const description = await api.deps.temporal.workflow.getHandle(dialogAnalysisWorkflowId(uuidOf(res.body.id))).describe();
    assert.equal(description.type, 'dialogAnalysis');
    assert.equal(description.status.name, 'RUNNING');
  });

  it('stores the input with its defaults: language en, current_profile {}, prompt_extra_text ""', async () => {
    const created = await create(http, partner.key, dialogInput(newToken(), { current_profile: null }));
    const row = await api.deps.db.dialogAnalysis.findUnique({ where: { id: uuidOf(created.id) } });
    const stored = JSON.parse(row!.input);
    assert.equal(stored.language, 'en');
    assert.deepEqual(stored.current_profile, {});
    assert.equal(stored.prompt_extra_text, '');
  });

  describe('invalid requests: 422 {message, errors: {<field>: [...]}}, nothing stored', () => {
    const base = () => dialogInput(newToken());
    const cases: Array<[string, () => unknown, string, RegExp]> = [
      ['messages missing', () => ({ ...base(), messages: undefined }), 'input.messages', /is required/],
      ['a message content that is not a string', () => ({ ...base(), messages: [{ role: 'user', content: 5 }] }), 'input.messages.0.content', /must be string/],
      ['an unknown role', () => ({ ...base(), messages: [{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }, { role: 'robot', content: 'c' }] }), 'input.messages.2.role', /must be one of user, assistant, system/],
      ['no messages', () => ({ ...base(), messages: [] }), 'input.messages', /fewer than 1 items/],
      ['an unknown member', () => ({ ...base(), profileSchema: {} }), 'input.profileSchema', /is not allowed/],
      ['profile_schema missing', () => ({ ...base(), profile_schema: undefined }), 'input.profile_schema', /is required/],
      ['an empty profile_schema', () => ({ ...base(), profile_schema: {} }), 'input.profile_schema', /fewer than 1 properties/],
      ['a language of 65 characters', () => ({ ...base(), language: 'x'.repeat(65) }), 'input.language', /more than 64 characters/],
      ['a profile_schema entry whose type is not a string', () => ({ ...base(), profile_schema: { age: { type: 5 } } }), 'input.profile_schema.age.type', /^must be a string$/],
      ['a profile_schema entry without type', () => ({ ...base(), profile_schema: { age: { minimum: 0 } } }), 'input.profile_schema.age.type', /^is required$/],
      ['a profile_schema entry with an unknown type', () => ({ ...base(), profile_schema: { age: { type: 'int' } } }), 'input.profile_schema.age.type', /must be one of: string, number, integer, boolean, object, array, null/],
      ['a profile_schema entry that is not an object', () => ({ ...base(), profile_schema: { age: 'integer' } }), 'input.profile_schema.age', /must be an object \(the JSON Schema of field "age"\)/],
      ['a nested type that is not a type', () => ({ ...base(), profile_schema: { address: { type: 'object', properties: { city: { type: 5 } } } } }), 'input.profile_schema.address.properties.city.type', /must be a JSON type name/],
      ['a keyword with a wrong value', () => ({ ...base(), feedback_schema: { summary: { type: 'string', minLength: -1 } } }), 'input.feedback_schema.summary.minLength', /is not valid JSON Schema: must be >= 0/],
      ['a pattern that is not a regular expression', () => ({ ...base(), profile_schema: { code: { type: 'string', pattern: '(' } } }), 'input.profile_schema.code.pattern', /is not a valid regular expression: Unterminated group/],
      ['an unknown format', () => ({ ...base(), profile_schema: { mail: { type: 'string', format: 'emial' } } }), 'input.profile_schema.mail.format', /names an unknown format "emial"/],
      ['a $ref that does not resolve', () => ({ ...base(), profile_schema: { x: { type: 'object', properties: { y: { $ref: '#/definitions/nope' } } } } }), 'input.profile_schema.x.properties.y.$ref', /cannot be resolved: "#\/definitions\/nope"/],
      ['a remote $ref', () => ({ ...base(), profile_schema: { x: { $ref: 'https://example.com/schema.json', type: 'object' } } }), 'input.profile_schema.x.$ref', /only references inside the schema/],
      ['a full-form schema whose root is not an object', () => ({ ...base(), feedback_schema: { type: 'array', items: { type: 'string' } } }), 'input.feedback_schema.type', /must be "object"/],
      ['an unsupported $schema', () => ({ ...base(), profile_schema: { type: 'object', $schema: 'http://json-schema.org/draft-04/schema#', properties: {} } }), 'input.profile_schema.$schema', /unsupported dialect/],
      ['a NUL character in a message', () => ({ ...base(), messages: [{ role: 'user', content: 'a\u0000b' }] }), 'input.messages.0.content', /NUL/],
      ['a lone surrogate in a message', () => ({ ...base(), messages: [{ role: 'user', content: 'a\ud800b' }] }), 'input.messages.0.content', /must be valid Unicode text/],
    ];
    for (const [what, input, field, text] of cases) {
      it(`${what}: ${field}`, async () => {
        const before = await rowsOf(partner.name);
        const res = await http('POST', '/v2/dialog_analyses', { key: partner.key, json: { input: input() } });
        assert.equal(res.status, 422, JSON.stringify(res.body));
        assert.deepEqual(Object.keys(res.body).sort(), ['errors', 'message']);
        assert.ok(res.body.errors[field], `errors has ${field}: ${JSON.stringify(res.body.errors)}`);
        assert.match(res.body.errors[field].join(' '), text);
        assert.equal(typeof res.body.message, 'string');
        assert.equal(await rowsOf(partner.name), before);
      });
    }

    it('an input nested 10,000 levels deep is refused at the first level beyond 64, without a crash', async () => {
      // Written by hand: JSON.stringify itself overflows its stack on such a value.
      const deep = `${'{"type":"object","properties":{"a":'.repeat(5000)}{"type":"string"}${'}}'.repeat(5000)}`;
      const { profile_schema: _, ...rest } = base();
      const body = `{"input":{"profile_schema":{"root":${deep}},${JSON.stringify(rest).slice(1)}}`;
      const res = await http('POST', '/v2/dialog_analyses', { key: partner.key, rawBody: { body, contentType: 'application/json' } });
      assert.equal(res.status, 422, JSON.stringify(res.body).slice(0, 500));
      const [field] = Object.keys(res.body.errors);
      assert.match(field!, /^input\.profile_schema\.root(?:\.properties\.a)+$/);
      assert.equal(field!.split('.').length, 65);
      assert.match(res.body.errors[field!][0], /nested more than 64 levels deep/);
    });

    it('reports every error of a stage, and the message names the first and how many more', async () => {
      const res = await http('POST', '/v2/dialog_analyses', {
        key: partner.key,
        json: { input: { ...base(), profile_schema: { age: { type: 5 }, name: 'string' }, feedback_schema: { score: {} } } },
      });
      assert.equal(res.status, 422);
      assert.deepEqual(Object.keys(res.body.errors).sort(), ['input.feedback_schema.score.type', 'input.profile_schema.age.type', 'input.profile_schema.name']);
      assert.equal(res.body.message, 'input.profile_schema.age.type must be a string (and 2 more errors)');
    });

    it('a body that is not JSON, or not application/json', async () => {
      const malformed = await http('POST', '/v2/dialog_analyses', { key: partner.key, rawBody: { body: '{"input": ', contentType: 'application/json' } });
      assert.equal(malformed.status, 422);
      assert.deepEqual(Object.keys(malformed.body).sort(), ['errors', 'message']);
      const text = await http('POST', '/v2/dialog_analyses', { key: partner.key, rawBody: { body: 'hello', contentType: 'text/plain' } });
      assert.equal(text.status, 422);
      assert.match(text.body.message, /must be JSON/);
    });
  });

  describe('the 100,000-character limit (code points of input as compact JSON)', () => {
    it('accepts exactly 100,000 characters and refuses 100,001 with errors key input stating both counts', async () => {
      const at = padInputTo(dialogInput(newToken()), 100_000);
      assert.equal((await http('POST', '/v2/dialog_analyses', { key: partner.key, json: { input: at } })).status, 200);
      const before = await rowsOf(partner.name);
      const over = padInputTo(dialogInput(newToken()), 100_001);
      const res = await http('POST', '/v2/dialog_analyses', { key: partner.key, json: { input: over } });
      assert.equal(res.status, 422);
      assert.deepEqual(Object.keys(res.body.errors), ['input']);
      assert.equal(res.body.message, 'The input is too large: 100001 characters; the maximum is 100000 characters.');
      assert.deepEqual(res.body.errors.input, [res.body.message]);
      assert.equal(await rowsOf(partner.name), before);
    });

    it('counts an emoji as one character (its two UTF-16 units do not count twice), and whitespace between tokens not at all', async () => {
      const input = padInputTo(dialogInput(newToken()), 100_000, '😀');
      assert.ok(JSON.stringify(input).length > 100_000);
      const body = JSON.stringify({ input }, null, 2);
      const res = await http('POST', '/v2/dialog_analyses', { key: partner.key, rawBody: { body, contentType: 'application/json' } });
      assert.equal(res.status, 200, JSON.stringify(res.body).slice(0, 300));
    });
  });

  describe('keys', () => {
    it('POST needs a partner key or the administrator key (401 {message} otherwise, also for a quota key)', async () => {
      const input = dialogInput(newToken());
      const quota = await http('POST', '/api/quota-keys', { key: admin(), json: { name: `qk-${newToken()}`, quota_type: 'any', token_amount: 1000 } });
      for (const key of [null, `pk_${crypto.randomBytes(32).toString('base64url')}`, quota.body.api_key as string]) {
        const res = await http('POST', '/v2/dialog_analyses', { key, json: { input } });
        assert.equal(res.status, 401, `${key}: ${JSON.stringify(res.body)}`);
        assert.deepEqual(Object.keys(res.body), ['message']);
      }
      assert.equal((await http('POST', '/v2/dialog_analyses', { key: admin(), json: { input } })).status, 200);
    });

    it("GET: the owner and the administrator read it; another partner, a bad key or no key do not; a partner cannot read the administrator's", async () => {
      const mine = await create(http, partner.key, dialogInput(newToken()));
      const other = await newPartner(http);
      assert.equal((await http('GET', mine.id, { key: partner.key })).status, 200);
      assert.equal((await http('GET', mine.id, { key: admin() })).status, 200);
      const foreign = await http('GET', mine.id, { key: other.key });
      assert.equal(foreign.status, 404);
      assert.deepEqual(Object.keys(foreign.body), ['message']);
      assert.equal((await http('GET', mine.id, { key: 'pk_nope' })).status, 401);
      assert.equal((await http('GET', mine.id)).status, 401);
      const admins = await create(http, admin(), dialogInput(newToken()));
      assert.equal((await http('GET', admins.id, { key: admin() })).status, 200);
      assert.equal((await http('GET', admins.id, { key: partner.key })).status, 404);
    });

    it('an unknown or malformed id is 404 {message}', async () => {
      for (const id of [crypto.randomUUID(), 'not-a-uuid']) {
        const res = await http('GET', `/v2/dialog_analyses/${id}`, { key: partner.key });
        assert.equal(res.status, 404);
        assert.deepEqual(Object.keys(res.body), ['message']);
        assert.match(res.body.message, /not found: unknown, or its result expired \(results are kept for 24 hours after completion\)/);
      }
    });
  });

  describe('rate limit (DIALOG_ANALYSIS_RATE_LIMIT_PER_MINUTE=3)', () => {
    let limited: RunningApi;
    let lhttp: ReturnType<typeof client>;
    before(async () => {
      limited = await startApi({ ...env, DIALOG_ANALYSIS_RATE_LIMIT_PER_MINUTE: '3' });
      lhttp = client(limited.url);
    });
    after(async () => limited?.close());

    it("a partner's 4th creation within a minute is 429 {message} with Retry-After and stores nothing; other partners and the administrator go on", async () => {
      const a = await newPartner(lhttp);
      const b = await newPartner(lhttp);
      for (let i = 0; i < 3; i++) await create(lhttp, a.key, dialogInput(newToken()));
      const refused = await lhttp('POST', '/v2/dialog_analyses', { key: a.key, json: { input: dialogInput(newToken()) } });
      assert.equal(refused.status, 429);
      assert.deepEqual(Object.keys(refused.body), ['message']);
      assert.match(refused.body.message, /Too many dialog analyses: this partner may create 3 per minute\. Try again in \d+ seconds?\./);
      const retryAfter = Number(refused.headers.get('retry-after'));
      assert.ok(retryAfter >= 1 && retryAfter <= 120, `Retry-After ${retryAfter}`);
      assert.equal(await rowsOf(a.name), 3);
      await create(lhttp, b.key, dialogInput(newToken()));
      for (let i = 0; i < 4; i++) await create(lhttp, admin(), dialogInput(newToken()));
    });

    it('racing creations of one partner admit exactly the limit', async () => {
      const c = await newPartner(lhttp);
      const results = await Promise.all(Array.from({ length: 10 }, () => lhttp('POST', '/v2/dialog_analyses', { key: c.key, json: { input: dialogInput(newToken()) } })));
      assert.deepEqual(results.map((r) => r.status).sort(), [200, 200, 200, ...Array(7).fill(429)]);
      assert.equal(await rowsOf(c.name), 3);
    });
  });

  it('a schema that takes longer than DIALOG_ANALYSIS_VALIDATION_TIMEOUT_MS to compile is refused (422), and the API keeps answering meanwhile', async () => {
    const quick = await startApi({ ...env, DIALOG_ANALYSIS_VALIDATION_TIMEOUT_MS: '100' });
    try {
      const qhttp = client(quick.url);
      // Warm the sandbox thread (its start-up never counts against a task). On a busy machine even
      // this small schema may miss 100 ms; the thread is warm either way.
      await qhttp('POST', '/v2/dialog_analyses', { key: partner.key, json: { input: dialogInput(newToken()) } });
      // About 1,300 fields in 90,000 characters: compiling takes over a second here.
      const big: Record<string, unknown> = {};
      for (let i = 0; JSON.stringify(big).length < 90_000; i++) big[`f${i}`] = { type: 'array', items: { type: 'string' }, uniqueItems: true };
      const pending = qhttp('POST', '/v2/dialog_analyses', { key: partner.key, json: { input: { ...dialogInput(newToken()), profile_schema: big } } });
      // The compile runs in a thread: the API answers other requests before that one.
      const first = await Promise.race([pending.then(() => 'analysis'), qhttp('GET', '/health').then((r) => (r.status === 200 ? 'health' : 'health failed'))]);
      assert.equal(first, 'health');
      const res = await pending;
      assert.equal(res.status, 422, JSON.stringify(res.body).slice(0, 300));
      assert.deepEqual(res.body.errors['input.profile_schema'], ['could not be compiled within 100 ms']);
    } finally {
      await quick.close();
    }
  });

  it('an analysis left without a workflow (the API died between insert and start) gets one when it is read', async () => {
    const id = crypto.randomUUID();
    const p = await api.deps.db.partner.findUnique({ where: { name: partner.name } });
    const input = { ...dialogInput(newToken()), language: 'en', current_profile: {}, prompt_extra_text: '' };
    await api.deps.db.dialogAnalysis.create({ data: { id, partnerId: p!.id, input: JSON.stringify(input), inputChars: 100, createdAt: new Date(Date.now() - 60_000) } });
    const res = await http('GET', `/v2/dialog_analyses/${id}`, { key: partner.key });
    assert.equal(res.status, 200);
    assert.equal(res.body.state, 'in-progress');
    await eventually('the workflow to exist', async () => (await api.deps.temporal.workflow.getHandle(dialogAnalysisWorkflowId(id)).describe()).status.name === 'RUNNING');
  });

  it('the OpenAPI document describes both routes and their answers', async () => {
    const doc = (await http('GET', '/openapi.json')).body;
    assert.deepEqual(Object.keys(doc.paths['/v2/dialog_analyses'].post.responses).sort(), ['200', '401', '413', '422', '429', '503']);
    assert.deepEqual(Object.keys(doc.paths['/v2/dialog_analyses/{id}'].get.responses).sort(), ['200', '401', '404', '429']);
    assert.deepEqual(doc.paths['/v2/dialog_analyses'].post.tags, ['dialog-analysis']);
  });
});
