import assert from 'node:assert/strict';
import http from 'node:http';
import zlib from 'node:zlib';
import { client, startApi, type RunningApi } from '../support/system.js';
import { chatCompletion, startOpenAiUpstream, type OpenAiUpstream } from '../support/openai-upstream.js';
import { chatChunks, newQuotaKey } from './support.js';

/**
 * The /v3 generation routes are served without Express when a request is plain
 * (api/http/lean-lane.ts) and by Express otherwise. A client must not be able to tell which: the
 * same request answered through either path (the path with a trailing slash, which only Express
 * takes) gets the same status and body, and what only Express's body parser does (compressed
 * bodies, other charsets) still works.
 */
describe('messaging: the /v3 lean lane answers as Express does', function () {
  let upstream: OpenAiUpstream;
  let api: RunningApi;
  let key: string;

  before(async () => {
    upstream = await startOpenAiUpstream((call) => (call.body?.stream === true ? { sse: chatChunks(call, 'Hello.') } : { json: chatCompletion(call, 'Hello.') }));
    api = await startApi({ OPENAI_BASE_URL: upstream.baseUrl, OPENAI_API_KEY: 'provider-secret', JSON_BODY_MAX_BYTES: '4096' });
    ({ key } = await newQuotaKey(client(api.url)));
  });
  after(async () => {
    await api?.close();
    await upstream?.close();
  });

  /** A raw POST: headers and body exactly as given (chunked when no content-length is given). */
  function post(path: string, headers: Record<string, string>, body: Buffer | string): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
    return new Promise((resolve, reject) => {
      const req = http.request(new URL(path, api.url), { method: 'POST', headers }, (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(parts).toString('utf8') }));
      });
      req.on('error', reject);
      req.end(body);
    });
  }
  /** JSON with the test's key (read when a test runs: the key is made in `before`). */
  const json = () => ({ 'content-type': 'application/json', authorization: `Bearer ${key}` });
  /** An error body without what differs by request (its id, the path it came to). */
  const comparable = (text: string) => {
    const body = JSON.parse(text) as { error: unknown; detail: { code: string; message: string } };
    return { error: body.error, code: body.detail.code, message: body.detail.message };
  };
  const bothPaths = async (headers: Record<string, string>, body: string) => {
    const lean = await post('/v3/chat/completions', { ...headers }, body);
    const viaExpress = await post('/v3/chat/completions/', { ...headers }, body);
    return { lean, viaExpress };
  };

  it('answers a plain request and a request only Express takes alike: the completion, the request id, the headers', async () => {
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'Hi' }] });
    const { lean, viaExpress } = await bothPaths({ ...json(), 'x-request-id': 'lane-check-0001' }, body);
    for (const res of [lean, viaExpress]) {
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers['x-request-id'], 'lane-check-0001');
      assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
      assert.equal((JSON.parse(res.text) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content, 'Hello.');
    }
  });

  for (const [what, withKey, body, status] of [
    ['malformed JSON', true, '{"model": ', 400],
    ['a body that is not an object', true, '"hello"', 400],
    ['a body the schema refuses', true, JSON.stringify({ model: 'm', messages: 'not a list' }), 400],
    ['no key', false, JSON.stringify({ model: 'm', messages: [] }), 401],
    ['a body over JSON_BODY_MAX_BYTES', true, JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(5000) }] }), 413],
  ] as const) {
    it(`refuses ${what} with the same answer on both paths (${status})`, async () => {
      const { lean, viaExpress } = await bothPaths(withKey ? json() : { 'content-type': 'application/json' }, body);
      assert.equal(lean.status, status, lean.text);
      assert.equal(viaExpress.status, status, viaExpress.text);
      assert.deepEqual(comparable(lean.text), comparable(viaExpress.text));
    });
  }

  it('refuses a body over the limit that comes without its length (chunked) as one that announces it', async () => {
    const big = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(5000) }] });
    const chunked = await post('/v3/chat/completions', { ...json(), 'transfer-encoding': 'chunked' }, big);
    const announced = await post('/v3/chat/completions', { ...json(), 'content-length': String(Buffer.byteLength(big)) }, big);
    assert.equal(chunked.status, 413);
    assert.deepEqual(comparable(chunked.text), comparable(announced.text));
  });

  it('still takes what only Express parses: a gzip-compressed body, and a JSON body in UTF-16', async () => {
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], stream: true });
    const gzipped = await post('/v3/chat/completions', { ...json(), 'content-encoding': 'gzip' }, zlib.gzipSync(body));
    assert.equal(gzipped.status, 200, gzipped.text);
    assert.match(gzipped.text, /Hello\./);
    assert.match(gzipped.text, /data: \[DONE\]/);
    const utf16 = await post('/v3/chat/completions', { ...json(), 'content-type': 'application/json; charset=utf-16le' }, Buffer.from(body, 'utf16le'));
    assert.equal(utf16.status, 200, utf16.text);
    assert.match(utf16.text, /Hello\./);
  });
});
