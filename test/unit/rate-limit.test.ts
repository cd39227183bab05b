import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { createDb, type Db } from '../../lib/platform/db.js';
import pg from 'pg';
import { consumeRateLimit, projectedTurn, RequestRateLimiter, type RateDecision } from '../../lib/platform/rate-limit.js';
import { testStack } from '../support/stack.js';

/** The rate-limit schedules, against the test database (what every API replica shares). */
describe('rate limits', () => {
  let db: Db;
  before(() => {
    db = createDb(testStack().databaseUrl);
  });
  after(() => db.$disconnect());
  const limitOf = (key: string, limit: number, windowSeconds: number, client = 'client-a') => ({ key, limit, windowSeconds, client });

  it('admits a burst of the limit, then refuses with the Retry-After of the next turn, booked for that client', async () => {
    const key = `test:${crypto.randomUUID()}`;
    for (let i = 0; i < 3; i++) assert.deepEqual(await consumeRateLimit(db, limitOf(key, 3, 60)), { allowed: true }, `request ${i + 1}`);
    const refused = await consumeRateLimit(db, limitOf(key, 3, 60));
    assert.equal(refused.allowed, false);
    if (refused.allowed) return;
    // One turn every 20 s after the burst: the next comes 20 s after the first request.
    assert.ok(refused.retryAfterSeconds >= 19 && refused.retryAfterSeconds <= 21, `retry after ${refused.retryAfterSeconds} s`);
    const [booked] = await db.$queryRaw<Array<{ owner: string; seconds: number }>>`SELECT owner, extract(epoch FROM due - now())::float8 AS seconds FROM rate_limit_reservations WHERE key = ${key}`;
    assert.equal(booked?.owner, 'client-a');
    // Other keys are not affected.
    assert.deepEqual(await consumeRateLimit(db, limitOf(`${key}:other`, 3, 60)), { allowed: true });
  });

  it('racing requests of one key are admitted exactly up to the burst', async () => {
    const key = `test:${crypto.randomUUID()}`;
    const decisions = await Promise.all(Array.from({ length: 25 }, () => consumeRateLimit(db, limitOf(key, 10, 3600))));
    assert.equal(decisions.filter((d) => d.allowed).length, 10);
  });

  it('a burst of many keys from two replicas is admitted exactly up to each key\'s limit, in arrival order', async () => {
    const other = createDb(testStack().databaseUrl);
    try {
      const keys = Array.from({ length: 6 }, () => `test:${crypto.randomUUID()}`);
      const requests = Array.from({ length: 120 }, (_, i) => ({ key: keys[i % keys.length]!, replica: i % 4 === 0 ? other : db }));
      const decisions = await Promise.all(requests.map(({ key, replica }) => consumeRateLimit(replica, limitOf(key, 7, 3600))));
      for (const key of keys) {
        const mine = decisions.filter((_, i) => requests[i]!.key === key);
        assert.equal(mine.filter((d) => d.allowed).length, 7, key);
      }
      // Within one replica, a key's earlier requests are the ones admitted.
      const firstReplica = requests.map((r, i) => ({ ...r, decision: decisions[i]! })).filter((r) => r.replica === db && r.key === keys[1]);
      const allowed = firstReplica.map((r) => r.decision.allowed);
      assert.deepEqual(allowed, [...allowed].sort((a, b) => Number(b) - Number(a)), 'refusals come after admissions');
    } finally {
      await other.$disconnect();
    }
  });

  it('a client that comes back at its Retry-After gets its turn; another client, and the same one asking early, do not take it', async () => {
    // One turn every 2 s, one at once.
    const key = `test:${crypto.randomUUID()}`;
    assert.deepEqual(await consumeRateLimit(db, limitOf(key, 1, 2, 'a')), { allowed: true });
    const b = await consumeRateLimit(db, limitOf(key, 1, 2, 'b'));
    assert.deepEqual(b, { allowed: false, retryAfterSeconds: 2 }, 'b is booked the next turn');
    const c = await consumeRateLimit(db, limitOf(key, 1, 2, 'c'));
    assert.equal(c.allowed, false, 'c is booked the one after');
    const early = await consumeRateLimit(db, limitOf(key, 1, 2, 'b'));
    assert.equal(early.allowed, false, 'b asking before its turn is refused');
    if (early.allowed || c.allowed) return;
    assert.equal(early.retryAfterSeconds, 2, 'and told its turn again (nothing more is booked)');
    await new Promise((r) => setTimeout(r, 2000));
    // At b's turn, a client that was not told to come back is refused (and booked behind c) ...
    assert.equal((await consumeRateLimit(db, limitOf(key, 1, 2, 'd'))).allowed, false);
    // ... and b, coming back, gets through.
    assert.deepEqual(await consumeRateLimit(db, limitOf(key, 1, 2, 'b')), { allowed: true });
    await new Promise((r) => setTimeout(r, c.retryAfterSeconds * 1000 - 2000));
    assert.deepEqual(await consumeRateLimit(db, limitOf(key, 1, 2, 'c')), { allowed: true }, 'c at its turn');
  });

  it('a refusal without a booking moves nothing: a client hammering does not push the turns of others back', async () => {
    const key = `test:${crypto.randomUUID()}`;
    assert.deepEqual(await consumeRateLimit(db, limitOf(key, 2, 20, 'a')), { allowed: true });
    assert.deepEqual(await consumeRateLimit(db, limitOf(key, 2, 20, 'a')), { allowed: true });
    // The hammering client: its first refusal books it a turn, the 40 after it nothing.
    const hammer = await Promise.all(Array.from({ length: 41 }, () => consumeRateLimit(db, limitOf(key, 2, 20, 'h'))));
    assert.ok(hammer.every((d) => !d.allowed));
    const waiter = await consumeRateLimit(db, limitOf(key, 2, 20, 'w'));
    assert.equal(waiter.allowed, false);
    if (waiter.allowed || hammer[0]!.allowed) return;
    assert.equal(waiter.retryAfterSeconds - hammer[0]!.retryAfterSeconds, 10, 'the waiter is booked the turn right after the hammering client\'s one');
  });

  it('a booked turn its client does not come back for is given up after the grace, and the schedule goes on', async () => {
    const key = `test:${crypto.randomUUID()}`;
    assert.deepEqual(await consumeRateLimit(db, limitOf(key, 1, 1, 'a')), { allowed: true });
    assert.equal((await consumeRateLimit(db, limitOf(key, 1, 1, 'gone'))).allowed, false);
    await db.$executeRaw`UPDATE rate_limit_reservations SET due = due - interval '1 minute', expires = expires - interval '1 minute' WHERE key = ${key}`;
    // The turn given up stays spent (the schedule passed it): the next free one is 2 s after the first request.
    await new Promise((r) => setTimeout(r, 2100));
    assert.deepEqual(await consumeRateLimit(db, limitOf(key, 1, 1, 'b')), { allowed: true });
    const [row] = await db.$queryRaw<Array<{ n: number; reserved: number }>>`SELECT (SELECT count(*)::int FROM rate_limit_reservations WHERE key = ${key}) AS n, reserved FROM rate_limit_schedules WHERE key = ${key}`;
    assert.deepEqual(row, { n: 0, reserved: 0 });
  });

  it('keeps the schedules in unlogged tables: deciding waits for no WAL flush', async () => {
    const rows = await db.$queryRaw<Array<{ relname: string; relpersistence: string }>>`SELECT relname, relpersistence::text AS relpersistence FROM pg_class WHERE relname IN ('rate_limit_schedules', 'rate_limit_reservations') ORDER BY relname`;
    assert.deepEqual(rows, [
      { relname: 'rate_limit_reservations', relpersistence: 'u' },
      { relname: 'rate_limit_schedules', relpersistence: 'u' },
    ]);
  });

  describe('RequestRateLimiter: requests well within their limit do not wait for the decision', () => {
    /** Holds the schedule row of a key locked, so that deciding it waits until `release`. */
    async function lockSchedule(key: string) {
      const locker = new pg.Client({ connectionString: testStack().databaseUrl });
      await locker.connect();
      await locker.query('BEGIN');
      const { rowCount } = await locker.query('SELECT 1 FROM rate_limit_schedules WHERE key = $1 FOR UPDATE', [key]);
      assert.equal(rowCount, 1, 'the schedule row exists');
      return async () => {
        await locker.query('COMMIT');
        await locker.end();
      };
    }
    const settled = <T>(promises: Array<Promise<T>>) => {
      const done = new Set<number>();
      promises.forEach((p, i) => void p.then(() => done.add(i)));
      return done;
    };
    const as = { windowSeconds: 3600, client: 'client-a' };

    it('lets up to a tenth of the burst through at once while their decision waits; the rest wait for it; every request is decided', async () => {
      const limiter = new RequestRateLimiter(db);
      const key = `test:${crypto.randomUUID()}`;
      assert.deepEqual(await limiter.consume(key, 100, as), { allowed: true });
      // Let through at once, it is decided just after: its answer is what the process knows of the key.
      await limiter.decided();
      const release = await lockSchedule(key);
      const pending = Array.from({ length: 15 }, () => limiter.consume(key, 100, as));
      const done = settled(pending);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(done.size, 10, 'a tenth of the burst answered while the decision is blocked');
      await release();
      const decisions = await Promise.all(pending);
      assert.ok(decisions.every((d) => d.allowed));
      await limiter.decided();
      // Every request moved the schedule by one turn (36 s each).
      const [row] = await db.$queryRaw<Array<{ turns: number }>>`SELECT round(extract(epoch FROM tat - now()) / 36)::int AS turns FROM rate_limit_schedules WHERE key = ${key}`;
      assert.equal(row?.turns, 16, 'every request decided in Postgres');
    });

    it('admits racing requests of one key exactly up to the burst within a process', async () => {
      const limiter = new RequestRateLimiter(db);
      const key = `test:${crypto.randomUUID()}`;
      const decisions = await Promise.all(Array.from({ length: 25 }, () => limiter.consume(key, 10, as)));
      assert.equal(decisions.filter((d) => d.allowed).length, 10);
      // The same client asking again before its booked turn is refused by this process alone.
      const again = await limiter.consume(key, 10, as);
      assert.equal(again.allowed, false);
      assert.ok(limiter.blockedFor(RequestRateLimiter.blockKey(key, 'client-a')) > 0, 'blocked locally');
    });

    it('near its limit a key waits for the decision: nothing is let through that Postgres would refuse', async () => {
      const limiter = new RequestRateLimiter(db);
      const key = `test:${crypto.randomUUID()}`;
      for (let i = 0; i < 10; i++) assert.equal((await limiter.consume(key, 10, as)).allowed, true, `request ${i + 1}`);
      await limiter.decided();
      const release = await lockSchedule(key);
      const last = limiter.consume(key, 10, as);
      const done = settled([last]);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(done.size, 0, 'the eleventh request waits for Postgres');
      await release();
      assert.equal((await last).allowed, false);
    });

    it('a client booked a turn is not blocked: another client behind another address still asks Postgres', async () => {
      const limiter = new RequestRateLimiter(db);
      const key = `test:${crypto.randomUUID()}`;
      assert.equal((await limiter.consume(key, 1, { windowSeconds: 2, client: 'a' })).allowed, true);
      assert.deepEqual(await limiter.consume(key, 1, { windowSeconds: 2, client: 'b' }), { allowed: false, retryAfterSeconds: 2 });
      assert.equal(limiter.blockedFor(RequestRateLimiter.blockKey(key, 'b')), 0, 'b was booked a turn: not blocked');
      await new Promise((r) => setTimeout(r, 2000));
      assert.deepEqual(await limiter.consume(key, 1, { windowSeconds: 2, client: 'b' }), { allowed: true }, 'b at its turn');
    });

    it('across replicas, a key over its limit gets at most a tenth of the burst through a replica that has not decided it yet', async () => {
      const other = createDb(testStack().databaseUrl);
      try {
        const key = `test:${crypto.randomUUID()}`;
        const a = new RequestRateLimiter(db);
        const b = new RequestRateLimiter(other);
        for (let i = 0; i < 20; i++) assert.equal((await a.consume(key, 20, as)).allowed, true);
        await a.decided();
        const decisions: RateDecision[] = await Promise.all(Array.from({ length: 10 }, () => b.consume(key, 20, as)));
        assert.ok(decisions.filter((d) => d.allowed).length <= 2, JSON.stringify(decisions));
        assert.equal((await b.consume(key, 20, as)).allowed, false, 'then refused');
      } finally {
        await other.$disconnect();
      }
    });

    it('projects a known schedule on its own clock as time passes', () => {
      // Postgres' clock 1,000 ms ahead of this process's; the next turn 500 ms after its answer.
      const answer = { tatMs: 11_500, nowMs: 11_000, at: 10_000 };
      assert.equal(projectedTurn(answer, 100, 0, 10_000), 10_500);
      assert.equal(projectedTurn(answer, 100, 3, 10_000), 10_800, 'three requests since');
      assert.equal(projectedTurn(answer, 100, 0, 12_000), 12_000, 'a turn in the past is now');
    });
  });
});
