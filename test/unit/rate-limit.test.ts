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
});
