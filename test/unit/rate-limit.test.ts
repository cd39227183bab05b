import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { createDb, type Db } from '../../lib/platform/db.js';
import { consumeRateLimit } from '../../lib/platform/rate-limit.js';
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
});
