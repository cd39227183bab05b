import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { client, eventually, startApi, type HttpResult, type RunningApi } from '../support/system.js';
import { newPartner } from '../support/fixtures.js';
import { newQuotaKey } from '../messaging/support.js';
import { testStack } from '../support/stack.js';
import { KeyPacer, KeySlots } from '../../api/http/rate-limits.js';

/**
 * Rate limits on every interface (docs/abuse-resistance.md,
 * "Rate limits on every interface, per key"): per key, counted in Postgres so that every API
 * process shares the count, answered with 429 in each spec's error shape and a Retry-After, and the
 * administrator key is not limited. A refused request changes nothing.
 */
const LIMIT = 3;
const limits = {
  REQUESTS_PER_MINUTE_KNOWLEDGE_BASE: String(LIMIT),
  REQUESTS_PER_MINUTE_MESSAGING: String(LIMIT),
  REQUESTS_PER_MINUTE_TRANSCRIPTION: String(LIMIT),
  REQUESTS_PER_MINUTE_SPEECH: String(LIMIT),
  REQUESTS_PER_MINUTE_DIALOG_ANALYSIS: String(LIMIT),
  REQUESTS_PER_MINUTE_VOICES: String(LIMIT),
  // Blocked answers at once here (the tarpit's hold is measured in bench/abuse-flood.ts, not asserted).
  RATE_LIMIT_TARPIT_MS: '0',
};

type Http = ReturnType<typeof client>;
type Shape = (res: HttpResult) => void;

const exactly = (keys: string[]) => (res: HttpResult) => assert.deepEqual(Object.keys(res.body).sort(), [...keys].sort(), JSON.stringify(res.body));
const shapes: Record<string, Shape> = {
  detail: (res) => {
    exactly(['detail'])(res);
    assert.match(res.body.detail, /Too many requests: this key may send 3 requests a minute/);
  },
  messaging: (res) => {
    exactly(['detail', 'error'])(res);
    assert.equal(res.body.error.message, res.body.detail.message);
    assert.equal(res.body.detail.code, 'rate_limited');
    assert.match(res.body.detail.message, /Too many requests/);
    assert.deepEqual(Object.keys(res.body.detail.context).sort(), ['endpoint', 'request_id']);
  },
  error: (res) => {
    exactly(['error'])(res);
    assert.match(res.body.error, /Too many requests/);
  },
  message: (res) => {
    exactly(['message'])(res);
    assert.match(res.body.message, /Too many requests/);
  },
};

function assertLimited(res: HttpResult, shape: Shape) {
  assert.equal(res.status, 429, JSON.stringify(res.body));
  const retry = Number(res.headers.get('retry-after'));
  assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 120, `Retry-After ${res.headers.get('retry-after')}`);
  shape(res);
}

describe('rate limits on every interface', function () {
  this.timeout(300_000);
  let api: RunningApi;
  let second: RunningApi;
  let http: Http;
  let http2: Http;
  const admin = () => testStack().adminApiKey;

  before(async () => {
    [api, second] = await Promise.all([startApi(limits), startApi(limits)]);
    http = client(api.url);
    http2 = client(second.url);
  });
  after(async () => {
    await api?.close();
    await second?.close();
  });

  /** Postgres' schedules: the turns each key has taken ahead of now (one every 20 s at 3 a minute). */
  const countsByKey = async () => {
    const { rows } = await api.deps.db.pool.query<{ key: string; n: number }>('SELECT key, round(extract(epoch FROM tat - now()) / 20)::int AS n FROM rate_limit_schedules');
    return new Map(rows.map((r) => [r.key, r.n]));
  };

  /** One interface: a read request of a fresh key, and the shape of that interface's 429. */
  interface Case {
    name: string;
    shape: Shape;
    key: () => Promise<string>;
    request: (http: Http, key: string) => Promise<HttpResult>;
  }
  const partnerKey = async () => {
    const p = await newPartner(http);
    return `${p.name} ${p.key}`;
  };
  const split = (pair: string) => ({ name: pair.split(' ')[0]!, key: pair.split(' ')[1]! });
  const cases: Case[] = [
    { name: 'knowledge bases ({detail})', shape: shapes.detail!, key: partnerKey, request: (h, pair) => h('GET', `/api/knowledgebases/${split(pair).name}`, { key: split(pair).key }) },
    { name: 'voices ({detail})', shape: shapes.detail!, key: partnerKey, request: (h, pair) => h('GET', `/api/voices/${split(pair).name}`, { key: split(pair).key }) },
    { name: 'transcription ({error} + Retry-After)', shape: shapes.error!, key: partnerKey, request: (h, pair) => h('GET', `/v2/transcript/${crypto.randomUUID()}`, { key: split(pair).key }) },
    { name: 'dialog analysis ({message})', shape: shapes.message!, key: partnerKey, request: (h, pair) => h('GET', `/v2/dialog_analyses/${crypto.randomUUID()}`, { key: split(pair).key }) },
    { name: 'messaging (its error object)', shape: shapes.messaging!, key: async () => (await newQuotaKey(http)).key, request: (h, key) => h('GET', `/v2/completions/${crypto.randomUUID()}`, { headers: { authorization: `Bearer ${key}` } }) },
    { name: 'speech ({error})', shape: shapes.error!, key: async () => (await newQuotaKey(http, { quota_type: 'speech' })).key, request: (h, key) => h('GET', '/v2/audio/voices', { headers: { authorization: `Bearer ${key}` } }) },
  ];

  for (const c of cases) {
    describe(c.name, () => {
      it(`admits ${LIMIT} requests a minute per key, then answers 429 in the interface's shape with Retry-After`, async () => {
        const key = await c.key();
        for (let i = 0; i < LIMIT; i++) assert.notEqual((await c.request(http, key)).status, 429, `request ${i + 1}`);
        assertLimited(await c.request(http, key), c.shape);
        // Refused again: the client asks before the turn booked for it (and is blocked locally until then).
        const again = await c.request(http, key);
        assertLimited(again, c.shape);
        if (c.name.startsWith('speech')) assert.match(again.headers.get('x-service-tts-request-id') ?? '', /^\d+$/, 'a speech answer carries its request id');
        // Another key of the same interface is not affected.
        assert.notEqual((await c.request(http, await c.key())).status, 429);
      });

      it('counts in Postgres: two API processes share one count per key', async () => {
        const key = await c.key();
        const before = await countsByKey();
        const counted = (n: number) => eventually(`${n} request(s) counted in Postgres`, async () => [...(await countsByKey())].some(([k, m]) => !before.has(k) && m === n));
        // A request well within its limit goes on before Postgres has decided it
        // (docs/abuse-resistance.md, "Requests well within their limit do not wait for the
        // decision"), and a replica may let through one more than the limit while its last answer
        // predates another's request (the margin documented there). Each is counted before the next
        // is sent, so the second process's last answer includes the first process's request:
        assert.notEqual((await c.request(http, key)).status, 429);
        await counted(1);
        assert.notEqual((await c.request(http2, key)).status, 429);
        await counted(2);
        assert.notEqual((await c.request(http, key)).status, 429);
        await counted(3);
        // the fourth is over the limit on either process, the one that has not refused it yet too.
        assertLimited(await c.request(http2, key), c.shape);
      });
    });
  }

  it('handles at most REQUESTS_IN_FLIGHT_PER_KEY requests of one key at once; the others wait their turn in order', async () => {
    const slots = new KeySlots(2);
    const order: string[] = [];
    const first = (await slots.acquire('a'))!;
    const second = (await slots.acquire('a'))!;
    const other = await slots.acquire('b');
    assert.ok(other, 'another key is not held up');
    const third = slots.acquire('a').then((release) => (order.push('third'), release!));
    const fourth = slots.acquire('a').then((release) => (order.push('fourth'), release!));
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, [], 'the third and fourth wait');
    first();
    (await third)();
    second();
    (await fourth)();
    assert.deepEqual(order, ['third', 'fourth']);
  });

  it('spreads a key\'s requests beyond its burst (REQUESTS_BURST_PER_KEY), leaving room for the burst in the window, without holding up other keys', async () => {
    const pacer = new KeyPacer(3);
    const started = Date.now();
    const startedAfter: number[] = [];
    // 105 per 10 s: a burst of 3, then 100 more one every 100 ms (two left for the count's margin).
    const window = { max: 105, seconds: 10 };
    await Promise.all(Array.from({ length: 5 }, () => pacer.pace('a', window).then((ok) => (assert.ok(ok), startedAfter.push(Date.now() - started)))));
    startedAfter.sort((x, y) => x - y);
    assert.ok(startedAfter[2]! < 50, `the burst starts at once: ${startedAfter.join(', ')} ms`);
    assert.ok(startedAfter[3]! >= 90 && startedAfter[4]! >= 190, `then one every 100 ms: ${startedAfter.join(', ')} ms`);
    const other = Date.now();
    assert.ok(await pacer.pace('b', window));
    assert.ok(Date.now() - other < 50, 'another key starts at once');
    // The defaults (1,200 a minute): 20 at once, then 178 of 10 s spread.
    assert.deepEqual(KeyPacer.pacing(20, { max: 200, seconds: 10 }), { burst: 20, intervalMs: 10_000 / 178 });
    // A burst under half the allowance, so the pace stays about half the limit at least.
    assert.deepEqual(KeyPacer.pacing(20, { max: 30, seconds: 10 }), { burst: 14, intervalMs: 10_000 / 14 });
    // A whole window's allowance within one burst: not spread (the count alone bounds the key).
    assert.equal(KeyPacer.pacing(20, { max: 20, seconds: 10 }), null);
    assert.equal(KeyPacer.pacing(20, { max: 3, seconds: 60 }), null);
  });

  it('does not limit the administrator key', async () => {
    const p = await newPartner(http);
    for (let i = 0; i < LIMIT * 3; i++) assert.equal((await http('GET', `/api/knowledgebases/${p.name}`, { key: admin() })).status, 200);
  });

  it('a refused request changes nothing, and its body is never read', async () => {
    const p = await newPartner(http);
    for (let i = 0; i < LIMIT; i++) await http('GET', `/api/knowledgebases/${p.name}`, { key: p.key });
    const refused = await http('POST', `/api/knowledgebases/${p.name}`, { key: p.key, form: { name: 'never-created' } });
    assertLimited(refused, shapes.detail!);
    const kbs = await http('GET', `/api/knowledgebases/${p.name}`, { key: admin() });
    assert.deepEqual(kbs.body, []);
  });

  it('limits requests without a valid key per client address when REQUESTS_PER_MINUTE_ANONYMOUS is set', async () => {
    // The default tarpit: the blocked request is held, then answered in the same shape.
    const anon = await startApi({ ...limits, RATE_LIMIT_TARPIT_MS: '1000', REQUESTS_PER_MINUTE_ANONYMOUS: '2' });
    try {
      const h = client(anon.url);
      const bad = `pk_${crypto.randomBytes(32).toString('base64url')}`;
      assert.equal((await h('GET', '/api/content_types')).status, 200);
      assert.equal((await h('GET', '/api/partners', { key: bad })).status, 401);
      assertLimited(await h('GET', '/api/content_types'), (res) => {
        exactly(['detail'])(res);
        assert.match(res.body.detail, /requests without a valid key from one address may send 2 requests a minute to the knowledge-base interface \(REQUESTS_PER_MINUTE_ANONYMOUS\)/);
      });
      // A valid key is counted on its own.
      const p = await newPartner(h);
      assert.equal((await h('GET', `/api/knowledgebases/${p.name}`, { key: p.key })).status, 200);
    } finally {
      await anon.close();
    }
  });

  it('behind a proxy named by TRUST_PROXY, counts each forwarded client address on its own; a proxy not named is not believed', async () => {
    const settings = { ...limits, RATE_LIMIT_TARPIT_MS: '0', REQUESTS_PER_MINUTE_ANONYMOUS: '2' };
    const behindProxy = await startApi({ ...settings, TRUST_PROXY: 'loopback' });
    const direct = await startApi(settings);
    try {
      const from = (api: RunningApi, address: string) => client(api.url)('GET', '/api/content_types', { headers: { 'X-Forwarded-For': address } });
      for (const address of ['203.0.113.7', '203.0.113.7']) assert.equal((await from(behindProxy, address)).status, 200);
      assert.equal((await from(behindProxy, '203.0.113.7')).status, 429, 'the third request of one client address');
      assert.equal((await from(behindProxy, '198.51.100.9')).status, 200, 'another client behind the same proxy has its own allowance');

      // Without TRUST_PROXY the header is the client's word: every request counts against the
      // connection's address (which earlier tests may have used already), so three are too many.
      const answers = [];
      for (const address of ['192.0.2.1', '192.0.2.2', '192.0.2.3']) answers.push((await from(direct, address)).status);
      assert.ok(answers.includes(429), `three forwarded addresses from one connection: ${answers.join(', ')}`);
    } finally {
      await Promise.all([behindProxy.close(), direct.close()]);
    }
  });

  it('declares the 429 of every authenticated route in the OpenAPI document, in its interface\'s error schema', async () => {
    const doc = (await http('GET', '/openapi.json')).body;
    const styles: Record<string, string> = Object.fromEntries((doc.tags as Array<{ name: string; 'x-error-style': string }>).map((t) => [t.name, t['x-error-style']]));
    assert.deepEqual(styles, {
      'knowledge-base': 'detail', messaging: 'messaging', 'messaging-admin': 'detail', 'dialog-analysis': 'dialog', transcription: 'transcription', voices: 'detail', speech: 'speech',
    });
    const schemaOf: Record<string, string> = { detail: 'Error_detail', messaging: 'Error_messaging', dialog: 'Error_dialog', transcription: 'Error_transcription', speech: 'Error_speech' };
    for (const [p, item] of Object.entries(doc.paths as Record<string, Record<string, { security: unknown[]; tags: string[]; responses: Record<string, any> }>>)) {
      for (const [method, op] of Object.entries(item)) {
        if (op.security.length === 0) continue;
        const r429 = op.responses['429'];
        assert.ok(r429, `${method.toUpperCase()} ${p} declares 429`);
        const ref = r429.content?.['application/json']?.schema?.$ref as string | undefined;
        // Routes that describe their own 429 (a creation limit) keep their description; the others get the interface's error schema.
        if (ref) assert.equal(ref, `#/components/schemas/${schemaOf[(styles as Record<string, string>)[op.tags[0]!]!]}`, `${method.toUpperCase()} ${p}`);
      }
    }
  });
});

describe('rate limits: a client that follows the spreading is never refused by the count', function () {
  this.timeout(120_000);
  let api: RunningApi;
  let http: Http;

  before(async function () {
    this.timeout(60_000);
    // 60 a minute: 10 per 10 s; a burst of 4, then 4 of 10 s, one every 2.5 s.
    api = await startApi({ REQUESTS_PER_MINUTE_KNOWLEDGE_BASE: '60', REQUESTS_BURST_PER_KEY: '4', RATE_LIMIT_TARPIT_MS: '0' });
    http = client(api.url);
  });
  after(async () => api?.close());

  it('one request after another for 15 s: spread after the burst, and never a 429', async () => {
    const p = await newPartner(http);
    // The hardest moment for the client: its burst just after the count's 10 s window begins (windows
    // start at multiples of 10 s of the clock), so that the next window's estimate weighs all of it.
    await new Promise((resolve) => setTimeout(resolve, 10_000 - (Date.now() % 10_000) + 20));
    const started = Date.now();
    const statuses: number[] = [];
    const answeredAt: number[] = [];
    while (Date.now() - started < 15_000) {
      const res = await http('GET', `/api/knowledgebases/${p.name}`, { key: p.key });
      statuses.push(res.status);
      answeredAt.push(Date.now() - started);
      if (res.status !== 200) break;
    }
    assert.deepEqual([...new Set(statuses)], [200], `request ${statuses.length} got ${statuses.at(-1)}, answered at ${answeredAt.join(', ')} ms`);
    // The burst of 4 at once, then one every 2.5 s: 4 + about 6 in 15 s (spreading at the bare
    // limit, one a second after the burst, passed the count's 10 per 10 s and got 429).
    assert.ok(answeredAt[3]! < 1000, `the burst is answered at once: ${answeredAt.join(', ')} ms`);
    assert.ok(statuses.length >= 8 && statuses.length <= 11, `${statuses.length} requests in 15 s: ${answeredAt.join(', ')} ms`);
  });
});
