import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fc from 'fast-check';
import { createDb, type Db } from '../../lib/platform/db.js';
import { authenticateQuotaKey, createQuotaKey, listQuotaKeys, revokeQuotaKey } from '../../lib/messaging/quota-keys.js';
import { releaseQuota, reserveQuota, settleQuota, type QuotaHold } from '../../lib/messaging/quota.js';
import { AppError } from '../../lib/platform/errors.js';
import { eventually } from '../support/system.js';
import { testStack } from '../support/stack.js';

/** Quota holds and settlements against the real ledger in Postgres (no API in between). */
describe('messaging quota ledger', function () {
  this.timeout(300_000);
  let db: Db;
  before(() => {
    db = createDb(testStack().databaseUrl, 4);
  });
  after(() => db.$disconnect());

  const newKey = async (tokens: number) => (await createQuotaKey(db, { name: `ledger-${crypto.randomUUID()}`, quota_type: 'chat', token_amount: tokens })).id;
  const consumed = async (id: string) => Number((await db.quotaKey.findUniqueOrThrow({ where: { id } })).tokensConsumed);
  const hold = (quotaKeyId: string, tokens: number) => reserveQuota(db, { quotaKeyId, operationKey: `op-${crypto.randomUUID()}`, endpoint: 'chat', tokens, holdMs: 60_000 });
  const refusal = (err: unknown) => (err instanceof AppError ? err.code : String(err));

  it('settles once, releases once, and refuses what no longer fits', async () => {
    const id = await newKey(100);
    const a = await hold(id, 60);
    // Room held by a request in flight may come back: the refusal does not forbid a retry.
    await assert.rejects(hold(id, 50), (err: AppError) => /^quota exhausted for now: the request needs up to 50 tokens.*40 of 100 remain while 60 are held/.test(err.message) && err.details?.retry !== false);
    assert.equal(await settleQuota(db, a, 30), 'settled');
    // Room nobody holds cannot cover it: no retry can pass.
    await assert.rejects(hold(id, 80), (err: AppError) => /^quota exhausted: the request needs up to 80 tokens.*70 of 100 remain; lower the output limit/.test(err.message) && err.details?.retry === false);
    assert.equal(await settleQuota(db, a, 30), 'already_resolved', 'a repeat charges nothing');
    assert.equal(await consumed(id), 30);
    const b = await hold(id, 70);
    await releaseQuota(db, b.operationKey);
    assert.equal(await settleQuota(db, b, 70), 'already_resolved', 'a released hold is not settled later');
    assert.equal(await consumed(id), 30);
  });

  it('charges a request whose hold a database crash lost (holds are committed without waiting for the WAL flush)', async () => {
    const id = await newKey(1000);
    const lost = await hold(id, 200);
    // What a PostgreSQL crash inside the flush window leaves behind: no trace of the hold.
    await db.quotaReservation.delete({ where: { operationKey: lost.operationKey } });
    assert.equal(await settleQuota(db, lost, 120), 'settled');
    assert.equal(await consumed(id), 120, 'the used tokens are charged all the same');
    assert.equal((await db.quotaReservation.findUniqueOrThrow({ where: { operationKey: lost.operationKey } })).status, 'settled');
    assert.equal(await settleQuota(db, lost, 120), 'already_resolved', 'and only once');
    const unknown = await hold(id, 300);
    await db.quotaReservation.delete({ where: { operationKey: unknown.operationKey } });
    assert.equal(await settleQuota(db, unknown, null), 'settled');
    assert.equal(await consumed(id), 420, 'unknown usage of a lost hold is charged the whole hold');
  });

  /**
   * Model-based: random interleavings of holds (alone and in bursts that the group commit decides
   * together), settlements (known and unknown usage, repeated, in bursts with a repeat inside),
   * releases, expiry, holds lost in a crash and revocation, against a plain model of the rules. After
   * every step the key row, the holds and the listing agree with the model, and consumption equals
   * the sum of what settled holds used.
   */
  describe('property: agrees with a model of the rules', () => {
    type Op =
      | { kind: 'reserve'; tokens: number }
      | { kind: 'reserveBurst'; tokens: number[] }
      | { kind: 'settle'; pick: number; used: number | null }
      | { kind: 'settleBurst'; picks: number[]; used: number }
      | { kind: 'release'; pick: number }
      | { kind: 'expire'; pick: number }
      | { kind: 'lose'; pick: number }
      | { kind: 'revoke' };
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      { weight: 5, arbitrary: fc.record({ kind: fc.constant('reserve' as const), tokens: fc.integer({ min: 0, max: 60 }) }) },
      { weight: 2, arbitrary: fc.record({ kind: fc.constant('reserveBurst' as const), tokens: fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 2, maxLength: 8 }) }) },
      { weight: 4, arbitrary: fc.record({ kind: fc.constant('settle' as const), pick: fc.nat(), used: fc.option(fc.integer({ min: 0, max: 80 }), { freq: 4 }) }) },
      { weight: 2, arbitrary: fc.record({ kind: fc.constant('settleBurst' as const), picks: fc.array(fc.nat(), { minLength: 2, maxLength: 6 }), used: fc.integer({ min: 0, max: 40 }) }) },
      { weight: 2, arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('expire' as const), pick: fc.nat() }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('lose' as const), pick: fc.nat() }) },
      { weight: 1, arbitrary: fc.constant({ kind: 'revoke' as const }) },
    );

    interface ModelHold {
      hold: QuotaHold;
      status: 'pending' | 'settled' | 'released' | 'lost';
      expired: boolean;
    }

    class Model {
      consumed = 0;
      revoked = false;
      holds: ModelHold[] = [];
      constructor(readonly amount: number) {}
      held = () => this.holds.filter((h) => h.status === 'pending' && !h.expired).reduce((a, h) => a + h.hold.tokens, 0);
      admits = (tokens: number): 'admitted' | 'invalid_api_key' | 'quota_exceeded' =>
        this.revoked ? 'invalid_api_key' : Math.max(1, tokens) <= this.amount - this.consumed - this.held() ? 'admitted' : 'quota_exceeded';
      /** The outcome of settling `h` now, applied to the model. */
      settle(h: ModelHold, used: number | null): 'settled' | 'already_resolved' {
        if (h.status !== 'pending' && h.status !== 'lost') return 'already_resolved';
        this.consumed += used ?? h.hold.tokens;
        h.status = 'settled';
        return 'settled';
      }
    }

    it('over random interleavings', async () => {
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 20, max: 200 }), fc.array(opArb, { minLength: 1, maxLength: 25 }), async (amount, ops) => {
          const id = await newKey(amount);
          const model = new Model(amount);
          const pick = (n: number, statuses: ModelHold['status'][]) => {
            const candidates = model.holds.filter((h) => statuses.includes(h.status));
            return candidates.length ? candidates[n % candidates.length]! : model.holds[n % Math.max(1, model.holds.length)];
          };
          const reserveAll = async (tokens: number[]) => {
            const made = tokens.map((t) => ({ quotaKeyId: id, operationKey: `op-${crypto.randomUUID()}`, endpoint: 'chat', tokens: t, holdMs: 60_000 }));
            const results = await Promise.allSettled(made.map((r) => reserveQuota(db, r)));
            results.forEach((r, i) => {
              const expected = model.admits(made[i]!.tokens);
              assert.equal(r.status === 'fulfilled' ? 'admitted' : refusal(r.reason), expected, `hold ${i} of ${made.length} (${made[i]!.tokens} tokens)`);
              if (r.status === 'fulfilled') model.holds.push({ hold: r.value, status: 'pending', expired: false });
            });
          };
          for (const op of ops) {
            switch (op.kind) {
              case 'reserve':
                await reserveAll([op.tokens]);
                break;
              case 'reserveBurst':
                await reserveAll(op.tokens);
                break;
              case 'settle': {
                const h = pick(op.pick, ['pending', 'lost']);
                if (!h) break;
                const expected = model.settle(h, op.used);
                assert.equal(await settleQuota(db, h.hold, op.used), expected);
                break;
              }
              case 'settleBurst': {
                const chosen = op.picks.map((n) => pick(n, ['pending', 'lost'])).filter((h): h is ModelHold => !!h);
                const outcomes = await Promise.all(chosen.map((h) => settleQuota(db, h.hold, op.used)));
                chosen.forEach((h, i) => assert.equal(outcomes[i], model.settle(h, op.used), `settlement ${i} of the burst`));
                break;
              }
              case 'release': {
                const h = pick(op.pick, ['pending']);
                if (!h) break;
                await releaseQuota(db, h.hold.operationKey);
                if (h.status === 'pending') h.status = 'released';
                break;
              }
              case 'expire': {
                // A hold of a process that crashed: it stops counting when it expires (it can still be settled).
                const h = pick(op.pick, ['pending']);
                if (!h || h.status !== 'pending') break;
                await db.quotaReservation.update({ where: { operationKey: h.hold.operationKey }, data: { expiresAt: new Date(Date.now() - 1000) } });
                h.expired = true;
                break;
              }
              case 'lose': {
                const h = pick(op.pick, ['pending']);
                if (!h || h.status !== 'pending') break;
                await db.quotaReservation.delete({ where: { operationKey: h.hold.operationKey } });
                h.status = 'lost';
                break;
              }
              case 'revoke':
                await revokeQuotaKey(db, id);
                model.revoked = true;
                break;
            }
            const row = await db.quotaKey.findUniqueOrThrow({ where: { id } });
            assert.equal(Number(row.tokensConsumed), model.consumed, 'consumption');
            const rows = await db.quotaReservation.findMany({ where: { quotaKeyId: id } });
            for (const h of model.holds) {
              const r = rows.find((x) => x.operationKey === h.hold.operationKey);
              assert.equal(r?.status ?? 'lost', h.status, `status of ${h.hold.operationKey}`);
            }
            assert.equal(rows.filter((r) => r.status === 'settled').reduce((a, r) => a + Number(r.usedTokens), 0), model.consumed, 'consumption is the sum of settled holds');
            const listed = (await listQuotaKeys(db)).find((k) => k.id === id)!;
            assert.equal(listed.tokens_reserved, model.held(), 'live holds');
          }
        }),
        { numRuns: 120 },
      );
    });
  });

  describe('racing', () => {
    it('racing holds of one key admit exactly what the amount covers', async () => {
      const id = await newKey(1000);
      const results = await Promise.allSettled(Array.from({ length: 64 }, () => hold(id, 30)));
      assert.equal(results.filter((r) => r.status === 'fulfilled').length, 33, '33 holds of 30 fit in 1000 tokens');
      assert.ok(results.every((r) => r.status === 'fulfilled' || refusal(r.reason) === 'quota_exceeded'));
      const admitted = results.filter((r): r is PromiseFulfilledResult<QuotaHold> => r.status === 'fulfilled').map((r) => r.value);
      // Settling below the hold frees the rest for the next racers, and never more.
      await Promise.all(admitted.map((h) => settleQuota(db, h, 10)));
      assert.equal(await consumed(id), 330);
      const second = await Promise.allSettled(Array.from({ length: 64 }, () => hold(id, 30)));
      assert.equal(second.filter((r) => r.status === 'fulfilled').length, 22, '670 left: 22 holds of 30');
    });

    it('racing holds of many keys, decided together in shared batches, admit exactly what each amount covers', async () => {
      const ids = await Promise.all(Array.from({ length: 10 }, () => newKey(100)));
      const results = await Promise.all(ids.flatMap((id) => Array.from({ length: 8 }, () => hold(id, 30).then(() => id, () => null))));
      for (const id of ids) assert.equal(results.filter((r) => r === id).length, 3, 'three holds of 30 fit in 100 tokens');
    });

    it('a revoked key is refused by the next admission, whatever a cache still says', async () => {
      const created = await createQuotaKey(db, { name: `revoked-${crypto.randomUUID()}`, quota_type: 'chat', token_amount: 1000 });
      const principal = await authenticateQuotaKey(db, created.api_key, 60);
      // Revoked by another API replica: this process's cache does not know.
      await db.quotaKey.update({ where: { id: created.id }, data: { revokedAt: new Date() } });
      assert.equal((await authenticateQuotaKey(db, created.api_key, 60)).id, principal.id, 'the cached key is still served here');
      await assert.rejects(hold(principal.id, 10), (err) => refusal(err) === 'invalid_api_key');
    });
  });

  describe('the key cache (MESSAGING_KEY_CACHE_SECONDS)', () => {
    it('a cached key is looked up again within its time: a revocation on another replica is refused, a change shows up', async () => {
      const created = await createQuotaKey(db, { name: `cache-${crypto.randomUUID()}`, quota_type: 'chat', token_amount: 1000 });
      await authenticateQuotaKey(db, created.api_key, 1);
      await db.quotaKey.update({ where: { id: created.id }, data: { revokedAt: new Date() } });
      await eventually('the revoked key to be refused', async () => {
        try {
          await authenticateQuotaKey(db, created.api_key, 1);
          return false;
        } catch (err) {
          return refusal(err) === 'invalid_api_key';
        }
      }, 10_000);

      // A key in use: a request past half of its entry's time has it looked up in the background
      // (that request is served from the entry); renamed meanwhile, the new name shows up.
      const busy = await createQuotaKey(db, { name: 'before', quota_type: 'chat', token_amount: 1000 });
      await authenticateQuotaKey(db, busy.api_key, 1);
      await db.quotaKey.update({ where: { id: busy.id }, data: { name: 'after' } });
      await eventually('the background lookup to renew the entry', async () => (await authenticateQuotaKey(db, busy.api_key, 1)).name === 'after', 10_000);
    });

    it('the replica that revokes a key forgets it at once', async () => {
      const created = await createQuotaKey(db, { name: `local-${crypto.randomUUID()}`, quota_type: 'chat', token_amount: 1000 });
      await authenticateQuotaKey(db, created.api_key, 3600);
      await revokeQuotaKey(db, created.id);
      await assert.rejects(authenticateQuotaKey(db, created.api_key, 3600), (err) => refusal(err) === 'invalid_api_key');
    });
  });
});
