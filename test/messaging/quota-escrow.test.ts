import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { createDb, type Db } from '../../lib/platform/db.js';
import { createLogger } from '../../lib/platform/logger.js';
import { createQuotaKey, listQuotaKeys, revokeQuotaKey } from '../../lib/messaging/quota-keys.js';
import { releaseHold, reserveQuota, returnToSlice, settleQuota, type QuotaHold } from '../../lib/messaging/quota.js';
import { holdOnKey, lendableOnKey, returnEscrows } from '../../lib/messaging/quota-escrow.js';
import { AppError } from '../../lib/platform/errors.js';
import { eventually } from '../support/system.js';
import { testStack } from '../support/stack.js';

/**
 * Escrow slices (lib/messaging/quota-escrow.ts) against the real ledger: two database pools stand
 * for two API processes, each with its own slices. Whatever the slices, the key never admits more
 * than its amount, every used token is charged once, and what a slice did not lend goes back.
 */
describe('messaging quota escrow', function () {
  this.timeout(120_000);
  const log = createLogger({ component: 'test' }, 'error');
  // Long enough that a slice seen in the database is still lent from when the test's next hold
  // comes on a loaded machine (1.5 s was not, with four lanes on two cores).
  const drawMs = 5_000;
  const settings = { drawMs, holdMs: 60_000 };
  let processes: Db[];
  before(() => {
    processes = [createDb(testStack().databaseUrl, 4), createDb(testStack().databaseUrl, 4)];
  });
  after(async () => {
    for (const db of processes) {
      await returnEscrows(db);
      await db.$disconnect();
    }
  });

  const newKey = async (tokens: number) => (await createQuotaKey(processes[0]!, { name: `escrow-${crypto.randomUUID()}`, quota_type: 'chat', token_amount: tokens })).id;
  const hold = (db: Db, quotaKeyId: string, tokens: number) => holdOnKey(db, log, settings, { quotaKeyId, operationKey: `chat-${crypto.randomUUID()}`, endpoint: 'chat', tokens });
  const usage = async (id: string) => (await listQuotaKeys(processes[0]!)).find((k) => k.id === id)!;
  const slices = async (id: string) =>
    (await processes[0]!.pool.query<{ tokens: string }>(`SELECT tokens FROM quota_reservations WHERE "quotaKeyId" = $1 AND endpoint = 'escrow' AND status = 'pending'`, [id])).rows.map((r) => Number(r.tokens));

  it('a busy key is served from a slice: its holds make no row, and the slice gives back what it did not lend', async () => {
    const id = await newKey(10_000_000);
    const [db] = processes as [Db];
    const first = [await hold(db, id, 1000), await hold(db, id, 1000)];
    assert.ok(first.every((h) => !h.escrow), 'the first holds are made in the database');
    await eventually('a slice to lend from', async () => lendableOnKey(db, id) > 0, 10_000);
    assert.equal((await slices(id)).length, 1, 'one slice, held in the database');
    const lent = await hold(db, id, 1000);
    assert.ok(lent.escrow, 'a hold drawn from the slice');
    assert.equal((await processes[0]!.quotaReservation.findUnique({ where: { operationKey: lent.operationKey } })), null, 'no row of its own');
    const [slice] = await slices(id);
    assert.ok(slice! >= 4 * 1000, `a slice of ${slice} tokens`);
    // Settled: charged what it used, and the slice gives up what it held.
    assert.equal(await settleQuota(db, lent, 300), 'settled');
    assert.equal(await settleQuota(db, lent, 300), 'already_resolved', 'only once');
    assert.deepEqual(await slices(id), [slice! - 1000]);
    for (const h of first) await settleQuota(db, h, 100);
    const u = await usage(id);
    assert.equal(u.tokens_consumed, 500);
    assert.equal(u.tokens_reserved, slice! - 1000, 'the slice counts as held while it is drawn from');
    // After its period nothing is held: the slice gave back what it did not lend.
    const idle = await eventually('the slice to be given back', async () => {
      const now = await usage(id);
      return now.tokens_reserved === 0 && now;
    }, 4 * drawMs);
    assert.equal(idle.tokens_remaining, 10_000_000 - 500);
  });

  it('two processes racing on one key with slices admit no more than its amount, and every used token is charged', async () => {
    const amount = 400_000;
    const id = await newKey(amount);
    // Warm both processes up to slices of their own.
    const warm = await Promise.all(processes.flatMap((db) => [hold(db, id, 1000), hold(db, id, 1000)]));
    await Promise.all(warm.map((h, i) => settleQuota(processes[i % 2]!, h, 1000)));
    await eventually('both processes to lend from a slice', async () => processes.every((db) => lendableOnKey(db, id) > 0), 10_000);
    assert.equal((await slices(id)).length, 2, 'a slice each, held in the database');
    const tries = await Promise.allSettled(Array.from({ length: 600 }, (_, i) => hold(processes[i % 2]!, id, 1000)));
    const admitted = tries.filter((t): t is PromiseFulfilledResult<QuotaHold> => t.status === 'fulfilled').map((t) => t.value);
    assert.ok(tries.every((t) => t.status === 'fulfilled' || (t.reason instanceof AppError && t.reason.code === 'quota_exceeded')));
    assert.ok(admitted.some((h) => h.escrow) && admitted.some((h) => !h.escrow), 'holds from slices and from the database');
    // 4 warm-up holds of 1000 are charged: 396 holds of 1000 fit. A process may be refused while
    // the other's slice still keeps room, never admitted beyond the amount.
    assert.ok(admitted.length <= 396, `${admitted.length} holds of 1000 admitted`);
    // Once the slices are given back, what is left is exactly the room nobody was admitted to.
    await Promise.all(processes.map((db) => returnEscrows(db)));
    let later = 0;
    for (;;) {
      const next = await hold(processes[0]!, id, 1000).catch((err: unknown) => {
        if (err instanceof AppError && err.code === 'quota_exceeded') return null;
        throw err;
      });
      if (!next) break;
      admitted.push(next);
      later++;
    }
    assert.equal(admitted.length, 396, `${admitted.length - later} admitted in the race, ${later} after it`);
    await Promise.all(admitted.map((h) => settleQuota(processes[0]!, h, 1000)));
    const u = await usage(id);
    assert.equal(u.tokens_consumed, amount);
    assert.equal(u.tokens_remaining, 0);
  });

  it('returns to slices that come together are applied together, each slice giving up the sum of its own', async () => {
    const [db] = processes as [Db];
    const keys = [await newKey(1_000_000), await newKey(1_000_000)];
    const [first, second] = await Promise.all(
      keys.map((quotaKeyId) => reserveQuota(db, { quotaKeyId, operationKey: `escrow-${crypto.randomUUID()}`, endpoint: 'escrow', tokens: 10_000, holdMs: 60_000 })),
    );
    // A transaction holds the first slice's row: its first return waits, and the returns that come
    // meanwhile go together as the next statement.
    const holder = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM quota_reservations WHERE "operationKey" = $1 FOR UPDATE', [first!.operationKey]);
      const waiting = returnToSlice(db, first!.operationKey, 1000);
      const together = [returnToSlice(db, first!.operationKey, 2000), returnToSlice(db, first!.operationKey, 3000), returnToSlice(db, second!.operationKey, 4000), returnToSlice(db, second!.operationKey, 7000)];
      await holder.query('COMMIT');
      await Promise.all([waiting, ...together]);
    } finally {
      holder.release();
    }
    const [a, b] = await Promise.all(keys.map(async (id) => (await usage(id)).tokens_reserved));
    assert.equal(a, 10_000 - 1000 - 2000 - 3000, 'the first slice gave up all three returns');
    assert.equal(b, 0, 'the second, given back more than it held, holds nothing');
    const { rows } = await db.pool.query<{ status: string }>(`SELECT status FROM quota_reservations WHERE "operationKey" = $1`, [second!.operationKey]);
    assert.equal(rows[0]!.status, 'released');
  });

  it('a hold for a key not verified lately is made in the database, never lent from the slice: revoked elsewhere, it is refused', async () => {
    const id = await newKey(10_000_000);
    const [db] = processes as [Db];
    await hold(db, id, 1000);
    await hold(db, id, 1000);
    await eventually('a slice to lend from', async () => lendableOnKey(db, id) > 0, 10_000);
    await processes[1]!.quotaKey.update({ where: { id }, data: { revokedAt: new Date() } });
    const unverified = holdOnKey(db, log, settings, { quotaKeyId: id, operationKey: `chat-${crypto.randomUUID()}`, endpoint: 'chat', tokens: 1000, keyVerified: false });
    await assert.rejects(unverified, (err) => err instanceof AppError && err.code === 'invalid_api_key');
    assert.ok((await hold(db, id, 1000)).escrow, 'a verified key is still lent from the slice (within MESSAGING_KEY_CACHE_SECONDS of its lookup)');
  });

  it('a hold the model never used goes back to the key; a revoked key lends no more in the process that revoked it', async () => {
    const id = await newKey(10_000_000);
    const [db] = processes as [Db];
    await hold(db, id, 500).then((h) => settleQuota(db, h, 500));
    await hold(db, id, 500).then((h) => settleQuota(db, h, 500));
    await eventually('a slice to lend from', async () => lendableOnKey(db, id) > 0, 10_000);
    const [slice] = await slices(id);
    const lent = await hold(db, id, 500);
    assert.ok(lent.escrow);
    await releaseHold(db, lent);
    assert.deepEqual(await slices(id), [slice! - 500], 'the released hold left the slice');
    assert.equal((await usage(id)).tokens_consumed, 1000, 'and was not charged');
    await revokeQuotaKey(db, id);
    assert.deepEqual(await slices(id), [], 'the slice was given back');
    await assert.rejects(hold(db, id, 500), (err: AppError) => err.code === 'invalid_api_key');
  });
});
