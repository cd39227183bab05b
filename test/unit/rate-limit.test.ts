import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { createDb, type Db } from '../../lib/platform/db.js';
import pg from 'pg';
import { consumeRateLimit, projectedCount, RequestRateLimiter, type RateDecision } from '../../lib/platform/rate-limit.js';
import { testStack } from '../support/stack.js';

/** The rate-limit counters, against the test database (what every API replica shares). */
describe('rate limits', () => {
  let db: Db;
  before(() => {
    db = createDb(testStack().databaseUrl);
  });
  after(() => db.$disconnect());

  it('admits the limit per window, then refuses with a Retry-After within the window and the next', async () => {
    const key = `test:${crypto.randomUUID()}`;
    for (let i = 0; i < 3; i++) assert.deepEqual(await consumeRateLimit(db, { key, limit: 3, windowSeconds: 60 }), { allowed: true }, `request ${i + 1}`);
    const refused = await consumeRateLimit(db, { key, limit: 3, windowSeconds: 60 });
    assert.equal(refused.allowed, false);
    if (refused.allowed) return;
    assert.ok(refused.retryAfterSeconds >= 1 && refused.retryAfterSeconds <= 120, `retry after ${refused.retryAfterSeconds} s`);
    // Other keys are not affected.
    assert.deepEqual(await consumeRateLimit(db, { key: `${key}:other`, limit: 3, windowSeconds: 60 }), { allowed: true });
  });

  it('racing requests of one key are admitted exactly up to the limit', async () => {
    const key = `test:${crypto.randomUUID()}`;
    const decisions = await Promise.all(Array.from({ length: 25 }, () => consumeRateLimit(db, { key, limit: 10, windowSeconds: 3600 })));
    assert.equal(decisions.filter((d) => d.allowed).length, 10);
  });

  it('a burst of many keys from two replicas is admitted exactly up to each key\'s limit, in arrival order', async () => {
    const other = createDb(testStack().databaseUrl);
    try {
      const keys = Array.from({ length: 6 }, () => `test:${crypto.randomUUID()}`);
      const requests = Array.from({ length: 120 }, (_, i) => ({ key: keys[i % keys.length]!, replica: i % 4 === 0 ? other : db }));
      const decisions = await Promise.all(requests.map(({ key, replica }) => consumeRateLimit(replica, { key, limit: 7, windowSeconds: 3600 })));
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

  it('keeps the counters in an unlogged table: counting waits for no WAL flush', async () => {
    const [row] = await db.$queryRaw<Array<{ relpersistence: string }>>`SELECT relpersistence::text AS relpersistence FROM pg_class WHERE relname = 'rate_limit_windows'`;
    assert.equal(row?.relpersistence, 'u');
  });

  describe('RequestRateLimiter: requests well within their limit do not wait for the count', () => {
    /** Holds the row of a key's current window locked, so that counting it waits until `release`. */
    async function lockWindow(key: string) {
      const locker = new pg.Client({ connectionString: testStack().databaseUrl });
      await locker.connect();
      await locker.query('BEGIN');
      const { rowCount } = await locker.query('SELECT 1 FROM rate_limit_windows WHERE key = $1 FOR UPDATE', [key]);
      assert.equal(rowCount, 1, 'the window row exists');
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

    it('lets up to a tenth of the limit through at once while their count waits; the rest wait for it; every request is counted', async () => {
      const limiter = new RequestRateLimiter(db);
      const key = `test:${crypto.randomUUID()}`;
      assert.deepEqual(await limiter.consume(key, 100, { windowSeconds: 3600 }), { allowed: true });
      const release = await lockWindow(key);
      const pending = Array.from({ length: 15 }, () => limiter.consume(key, 100, { windowSeconds: 3600 }));
      const done = settled(pending);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(done.size, 10, 'a tenth of the limit answered while the count is blocked');
      await release();
      const decisions = await Promise.all(pending);
      assert.ok(decisions.every((d) => d.allowed));
      const [row] = await db.$queryRaw<Array<{ count: number }>>`SELECT sum(count)::int AS count FROM rate_limit_windows WHERE key = ${key}`;
      assert.equal(row?.count, 16, 'every request counted in Postgres');
    });

    it('admits racing requests of one key exactly up to the limit within a process', async () => {
      const limiter = new RequestRateLimiter(db);
      const key = `test:${crypto.randomUUID()}`;
      const decisions = await Promise.all(Array.from({ length: 25 }, () => limiter.consume(key, 10, { windowSeconds: 3600 })));
      assert.equal(decisions.filter((d) => d.allowed).length, 10);
      // Refused from now on, by this process alone.
      const again = await limiter.consume(key, 10, { windowSeconds: 3600 });
      assert.equal(again.allowed, false);
    });

    it('near its limit a key waits for the count: nothing is let through that Postgres would refuse', async () => {
      const limiter = new RequestRateLimiter(db);
      const key = `test:${crypto.randomUUID()}`;
      for (let i = 0; i < 10; i++) assert.equal((await limiter.consume(key, 10, { windowSeconds: 3600 })).allowed, true, `request ${i + 1}`);
      const release = await lockWindow(key);
      const last = limiter.consume(key, 10, { windowSeconds: 3600 });
      const done = settled([last]);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(done.size, 0, 'the eleventh request waits for Postgres');
      await release();
      assert.equal((await last).allowed, false);
    });

    it('across replicas, a key over its limit gets at most a tenth of the limit through a replica that has not counted it yet', async () => {
      const other = createDb(testStack().databaseUrl);
      try {
        const key = `test:${crypto.randomUUID()}`;
        const a = new RequestRateLimiter(db);
        const b = new RequestRateLimiter(other);
        for (let i = 0; i < 20; i++) assert.equal((await a.consume(key, 20, { windowSeconds: 3600 })).allowed, true);
        const decisions: RateDecision[] = await Promise.all(Array.from({ length: 10 }, () => b.consume(key, 20, { windowSeconds: 3600 })));
        assert.ok(decisions.filter((d) => d.allowed).length <= 2, JSON.stringify(decisions));
        assert.equal((await b.consume(key, 20, { windowSeconds: 3600 })).allowed, false, 'then refused');
      } finally {
        await other.$disconnect();
      }
    });

    it('projects a known count as the windows move on', () => {
      const answer = { previous: 40, current: 10, elapsed: 0.5, at: 0 };
      assert.equal(projectedCount(answer, 1000, 0), 40 * 0.5 + 10);
      assert.equal(projectedCount(answer, 1000, 250), 40 * 0.25 + 10);
      assert.equal(projectedCount(answer, 1000, 1000), 10 * 0.5, 'the current window has become the previous one');
      assert.equal(projectedCount(answer, 1000, 1600), 0, 'two windows on, nothing counts');
    });
  });
});
