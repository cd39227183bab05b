import assert from 'node:assert/strict';
import fs from 'node:fs';
import OpenAI from 'openai';
import { client, eventually, startApi, type RunningApi } from '../support/system.js';
import { newPartner } from '../support/fixtures.js';
import { newQuotaKey } from '../messaging/support.js';
import { startOpenAiUpstream, type OpenAiUpstream } from '../support/openai-upstream.js';
import { probe, speak, tempFile } from '../support/audio.js';
import { countTokens } from '../../lib/platform/tokens.js';
import { testStack } from '../support/stack.js';

/**
 * /v2/audio/speech refusals, each in the speech shape with its status and a request id: invalid
 * input (422 per field), voices (400), keys (401/403), the quota (429 QUOTA_EXHAUSTED, not retried
 * by the client), and the remote speech model's failures (400/502/503/504).
 */
describe('speech: errors, keys, quota and the remote model', function () {
  this.timeout(180_000);
  let api: RunningApi;
  let http: ReturnType<typeof client>;
  let key: string;

  before(async () => {
    api = await startApi();
    http = client(api.url);
    key = (await newQuotaKey(http, { quota_type: 'speech' })).key;
  });
  after(async () => {
    await api?.close();
  });

  const post = (body: unknown, headers: Record<string, string> = { authorization: `Bearer ${key}` }) =>
    http('POST', '/v2/audio/speech', { json: body, headers });
  const ok = { model: 'tts-1', voice: 'kal', input: 'Hello there.', response_format: 'pcm' };
  /** The answer's X-Service-TTS-Request-Id, which must be a number. */
  const idOf = (res: { headers: Headers }) => {
    const id = res.headers.get('x-service-tts-request-id');
    assert.match(id ?? '', /^\d+$/);
    return Number(id);
  };

  const invalid: Array<[string, Record<string, unknown>, string]> = [
    ['an unknown model', { model: 'tts-2' }, 'model'],
    ['an empty input', { input: '' }, 'input'],
    ['a whitespace-only input', { input: '   \n ' }, 'input'],
    ['an input of zero-width spaces and a byte-order mark', { input: '\u200b \u200b\ufeff' }, 'input'],
    ['an input of 2,001 characters', { input: 'a'.repeat(2001) }, 'input'],
    ['speed 0.4', { speed: 0.4 }, 'speed'],
    ['speed 1.6', { speed: 1.6 }, 'speed'],
    ['the format aac', { response_format: 'aac' }, 'response_format'],
    ['a regional language tag', { language: 'en-US' }, 'language'],
    ['an unknown field', { instructions: 'speak slowly' }, 'instructions'],
    ['no voice', { voice: undefined }, 'voice'],
  ];
  for (const [what, change, field] of invalid) {
    it(`422 on field ${field} for ${what}`, async () => {
      const res = await post({ ...ok, ...change });
      assert.equal(res.status, 422, JSON.stringify(res.body));
      assert.ok(Array.isArray(res.body.errors?.[field]), JSON.stringify(res.body));
      assert.equal(typeof res.body.message, 'string');
      idOf(res);
    });
  }

  it('the openai client raises UnprocessableEntityError for an unknown model', async () => {
    const openai = new OpenAI({ baseURL: `${api.url}/v2`, apiKey: key, maxRetries: 0 });
    await assert.rejects(openai.audio.speech.create({ model: 'tts-2' as 'tts-1', voice: 'kal', input: 'Hi' }), (err: unknown) => err instanceof OpenAI.UnprocessableEntityError);
  });

  it('an input of 2,000 characters (code points, emoji included) is accepted', async () => {
    const res = await post({ ...ok, voice: 'espeak', input: `${'ok '.repeat(666)}😀😀` });
    assert.equal(res.status, 200);
  });

  it('an unknown voice is 400 {error} naming the voice, and costs no quota', async () => {
    const q = await newQuotaKey(http, { quota_type: 'speech', token_amount: 1000 });
    const res = await post({ ...ok, voice: 'nobody' }, { authorization: `Bearer ${q.key}` });
    assert.equal(res.status, 400);
    assert.deepEqual(Object.keys(res.body), ['error']);
    assert.match(res.body.error, /voice 'nobody'/);
    idOf(res);
    const keys = (await http('GET', '/api/quota-keys', { key: testStack().adminApiKey })).body as Array<{ id: string; tokens_consumed: number; tokens_reserved: number }>;
    const mine = keys.find((k) => k.id === q.id)!;
    assert.equal(mine.tokens_consumed + mine.tokens_reserved, 0);
  });

  it('keys: none or a partner key is 401, a chat key 403, each {error} with a request id; revoked keys stop at once', async () => {
    const none = await post(ok, {});
    assert.equal(none.status, 401);
    assert.deepEqual(Object.keys(none.body), ['error']);
    idOf(none);
    const partner = await newPartner(http);
    const asPartner = await post(ok, { 'x-api-key': partner.key });
    assert.equal(asPartner.status, 401);
    idOf(asPartner);
    const chat = await newQuotaKey(http, { quota_type: 'chat' });
    const forbidden = await post(ok, { authorization: `Bearer ${chat.key}` });
    assert.equal(forbidden.status, 403);
    assert.deepEqual(Object.keys(forbidden.body), ['error']);
    idOf(forbidden);
    const any = await newQuotaKey(http, { quota_type: 'any' });
    assert.equal((await post(ok, { authorization: `Bearer ${any.key}` })).status, 200);
    await http('DELETE', `/api/quota-keys/${any.id}`, { key: testStack().adminApiKey });
    assert.equal((await post(ok, { authorization: `Bearer ${any.key}` })).status, 401);
  });

  it('request ids are numeric and increase from one request to the next, refusals included', async () => {
    const bearer = { authorization: `Bearer ${key}` };
    const sequence: Array<[unknown, Record<string, string>, number]> = [
      [ok, bearer, 200],
      [{ ...ok, model: 'tts-2' }, bearer, 422],
      [ok, {}, 401],
      [{ ...ok, voice: 'nobody' }, bearer, 400],
      [ok, bearer, 200],
    ];
    const ids: number[] = [];
    for (const [body, headers, status] of sequence) {
      const res = await post(body, headers);
      assert.equal(res.status, status, JSON.stringify(res.body));
      ids.push(idOf(res));
    }
    for (let i = 1; i < ids.length; i++) assert.ok(ids[i]! > ids[i - 1]!, `ids in the order sent: ${ids.join(', ')}`);
  });

  it('GET /v2/audio/voices (an extension): no key or a partner key is 401, a chat key 403, each {error} with a request id; a speech or any key gets the voices', async () => {
    const voices = (headers: Record<string, string>) => http('GET', '/v2/audio/voices', { headers });
    const partner = await newPartner(http);
    const chat = await newQuotaKey(http, { quota_type: 'chat' });
    for (const [headers, status] of [[{}, 401], [{ 'x-api-key': partner.key }, 401], [{ authorization: `Bearer ${partner.key}` }, 401], [{ authorization: `Bearer ${chat.key}` }, 403]] as const) {
      const res = await voices(headers);
      assert.equal(res.status, status, `${JSON.stringify(headers)}: ${JSON.stringify(res.body)}`);
      assert.deepEqual(Object.keys(res.body), ['error']);
      assert.equal(typeof res.body.error, 'string');
      idOf(res);
    }

    const res = await voices({ authorization: `Bearer ${key}` });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    idOf(res);
    assert.deepEqual(Object.keys(res.body), ['voices']);
    const all = ['en', 'es', 'fr', 'de', 'it', 'pt', 'pl', 'ru', 'nl', 'ar', 'zh-cn', 'ja', 'ko', 'hi', 'he'];
    // The built-in voices of the table in docs/api/voices-transcription-speech-dialog.md
    // ("Built-in voices"), nothing else (no remote model, a key without a partner).
    const listed = (res.body.voices as Array<Record<string, unknown>>).map(({ description, ...v }) => {
      assert.equal(typeof description, 'string');
      assert.deepEqual([...(v.languages as string[])].sort(), [...all].sort(), `${String(v.name)} speaks every language`);
      return { name: v.name, kind: v.kind, engine: v.engine, gender: v.gender, aliases: v.aliases };
    });
    assert.deepEqual(listed, [
      { name: 'slt', kind: 'built-in', engine: 'festival', gender: 'female', aliases: ['alloy', 'coral', 'nova', 'shimmer', 'sage'] },
      { name: 'kal', kind: 'built-in', engine: 'flite', gender: 'male', aliases: ['echo', 'onyx', 'ash'] },
      { name: 'awb', kind: 'built-in', engine: 'flite', gender: 'male', aliases: ['fable'] },
      { name: 'rms', kind: 'built-in', engine: 'flite', gender: 'male', aliases: ['ballad', 'verse'] },
      { name: 'espeak', kind: 'built-in', engine: 'espeak-ng', gender: 'male', aliases: [] },
      { name: 'espeak-f', kind: 'built-in', engine: 'espeak-ng', gender: 'female', aliases: ['marin', 'cedar'] },
    ]);
    // What is listed can be named: an alias speaks.
    assert.equal((await post({ ...ok, voice: 'nova', input: 'Hi.' })).status, 200);

    const any = await newQuotaKey(http, { quota_type: 'any' });
    const viaHeader = await voices({ 'X-API-Key': any.key });
    assert.equal(viaHeader.status, 200);
    assert.deepEqual(viaHeader.body, res.body);
  });

  it('quota in input tokens: admits until exhausted, then 429 QUOTA_EXHAUSTED, which the client does not retry', async () => {
    const inputs = ['Good morning to all of you.', 'The train leaves at seven.', 'Bring an umbrella today.', 'See you on Friday evening.', 'Thank you very much.'];
    const q = await newQuotaKey(http, { quota_type: 'speech', token_amount: 20 });
    const openai = new OpenAI({ baseURL: `${api.url}/v2`, apiKey: q.key, maxRetries: 2 });
    let spent = 0;
    let refused: unknown = null;
    for (const input of inputs) {
      try {
        await (await openai.audio.speech.create({ model: 'tts-1', voice: 'espeak', input, response_format: 'pcm' })).arrayBuffer();
        spent += countTokens(input);
      } catch (err) {
        refused = err;
        break;
      }
    }
    assert.ok(refused instanceof OpenAI.RateLimitError, String(refused));
    assert.match((refused as InstanceType<typeof OpenAI.RateLimitError>).message, /quota exhausted/);
    assert.match((refused as InstanceType<typeof OpenAI.RateLimitError>).headers.get('x-service-tts-request-id') ?? '', /^\d+$/);
    const raw = await post({ ...ok, input: inputs[4] }, { authorization: `Bearer ${q.key}` });
    assert.equal(raw.status, 429);
    assert.deepEqual(raw.body, { error: raw.body.error, code: 'QUOTA_EXHAUSTED' });
    assert.equal(raw.headers.get('x-should-retry'), 'false');
    assert.ok(idOf(raw) > Number((refused as InstanceType<typeof OpenAI.RateLimitError>).headers.get('x-service-tts-request-id')), 'the 429 has its own, later request id');
    const keys = (await http('GET', '/api/quota-keys', { key: testStack().adminApiKey })).body as Array<{ id: string; tokens_consumed: number }>;
    assert.equal(keys.find((k) => k.id === q.id)!.tokens_consumed, spent);
    // One request per refusal reached the server: the client did not retry the 429.
    const rows = await eventually('the refusals to be recorded', async () => {
      const r = await api.deps.db.speechRequest.findMany({ where: { quotaKeyId: q.id, httpStatus: 429 } });
      return r.length === 2 ? r : null;
    });
    assert.equal(rows.length, 2);
  });

  it('each request is recorded under its request id', async () => {
    const res = await post({ ...ok, voice: 'slt', language: 'auto', input: 'Guten Morgen, wie geht es Ihnen heute?' });
    assert.equal(res.status, 200);
    const id = idOf(res);
    const row = await eventually('the row', () => api.deps.db.speechRequest.findUnique({ where: { id: BigInt(id) } }));
    assert.equal(row.status, 'completed');
    assert.equal(row.httpStatus, 200);
    assert.equal(row.languageUsed, 'de');
    assert.equal(row.engine, 'espeak-ng:de+f3');
    assert.equal(res.headers.get('x-service-tts-language'), 'de');
    assert.ok(Number(res.headers.get('x-service-tts-language-confidence')) >= 0.5);
  });

  describe('with a remote speech model (SPEECH_MODEL)', () => {
    let upstream: OpenAiUpstream;
    let remoteApi: RunningApi;
    let wav: Buffer;

    before(async () => {
      wav = fs.readFileSync(await speak('Hello from the remote model.', 'espeak'));
      upstream = await startOpenAiUpstream(() => ({ raw: wav, contentType: 'audio/wav' }));
      remoteApi = await startApi({ SPEECH_MODEL: 'test-tts', SPEECH_BASE_URL: upstream.baseUrl, SPEECH_API_KEY: 'sk-remote', SPEECH_TIMEOUT_SECONDS: '2', SPEECH_LANGUAGE_FIELD: 'language' });
    });
    after(async () => {
      await remoteApi?.close();
      await upstream?.close();
    });

    const remotePost = (body: Record<string, unknown>) => client(remoteApi.url)('POST', '/v2/audio/speech', { json: { ...ok, voice: 'alloy', ...body }, headers: { authorization: `Bearer ${key}` } });

    it('sends OpenAI voices to the model as WAV requests and encodes its answer', async () => {
      const openai = new OpenAI({ baseURL: `${remoteApi.url}/v2`, apiKey: key, maxRetries: 0 });
      const res = await openai.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'Bonjour à tous, comment allez-vous ?', response_format: 'mp3', speed: 1.25 });
      const p = await probe(tempFile(Buffer.from(await res.arrayBuffer()), 'mp3'));
      assert.equal(p.codec, 'mp3');
      const call = upstream.callsTo('/v1/audio/speech').at(-1)!;
      assert.equal(call.headers.authorization, 'Bearer sk-remote');
      assert.deepEqual(call.body, { model: 'test-tts', voice: 'alloy', input: 'Bonjour à tous, comment allez-vous ?', response_format: 'wav', speed: 1.25, language: 'fr' });
    });

    it("GET /v2/audio/voices lists the remote model's voices, and the built-in voices without OpenAI aliases", async () => {
      const res = await client(remoteApi.url)('GET', '/v2/audio/voices', { headers: { authorization: `Bearer ${key}` } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const voices = res.body.voices as Array<{ name: string; kind: string; engine: string; languages: string[]; aliases?: string[] }>;
      assert.deepEqual(voices.filter((v) => v.kind === 'built-in').map((v) => [v.name, v.aliases]), ['slt', 'kal', 'awb', 'rms', 'espeak', 'espeak-f'].map((n) => [n, []]));
      const remote = voices.filter((v) => v.kind === 'remote');
      assert.deepEqual(remote.map((v) => v.name), ['alloy', 'ash', 'ballad', 'coral', 'echo', 'fable', 'onyx', 'nova', 'sage', 'shimmer', 'verse', 'marin', 'cedar']);
      for (const v of remote) assert.deepEqual([v.engine, v.languages], ['openai:test-tts', ['auto']]);
    });

    it('built-in voices stay local', async () => {
      const before = upstream.calls.length;
      assert.equal((await remotePost({ voice: 'kal' })).status, 200);
      assert.equal(upstream.calls.length, before);
    });

    const failures: Array<[string, () => unknown, number, RegExp]> = [
      ['a refusal (400) is 400 with its message', () => ({ status: 400, json: { error: { message: 'voice alloy is not enabled for this account' } } }), 400, /not enabled for this account/],
      ['a server error is 502', () => ({ status: 500, json: { error: { message: 'boom' } } }), 502, /500/],
      ['a rate limit is 503 with Retry-After', () => ({ status: 429, json: { error: { message: 'slow down' } }, headers: { 'retry-after': '7' } }), 503, /429/],
      ['no answer in time is 504', () => ({ hang: true }), 504, /did not answer within 2 s/],
      ['an answer that is not WAV is 502', () => ({ raw: 'ID3 not a wav', contentType: 'audio/mpeg' }), 502, /not 16-bit PCM WAV|no WAV/],
    ];
    for (const [what, reply, status, message] of failures) {
      it(what, async () => {
        upstream.respond(reply as never);
        try {
          const res = await remotePost({});
          assert.equal(res.status, status, JSON.stringify(res.body));
          assert.deepEqual(Object.keys(res.body), ['error']);
          assert.match(res.body.error, message);
          if (status === 503) assert.equal(res.headers.get('retry-after'), '7');
        } finally {
          upstream.respond(() => ({ raw: wav, contentType: 'audio/wav' }));
        }
      });
    }
  });
});
