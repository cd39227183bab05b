import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { client, startApi, type RunningApi } from '../support/system.js';
import { newKnowledgeBase, newPartner } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { documentFiles } from '../../lib/platform/storage.js';

/**
 * Request limits enforced while the body streams (docs/abuse-resistance.md,
 * "Request bodies are limited while they stream"): fields (count and size), files (count and size)
 * and the whole body, answered with a clear 413 or 400 in the interface's error shape, with nothing
 * stored: no row, and nothing left in the upload directory.
 */
const MIB = 1024 * 1024;

interface RawAnswer {
  status: number;
  body: any;
  headers: http.IncomingHttpHeaders;
}

/**
 * A request written piece by piece (chunked unless a Content-Length is given), as a client that
 * streams a large body does; resolves with the answer as soon as it comes, even while the body is
 * still being written (the server may answer early and close the connection); rejects when the
 * connection fails before an answer.
 */
function streamRequest(url: string, options: { method?: string; headers: Record<string, string>; pieces: () => Iterable<Buffer> }): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: options.method ?? 'POST', headers: options.headers });
    let answered = false;
    req.on('response', (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          /* not JSON */
        }
        resolve({ status: res.statusCode ?? 0, body, headers: res.headers });
      });
      res.on('error', reject);
    });
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    (async () => {
      for (const piece of options.pieces()) {
        if (answered || req.destroyed) return;
        if (!req.write(piece)) await writable(req);
      }
      if (!answered && !req.destroyed) req.end();
    })().catch(() => undefined);
  });
}

/**
 * A client as simple as many are: it writes the whole request, and only then reads the answer (what
 * the server sent, up to its close). Rejects with the socket's error (EPIPE, ECONNRESET) if the
 * server resets the connection under it.
 */
function sendAllThenRead(url: string, headers: Record<string, string>, parts: Buffer[], chunked: boolean): Promise<string> {
  const { hostname, port, pathname } = new URL(url);
  const length = parts.reduce((sum, p) => sum + p.length, 0);
  const head = [`POST ${pathname} HTTP/1.1`, `Host: ${hostname}:${port}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${length}`];
  const body = chunked ? [...parts.flatMap((p) => [Buffer.from(`${p.length.toString(16)}\r\n`), p, Buffer.from('\r\n')]), Buffer.from('0\r\n\r\n')] : parts;
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    socket.pause();
    socket.once('error', reject);
    const received: Buffer[] = [];
    socket.write(`${head.join('\r\n')}\r\n\r\n`);
    for (const piece of body) socket.write(piece);
    socket.write(Buffer.alloc(0), () => {
      socket.on('data', (chunk: Buffer) => received.push(chunk));
      socket.once('end', () => {
        socket.destroy();
        resolve(Buffer.concat(received).toString('utf8'));
      });
      socket.resume();
    });
  });
}

/** Waits until the request takes more (or is closed), leaving no listener behind. */
function writable(req: http.ClientRequest): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      req.off('drain', done).off('close', done);
      resolve();
    };
    req.once('drain', done).once('close', done);
  });
}

const boundary = '----abuse-test-boundary';
const field = (name: string, value: string) => Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`);
const fileHead = (name: string, filename: string) => Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="${filename}"\r\nContent-Type: text/plain\r\n\r\n`);
const closing = Buffer.from(`--${boundary}--\r\n`);
const multipart = { 'content-type': `multipart/form-data; boundary=${boundary}` };

function* repeat(piece: Buffer, times: number) {
  for (let i = 0; i < times; i++) yield piece;
}

describe('request limits while the body streams', function () {
  this.timeout(300_000);
  let api: RunningApi;
  let h: ReturnType<typeof client>;
  let storage: string;
  let kb: Awaited<ReturnType<typeof newKnowledgeBase>>;
  const admin = () => testStack().adminApiKey;

  before(async () => {
    storage = await fs.mkdtemp(path.join(os.tmpdir(), 'request-limits-'));
    api = await startApi({ STORAGE_DIR: storage, MAX_UPLOAD_BYTES: String(2 * MIB), BATCH_UPLOAD_MAX_BYTES: String(3 * MIB), JSON_BODY_MAX_BYTES: String(64 * 1024) });
    h = client(api.url);
    kb = await newKnowledgeBase(h);
  });
  after(async () => {
    await api?.close();
    await fs.rm(storage, { recursive: true, force: true });
  });

  const uploads = () => fs.readdir(path.join(storage, 'uploads'));
  const documentCount = async () => {
    const row = await api.deps.db.knowledgeBase.findFirstOrThrow({ where: { name: kb.kb, partner: { name: kb.partner.name } } });
    return api.deps.db.document.count({ where: { knowledgeBaseId: row.id } });
  };
  const nothingStored = async (documentsBefore: number) => {
    assert.deepEqual(await uploads(), [], 'the upload directory is empty');
    assert.equal(await documentCount(), documentsBefore, 'no document was created');
  };
  const detailOnly = (res: { body: any }) => assert.deepEqual(Object.keys(res.body), ['detail'], JSON.stringify(res.body));

  it('refuses a form with more fields than its schema can take (400), before reading the rest', async () => {
    const p = await newPartner(h);
    const res = await streamRequest(`${api.url}/api/knowledgebases/${p.name}`, {
      headers: { ...multipart, 'x-api-key': p.key },
      pieces: function* () {
        yield field('name', 'too-many-fields');
        for (let i = 0; i < 200; i++) yield field(`extra${i}`, 'x');
        yield closing;
      },
    });
    assert.equal(res.status, 400, JSON.stringify(res.body));
    detailOnly(res);
    assert.match(res.body.detail, /the form has too many fields: this endpoint takes at most \d+/);
    assert.deepEqual((await h('GET', `/api/knowledgebases/${p.name}`, { key: admin() })).body, []);
  });

  it('refuses a field longer than its maxLength allows (413) while it streams, not after 16 MiB', async () => {
    const p = await newPartner(h);
    const res = await streamRequest(`${api.url}/api/knowledgebases/${p.name}`, {
      headers: { ...multipart, 'x-api-key': p.key },
      pieces: function* () {
        yield Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\n`);
        yield* repeat(Buffer.alloc(64 * 1024, 0x61), 64);
        yield Buffer.from('\r\n');
        yield closing;
      },
    });
    assert.equal(res.status, 413, JSON.stringify(res.body));
    detailOnly(res);
    // busboy reads a field to its end before it says it was too long: the total may stop it first.
    assert.match(res.body.detail, /form field name is longer than \d+ KiB|the request body is larger than \d+ KiB/);
    assert.deepEqual((await h('GET', `/api/knowledgebases/${p.name}`, { key: admin() })).body, []);
  });

  it('stores uploads byte for byte whether they are held in memory (up to 64 KiB) or streamed to disk, sent in small pieces; the upload directory is left empty', async () => {
    const text = (size: number, seed: number) => Buffer.from(Array.from({ length: size }, (_, i) => 'abcdefghij klmnopqrstuvwxyz\n'[(i * 7 + seed) % 28]).join(''));
    for (const [k, size] of [10, 64 * 1024, 64 * 1024 + 1, 300 * 1024].entries()) {
      const content = text(size, k);
      const res = await streamRequest(`${api.url}/api/documents/${kb.partner.name}/${kb.kb}`, {
        headers: { ...multipart, 'x-api-key': kb.partner.key },
        pieces: function* () {
          yield field('type', 'file');
          yield field('folder', kb.folder);
          yield fileHead('file', `sized-${size}.txt`);
          for (let at = 0; at < content.length; at += 1000) yield content.subarray(at, at + 1000);
          yield Buffer.from('\r\n');
          yield closing;
        },
      });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const stored = await api.deps.storage.read(documentFiles.original(res.body.id, 'txt'));
      assert.ok(stored.equals(content), `a file of ${size} bytes is stored as sent (${stored.length} bytes stored)`);
    }
    assert.deepEqual(await uploads(), [], 'the upload directory is empty');
  });

  it('refuses more files than a field takes (400) and keeps none of them', async () => {
    const before = await documentCount();
    const res = await streamRequest(`${api.url}/api/documents/${kb.partner.name}/${kb.kb}`, {
      headers: { ...multipart, 'x-api-key': kb.partner.key },
      pieces: function* () {
        yield field('type', 'file');
        yield field('folder', kb.folder);
        for (let i = 0; i < 3; i++) {
          yield fileHead('file', `f${i}.txt`);
          yield Buffer.from('some text\r\n');
        }
        yield closing;
      },
    });
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.match(res.body.detail, /unexpected file in field "file"|too many files/);
    await nothingStored(before);
  });

  it('refuses a file over the upload limit (413) as it streams, and deletes the part written', async () => {
    const before = await documentCount();
    const res = await streamRequest(`${api.url}/api/documents/${kb.partner.name}/${kb.kb}`, {
      headers: { ...multipart, 'x-api-key': kb.partner.key },
      pieces: function* () {
        yield field('type', 'file');
        yield field('folder', kb.folder);
        yield fileHead('file', 'big.txt');
        yield* repeat(Buffer.alloc(256 * 1024, 0x62), 40); // 10 MiB, the limit is 2 MiB
        yield Buffer.from('\r\n');
        yield closing;
      },
    });
    assert.equal(res.status, 413, JSON.stringify(res.body));
    detailOnly(res);
    assert.match(res.body.detail, /file file is larger than the upload limit of this endpoint \(2 MiB\)|the request body is larger than 2\.\d MiB/);
    await nothingStored(before);
  });

  it('refuses a batch whose declared length is over its total (413) without reading it', async () => {
    const before = await documentCount();
    const res = await streamRequest(`${api.url}/api/documents/${kb.partner.name}/${kb.kb}/files/batch`, {
      headers: { ...multipart, 'x-api-key': kb.partner.key, 'content-length': String(10 * 1024 * MIB) },
      pieces: function* () {
        yield field('folder', kb.folder);
      },
    });
    assert.equal(res.status, 413, JSON.stringify(res.body));
    detailOnly(res);
    assert.match(res.body.detail, /the request body is larger than [\d.]+ MiB, the most this endpoint accepts/);
    assert.equal(res.headers.connection, 'close');
    await nothingStored(before);
  });

  it('cuts off a chunked batch at its total (BATCH_UPLOAD_MAX_BYTES) while it streams: 413, files written so far deleted', async () => {
    const before = await documentCount();
    let sent = 0;
    const res = await streamRequest(`${api.url}/api/documents/${kb.partner.name}/${kb.kb}/files/batch`, {
      headers: { ...multipart, 'x-api-key': kb.partner.key },
      pieces: function* () {
        yield field('folder', kb.folder);
        // Files of 1.5 MiB each (under the 2 MiB file limit), 40 of them: 60 MiB against a 3 MiB total.
        for (let i = 0; i < 40; i++) {
          yield fileHead('files', `part${i}.txt`);
          for (const piece of repeat(Buffer.alloc(256 * 1024, 0x63), 6)) {
            sent += piece.length;
            yield piece;
          }
          yield Buffer.from('\r\n');
        }
        yield closing;
      },
    });
    assert.equal(res.status, 413, JSON.stringify(res.body));
    detailOnly(res);
    assert.match(res.body.detail, /the request body is larger than 3\.\d MiB/);
    assert.ok(sent < 60 * MIB, `the client was stopped before sending everything (${sent} bytes sent)`);
    await nothingStored(before);
  });

  for (const framing of ['a declared Content-Length', 'chunked'] as const) {
    it(`a client that sends its whole body before it reads gets the 413, not a reset connection (${framing})`, async () => {
      const before = await documentCount();
      // Files of 1 MiB (under the 2 MiB file limit), 16 MiB against the 3 MiB total.
      const parts = [field('folder', kb.folder)];
      for (let i = 0; i < 16; i++) parts.push(fileHead('files', `part${i}.txt`), Buffer.alloc(MIB, 0x63), Buffer.from('\r\n'));
      parts.push(closing);
      const answer = await sendAllThenRead(`${api.url}/api/documents/${kb.partner.name}/${kb.kb}/files/batch`, { ...multipart, 'x-api-key': kb.partner.key }, parts, framing === 'chunked');
      assert.match(answer, /^HTTP\/1\.1 413 /, answer.slice(0, 200));
      assert.match(answer, /the request body is larger than 3\.\d MiB/);
      assert.match(answer, /\r\nConnection: close\r\n/i);
      await nothingStored(before);
    });
  }

  it('answers in the interface\'s shape: a transcription field too long is 422 {message, errors}', async () => {
    const p = await newPartner(h);
    const res = await streamRequest(`${api.url}/v2/transcript`, {
      headers: { ...multipart, 'x-api-key': p.key },
      pieces: function* () {
        yield field('audio_url', `https://example.com/${'a'.repeat(40_000)}`);
        yield closing;
      },
    });
    assert.equal(res.status, 422, JSON.stringify(res.body));
    // The message is repeated as `error`, which AssemblyAI's clients show.
    assert.deepEqual(Object.keys(res.body).sort(), ['error', 'errors', 'message']);
    assert.equal(res.body.error, res.body.message);
    assert.match(res.body.errors.audio_url[0], /is longer than/);
    assert.equal(await api.deps.db.transcript.count({ where: { partner: { name: p.name } } }), 0);
  });

  it('a transcription upload declared far over the limit is refused before it is read: 422 on audio, connection closed', async () => {
    const p = await newPartner(h);
    const res = await streamRequest(`${api.url}/v2/transcript`, {
      headers: { ...multipart, 'x-api-key': p.key, 'content-length': String(150 * MIB) },
      pieces: function* () {
        yield fileHead('audio', 'long.mp3');
      },
    });
    assert.equal(res.status, 422, JSON.stringify(res.body));
    // The message is repeated as `error`, which AssemblyAI's clients show.
    assert.deepEqual(Object.keys(res.body).sort(), ['error', 'errors', 'message']);
    assert.equal(res.body.error, res.body.message);
    assert.match(res.body.errors.audio[0], /larger than the upload limit of this endpoint/);
    assert.equal(res.headers.connection, 'close');
    assert.equal(await api.deps.db.transcript.count({ where: { partner: { name: p.name } } }), 0);
  });

  it('refuses JSON bodies over JSON_BODY_MAX_BYTES with 413 in each interface\'s shape', async () => {
    const p = await newPartner(h);
    const big = { input: { messages: [{ role: 'user', content: 'x'.repeat(200 * 1024) }], profile_schema: { a: { type: 'string' } }, feedback_schema: { b: { type: 'string' } } } };
    const dialog = await h('POST', '/v2/dialog_analyses', { key: p.key, json: big });
    assert.equal(dialog.status, 413, JSON.stringify(dialog.body));
    assert.deepEqual(Object.keys(dialog.body), ['message']);
    assert.equal(await api.deps.db.dialogAnalysis.count({ where: { partnerId: (await api.deps.db.partner.findUniqueOrThrow({ where: { name: p.name } })).id } }), 0);
    const search = await h('POST', '/api/rag-test/search', { key: p.key, json: { partner: p.name, kb: 'x', user_message: 'y'.repeat(200 * 1024) } });
    assert.equal(search.status, 413);
    detailOnly(search);
  });
});
