import assert from 'node:assert/strict';
import http from 'node:http';
import { client, startApi, type RunningApi } from '../support/system.js';
import { newPartner } from '../support/fixtures.js';
import { dialogInput } from '../dialog-analysis/support.js';
import { newQuotaKey } from '../messaging/support.js';

/**
 * Retry-After a client can trust (issue #47): several clients of one key, each honouring exactly
 * the Retry-After it is told after a 429, against every limited endpoint. A client that waits is
 * let through when it comes back (its turn was booked for it), the key keeps admitting its full
 * rate however many clients wait, and none of them starves. Each client asks from an address of
 * its own (127.0.0.2, .3, ...: all of 127/8 is this machine), as clients on several hosts would:
 * a booked turn is kept for the client (the address) it was promised to.
 *
 * The limits are 60 a minute: one request a second after the burst (60 for the creation limits,
 * 10 for the per-key request limit, whose minute is counted in sixths, docs/abuse-resistance.md,
 * "How each limit counts").
 */
const RUN_MS = 14_000;

interface Answer {
  status: number;
  retryAfter: number | null;
}

/** One request from `localAddress` (node:http, which can choose the address it sends from). */
function send(localAddress: string, url: string, o: { method: string; headers: Record<string, string>; body?: Buffer }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: o.method, headers: { ...o.headers, ...(o.body ? { 'content-length': String(o.body.length) } : {}) }, localAddress }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'] ? Number(res.headers['retry-after']) : null }));
    });
    req.on('error', reject);
    req.end(o.body);
  });
}

const form = (fields: Record<string, string>) => {
  const boundary = `----retryafter${Date.now()}`;
  const body = Buffer.from(Object.entries(fields).map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`).join('') + `--${boundary}--\r\n`);
  return { body, contentType: `multipart/form-data; boundary=${boundary}` };
};

interface ClientRecord {
  admitted: number[];
  /** Requests sent after waiting the Retry-After of a 429, and refused again. */
  refusedAfterWaiting: number;
  waits: number;
}

/**
 * `clients` clients sending `request` one after another for RUN_MS: on a 429 each waits exactly
 * its Retry-After, then sends the same request again.
 */
async function honestClients(clients: number, request: (address: string, n: number) => Promise<Answer>): Promise<{ records: ClientRecord[]; started: number }> {
  const started = Date.now();
  const records = Array.from({ length: clients }, (): ClientRecord => ({ admitted: [], refusedAfterWaiting: 0, waits: 0 }));
  await Promise.all(
    records.map(async (record, c) => {
      const address = `127.0.0.${c + 2}`;
      let n = 0;
      let waited = false;
      while (Date.now() - started < RUN_MS) {
        const answer = await request(address, n);
        if (answer.status === 429) {
          assert.ok(answer.retryAfter && Number.isInteger(answer.retryAfter) && answer.retryAfter >= 1, `Retry-After ${answer.retryAfter}`);
          if (waited) record.refusedAfterWaiting++;
          record.waits++;
          waited = true;
          await new Promise((r) => setTimeout(r, answer.retryAfter! * 1000));
          continue;
        }
        assert.ok(answer.status < 300, `status ${answer.status}`);
        record.admitted.push(Date.now() - started);
        waited = false;
        n++;
      }
    }),
  );
  return { records, started };
}

/** What every endpoint must show: nobody who waited was refused, the key's full rate, no starving. */
function assertFair(records: ClientRecord[], burst: number, perSecond: number) {
  const admitted = records.flatMap((r) => r.admitted).sort((a, b) => a - b);
  const detail = JSON.stringify(records.map((r) => ({ admitted: r.admitted.length, waits: r.waits, refusedAfterWaiting: r.refusedAfterWaiting })));
  assert.deepEqual(records.map((r) => r.refusedAfterWaiting), records.map(() => 0), `a client that waited its Retry-After was refused: ${detail}`);
  assert.ok(records.every((r) => r.waits > 0), `every client was made to wait (the limit was reached): ${detail}`);
  // After the burst, one a second: the turns of the run, less the one that may fall just past its end.
  const expected = burst + (perSecond * RUN_MS) / 1000;
  assert.ok(admitted.length >= expected - 3 && admitted.length <= expected + 1, `${admitted.length} admitted in ${RUN_MS} ms, the full rate is ${expected}: ${detail}`);
  // The turns after the burst are shared: none of the clients starves.
  const afterBurst = records.map((r) => r.admitted.filter((t) => t > admitted[burst - 1]!).length);
  const share = (admitted.length - burst) / records.length;
  assert.ok(afterBurst.every((n) => n >= share / 2), `turns after the burst per client ${afterBurst.join(', ')} (a fair share is ${share.toFixed(1)}): ${detail}`);
}

describe('Retry-After a client can trust: clients that wait are let through then, at the full rate, and none starves', function () {
  this.timeout(120_000);
  let api: RunningApi;
  let call: ReturnType<typeof client>;

  before(async () => {
    api = await startApi({
      TRANSCRIPTION_RATE_LIMIT_PER_MINUTE: '60',
      // No worker runs: every transcript stays queued, and no concurrency limit is in the way.
      TRANSCRIPTION_CONCURRENCY_LIMIT: '0',
      DIALOG_ANALYSIS_RATE_LIMIT_PER_MINUTE: '60',
      VOICE_RATE_LIMIT_PER_MINUTE: '60',
      REQUESTS_PER_MINUTE_KNOWLEDGE_BASE: '60',
      // The per-key request limits of the creation endpoints are far above their own here.
      REQUESTS_PER_MINUTE_TRANSCRIPTION: '100000',
      REQUESTS_PER_MINUTE_DIALOG_ANALYSIS: '100000',
      REQUESTS_PER_MINUTE_VOICES: '100000',
    });
    call = client(api.url);
  });
  after(async () => api?.close());

  it('transcripts (POST /v2/transcript, TRANSCRIPTION_RATE_LIMIT_PER_MINUTE)', async () => {
    const p = await newPartner(call);
    const body = Buffer.from(JSON.stringify({ audio_url: 'http://127.0.0.1:9/never-fetched.mp3' }));
    const { records } = await honestClients(3, (address) => send(address, `${api.url}/v2/transcript`, { method: 'POST', headers: { authorization: p.key, 'content-type': 'application/json' }, body }));
    assertFair(records, 60, 1);
  });

  it('dialog analyses (POST /v2/dialog_analyses, DIALOG_ANALYSIS_RATE_LIMIT_PER_MINUTE)', async () => {
    const p = await newPartner(call);
    const body = Buffer.from(JSON.stringify({ input: dialogInput('retry-after') }));
    const { records } = await honestClients(3, (address) => send(address, `${api.url}/v2/dialog_analyses`, { method: 'POST', headers: { 'x-api-key': p.key, 'content-type': 'application/json' }, body }));
    assertFair(records, 60, 1);
  });

  it('voices (POST /api/voices/{partner}/empty, VOICE_RATE_LIMIT_PER_MINUTE)', async () => {
    const p = await newPartner(call);
    const { records } = await honestClients(3, (address, n) => {
      const f = form({ name: `voice-${address}-${n}` });
      return send(address, `${api.url}/api/voices/${p.name}/empty`, { method: 'POST', headers: { 'x-api-key': p.key, 'content-type': f.contentType }, body: f.body });
    });
    assertFair(records, 60, 1);
  });

  it('the per-key request limit (REQUESTS_PER_MINUTE_KNOWLEDGE_BASE)', async () => {
    const p = await newPartner(call);
    const { records } = await honestClients(3, (address) => send(address, `${api.url}/api/knowledgebases/${p.name}`, { method: 'GET', headers: { 'x-api-key': p.key } }));
    assertFair(records, 10, 1);
  });

  it('a client hammering without waiting is refused, and does not take the turns of the clients that wait', async () => {
    const p = await newPartner(call);
    const url = `${api.url}/api/knowledgebases/${p.name}`;
    const headers = { 'x-api-key': p.key };
    let hammering = true;
    const hammer = { admitted: 0, refused: 0 };
    const hammerer = (async () => {
      while (hammering) {
        const answer = await send('127.0.0.9', url, { method: 'GET', headers });
        if (answer.status === 429) hammer.refused++;
        else hammer.admitted++;
      }
    })();
    const { records } = await honestClients(2, (address) => send(address, url, { method: 'GET', headers }));
    hammering = false;
    await hammerer;
    assert.deepEqual(records.map((r) => r.refusedAfterWaiting), [0, 0], 'the clients that wait get through when they come back');
    const waiters = records.reduce((n, r) => n + r.admitted.length, 0);
    assert.ok(hammer.refused > hammer.admitted, `the hammering client is mostly refused: ${JSON.stringify(hammer)}`);
    // All together never more than the limit: the burst and one a second.
    assert.ok(waiters + hammer.admitted <= 10 + RUN_MS / 1000 + 1, `${waiters} + ${hammer.admitted} admitted`);
    assert.ok(records.every((r) => r.admitted.length >= 2), `each waiting client had turns: ${JSON.stringify(records.map((r) => r.admitted.length))}`);
  });
});

describe('Retry-After a client can trust: the per-key request limits of the other interfaces', function () {
  this.timeout(120_000);
  let api: RunningApi;
  let call: ReturnType<typeof client>;

  before(async () => {
    api = await startApi({ REQUESTS_PER_MINUTE_SPEECH: '60', REQUESTS_PER_MINUTE_TRANSCRIPTION: '60' });
    call = client(api.url);
  });
  after(async () => api?.close());

  it('a quota key on the speech interface (GET /v2/audio/voices, REQUESTS_PER_MINUTE_SPEECH)', async () => {
    const key = (await newQuotaKey(call, { quota_type: 'speech' })).key;
    const { records } = await honestClients(3, (address) => send(address, `${api.url}/v2/audio/voices`, { method: 'GET', headers: { authorization: `Bearer ${key}` } }));
    assertFair(records, 10, 1);
  });

  it('a partner key on the transcription interface (GET /v2/transcript, REQUESTS_PER_MINUTE_TRANSCRIPTION)', async () => {
    const p = await newPartner(call);
    const { records } = await honestClients(3, (address) => send(address, `${api.url}/v2/transcript`, { method: 'GET', headers: { authorization: p.key } }));
    assertFair(records, 10, 1);
  });
});
