import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fc from 'fast-check';
import { createDb, Prisma, type Db } from '../../lib/platform/db.js';
import { markUncertain, release, reserve, resolveUncertain, settle } from '../../lib/budget/ledger.js';
import type { BlockReason } from '../../lib/contracts/budget-admission.js';
import { testStack } from '../support/stack.js';

/**
 * Model-based property test of budget admission against the real ledger in Postgres: random
 * interleavings of reserve / settle / settle-without-usage / release / mark uncertain / resolve /
 * limit changes, of bursts of concurrent reserves and settlements (which the ledger's group commit
 * decides together, in one round trip: they must come out as if decided one by one in the order
 * they were made, a repeated operation key inside a burst included), and of a hold released by a
 * plain update outside the ledger (as a document deletion does). A plain in-memory model says what
 * must happen; after every step the database must agree, every admission must keep consumed +
 * reserved within every limit, every operation resolves at most once, the ledger balances (consumed
 * equals the sum of settled events), and the KB row's held counters equal its holds.
 */
const D = Prisma.Decimal;
type Dim = 'characters' | 'tokens' | 'dollars';

type ReserveOp = { kind: 'reserve'; characters: number; tokens: number; cents: number; requestLimit: number | null };
type Op =
  | ReserveOp
  | { kind: 'reserveBurst'; reserves: ReserveOp[]; repeat: number | null }
  | { kind: 'settleBurst'; picks: number[] }
  | { kind: 'markUncertain'; pick: number }
  | { kind: 'externalRelease'; pick: number }
  | { kind: 'settle'; pick: number; fraction: number }
  | { kind: 'settleUnknown'; pick: number }
  | { kind: 'settleUncertainUnknown'; pick: number }
  | { kind: 'settleTwice'; pick: number }
  | { kind: 'release'; pick: number }
  | { kind: 'resolve'; pick: number; used: boolean }
  | { kind: 'limit'; dim: Dim; value: number | null };

const reserveArb: fc.Arbitrary<ReserveOp> = fc.record({ kind: fc.constant('reserve' as const), characters: fc.integer({ min: 0, max: 20 }), tokens: fc.integer({ min: 0, max: 20 }), cents: fc.integer({ min: 0, max: 20 }), requestLimit: fc.option(fc.integer({ min: 1, max: 100 }), { freq: 4 }) });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: reserveArb },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('reserveBurst' as const), reserves: fc.array(reserveArb, { minLength: 2, maxLength: 8 }), repeat: fc.option(fc.nat(), { freq: 2 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('settleBurst' as const), picks: fc.array(fc.nat(), { minLength: 2, maxLength: 6 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('markUncertain' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('externalRelease' as const), pick: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('settle' as const), pick: fc.nat(), fraction: fc.double({ min: 0, max: 1, noNaN: true }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('settleUnknown' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('settleUncertainUnknown' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('settleTwice' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('resolve' as const), pick: fc.nat(), used: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('limit' as const), dim: fc.constantFrom<Dim>('characters', 'tokens', 'dollars'), value: fc.option(fc.integer({ min: 0, max: 100 }), { freq: 3 }) }) },
);

interface Hold {
  key: string;
  status: 'pending' | 'uncertain' | 'settled' | 'released';
  bound: { characters: number; tokens: number; dollars: Prisma.Decimal };
  category: 'digitization' | 'rewrite';
}

class Model {
  limits: Record<Dim, Prisma.Decimal | null> = { characters: null, tokens: null, dollars: null };
  consumed = { characters: 0, tokens: 0, dollars: new D(0) };
  holds: Hold[] = [];
  unknownEvents = 0;

  held() {
    const h = { characters: 0, tokens: 0, dollars: new D(0), uncertain: 0 };
    for (const x of this.holds) {
      if (x.status !== 'pending' && x.status !== 'uncertain') continue;
      h.characters += x.bound.characters;
      h.tokens += x.bound.tokens;
      h.dollars = h.dollars.plus(x.bound.dollars);
      if (x.status === 'uncertain') h.uncertain++;
    }
    return h;
  }

  /** The admission rule of the spec, restated independently of the ledger code. */
  admits(bound: Hold['bound'], requestLimit: number | null): true | BlockReason {
    const h = this.held();
    const wants = { characters: bound.characters > 0, tokens: bound.tokens > 0, dollars: bound.dollars.gt(0) };
    const capped = Object.values(this.limits).some((l) => l !== null) || requestLimit !== null;
    if (capped && h.uncertain > 0 && (wants.characters || wants.tokens || wants.dollars)) return 'unresolved_provider_outcome';
    if (((wants.tokens && this.limits.tokens) || (wants.dollars && this.limits.dollars)) && this.unknownEvents > 0) return 'unknown_historical_usage';
    if (wants.characters) {
      const after = this.consumed.characters + h.characters + bound.characters;
      if (this.limits.characters !== null && this.limits.characters.lt(after)) return 'character_limit_exhausted';
      if (requestLimit !== null && after > requestLimit) return 'request_character_limit';
    }
    if (wants.tokens && this.limits.tokens !== null && this.limits.tokens.lt(this.consumed.tokens + h.tokens + bound.tokens)) return 'token_limit_exhausted';
    if (wants.dollars && this.limits.dollars !== null && this.limits.dollars.lt(this.consumed.dollars.plus(h.dollars).plus(bound.dollars))) return 'dollar_limit_exhausted';
    return true;
  }
}

/** What a refusal says: the exact numbers, dollars without trailing zeros. */
const refusalDetail: Record<BlockReason, RegExp> = {
  unresolved_provider_outcome: /^\d+ operation\(s\) with an unresolved provider outcome$/,
  unknown_historical_usage: /^\d+ usage event\(s\) with unknown usage$/,
  character_limit_exhausted: /^needs \d+ characters, \d+ remaining of \d+$/,
  request_character_limit: /^needs \d+ characters in total, the request allows \d+$/,
  token_limit_exhausted: /^needs \d+ tokens, \d+ remaining of \d+$/,
  dollar_limit_exhausted: /^needs \$(?:0|[1-9]\d*)(?:\.\d*[1-9])?, \$(?:0|[1-9]\d*)(?:\.\d*[1-9])? remaining of \$(?:0|[1-9]\d*)(?:\.\d*[1-9])?$/,
};

describe('budget ledger (property-based, real Postgres)', function () {
  this.timeout(300_000);
  let db: Db;
  before(() => {
    db = createDb(testStack().databaseUrl, 4);
  });
  after(() => db?.$disconnect());

  async function newKb() {
    const partner = await db.partner.create({ data: { name: `prop-${crypto.randomUUID()}`, keyHash: crypto.randomUUID() } });
    return db.knowledgeBase.create({ data: { partnerId: partner.id, name: 'kb' } });
  }

  async function assertLedger(kbId: string, model: Model, admittedBound: Hold['bound'] | null) {
    const kb = await db.knowledgeBase.findUniqueOrThrow({ where: { id: kbId } });
    const events = await db.usageEvent.findMany({ where: { knowledgeBaseId: kbId } });
    const holds = await db.budgetReservation.findMany({ where: { knowledgeBaseId: kbId } });
    // The database agrees with the model.
    assert.equal(Number(kb.charactersConsumed), model.consumed.characters);
    assert.equal(Number(kb.tokensConsumed), model.consumed.tokens);
    assert.equal(kb.dollarsConsumed.toFixed(8), model.consumed.dollars.toFixed(8));
    for (const h of model.holds) assert.equal(holds.find((x) => x.operationKey === h.key)?.status, h.status, `status of ${h.key}`);
    // The ledger balances: consumed is exactly the sum of settled events, one event per operation.
    assert.equal(kb.charactersConsumed, events.reduce((a, e) => a + e.characters, 0n));
    assert.equal(kb.tokensConsumed, events.reduce((a, e) => a + (e.inputTokens ?? 0n) + (e.outputTokens ?? 0n), 0n));
    assert.equal(kb.dollarsConsumed.toFixed(8), events.reduce((a, e) => a.plus(e.costUsd ?? 0), new D(0)).toFixed(8));
    assert.equal(new Set(events.map((e) => e.operationKey)).size, events.length);
    assert.equal(events.length, holds.filter((h) => h.status === 'settled').length);
    // What the holds hold is counted on the KB row (a trigger keeps it), which admission reads.
    const live = holds.filter((h) => h.status === 'pending' || h.status === 'uncertain');
    assert.equal(kb.charactersHeld, live.reduce((a, h) => a + h.characters, 0n), 'charactersHeld equals the holds');
    assert.equal(kb.tokensHeld, live.reduce((a, h) => a + h.tokens, 0n), 'tokensHeld equals the holds');
    assert.equal(kb.dollarsHeld.toFixed(8), live.reduce((a, h) => a.plus(h.dollars), new D(0)).toFixed(8), 'dollarsHeld equals the holds');
    assert.equal(kb.uncertainHolds, live.filter((h) => h.status === 'uncertain').length, 'uncertainHolds equals the uncertain holds');
    // Events whose token usage is unknown are counted on the KB row, which admission reads.
    assert.equal(kb.unknownUsageEvents, model.unknownEvents);
    assert.equal(events.filter((e) => e.category !== 'digitization' && (e.inputTokens === null || e.outputTokens === null)).length, model.unknownEvents);
    // At every admission consumed + reserved stays within every limit the operation draws on. (A
    // limit lowered below what is already held is allowed by the spec; it blocks new spending.)
    if (admittedBound) {
      const held = model.held();
      if (admittedBound.characters > 0 && kb.characterLimit !== null) assert.ok(kb.charactersConsumed + BigInt(held.characters) <= kb.characterLimit, 'characters within limit');
      if (admittedBound.tokens > 0 && kb.tokenLimit !== null) assert.ok(kb.tokensConsumed + BigInt(held.tokens) <= kb.tokenLimit, 'tokens within limit');
      if (admittedBound.dollars.gt(0) && kb.dollarLimitUsd !== null) assert.ok(kb.dollarsConsumed.plus(held.dollars).lte(kb.dollarLimitUsd), 'dollars within limit');
    }
  }

  it('agrees with the model and keeps every invariant over random interleavings', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 30 }), async (ops) => {
        const kb = await newKb();
        const model = new Model();
        const pick = (n: number, statuses: Hold['status'][]) => {
          const candidates = model.holds.filter((h) => statuses.includes(h.status));
          return candidates.length ? candidates[n % candidates.length]! : model.holds[n % Math.max(1, model.holds.length)];
        };
        for (const op of ops) {
          let admitted: Hold['bound'] | null = null;
          switch (op.kind) {
            case 'reserve': {
              const key = `op-${crypto.randomUUID()}`;
              const category = op.tokens > 0 || op.cents > 0 ? 'rewrite' : 'digitization';
              const bound = { characters: op.characters, tokens: category === 'rewrite' ? op.tokens : 0, dollars: category === 'rewrite' ? new D(op.cents).div(100) : new D(0) };
              const expected = model.admits(bound, op.requestLimit);
              const got = await reserve(db, {
                knowledgeBaseId: kb.id, operationKey: key, workflowId: 'wf', category,
                bound: { characters: bound.characters, tokens: bound.tokens, dollars: bound.dollars.toFixed(2) }, requestCharacterLimit: op.requestLimit,
              });
              assert.equal(got.admitted ? true : got.reason, expected);
              if (!got.admitted) assert.match(got.detail, refusalDetail[got.reason], `${got.reason}: ${got.detail}`);
              if (got.admitted) {
                model.holds.push({ key, status: 'pending', bound, category });
                admitted = bound;
                // A repeated reserve with the same key returns the same answer and holds nothing more.
                assert.deepEqual(await reserve(db, { knowledgeBaseId: kb.id, operationKey: key, workflowId: 'wf', category, bound: { characters: 1 } }), got);
              }
              break;
            }
            case 'reserveBurst': {
              // Made at once: the group commit decides them together, and they must come out as
              // if decided one by one in this order. A repeated key repeats an earlier request.
              const requests = op.reserves.map((r) => {
                const category: Hold['category'] = r.tokens > 0 || r.cents > 0 ? 'rewrite' : 'digitization';
                const bound = { characters: r.characters, tokens: category === 'rewrite' ? r.tokens : 0, dollars: category === 'rewrite' ? new D(r.cents).div(100) : new D(0) };
                return { key: `op-${crypto.randomUUID()}`, category, bound, requestLimit: r.requestLimit };
              });
              if (op.repeat !== null) requests.push(requests[op.repeat % requests.length]!);
              const results = await Promise.all(
                requests.map((r) =>
                  reserve(db, {
                    knowledgeBaseId: kb.id, operationKey: r.key, workflowId: 'wf', category: r.category,
                    bound: { characters: r.bound.characters, tokens: r.bound.tokens, dollars: r.bound.dollars.toFixed(2) }, requestCharacterLimit: r.requestLimit,
                  }),
                ),
              );
              const draws = { characters: false, tokens: false, dollars: false };
              const ids = new Map<string, string>();
              requests.forEach((r, i) => {
                const got = results[i]!;
                const earlier = model.holds.find((h) => h.key === r.key);
                if (earlier) {
                  assert.deepEqual(got, { admitted: true, reservationId: ids.get(r.key) }, 'a repeated key in a burst gets the first answer');
                  return;
                }
                const expected = model.admits(r.bound, r.requestLimit);
                assert.equal(got.admitted ? true : got.reason, expected, `request ${i} of the burst`);
                if (!got.admitted) return;
                ids.set(r.key, got.reservationId);
                model.holds.push({ key: r.key, status: 'pending', bound: r.bound, category: r.category });
                draws.characters ||= r.bound.characters > 0;
                draws.tokens ||= r.bound.tokens > 0;
                draws.dollars ||= r.bound.dollars.gt(0);
              });
              admitted = { characters: draws.characters ? 1 : 0, tokens: draws.tokens ? 1 : 0, dollars: new D(draws.dollars ? '0.01' : 0) };
              break;
            }
            case 'settleBurst': {
              const chosen = op.picks.map((n) => pick(n, ['pending', 'uncertain'])).filter((h): h is Hold => !!h);
              const usageOf = (h: Hold) => ({ characters: h.bound.characters, inputTokens: h.bound.tokens, outputTokens: 0, costUsd: h.bound.dollars.toFixed(8) });
              const outcomes = await Promise.all(chosen.map((h) => settle(db, h.key, usageOf(h))));
              chosen.forEach((h, i) => {
                if (h.status === 'pending' || h.status === 'uncertain') {
                  assert.equal(outcomes[i], 'settled', 'the first settlement of a hold in a burst settles it');
                  h.status = 'settled';
                  model.consumed.characters += h.bound.characters;
                  model.consumed.tokens += h.bound.tokens;
                  model.consumed.dollars = model.consumed.dollars.plus(h.bound.dollars);
                } else assert.equal(outcomes[i], 'already_resolved', 'a hold settled earlier in the burst is not settled twice');
              });
              break;
            }
            case 'markUncertain': {
              const h = pick(op.pick, ['pending']);
              if (!h) break;
              assert.equal(await markUncertain(db, h.key, 'worker lost'), h.status === 'pending');
              if (h.status === 'pending') h.status = 'uncertain';
              break;
            }
            case 'externalRelease': {
              // What a document deletion does (activities/deletion.ts): a plain update, not the ledger.
              const h = pick(op.pick, ['pending']);
              if (!h) break;
              const { count } = await db.budgetReservation.updateMany({ where: { operationKey: h.key, status: 'pending' }, data: { status: 'released', note: 'document deleted', resolvedAt: new Date() } });
              assert.equal(count, h.status === 'pending' ? 1 : 0);
              if (h.status === 'pending') h.status = 'released';
              break;
            }
            case 'settle':
            case 'settleTwice': {
              const h = pick(op.kind === 'settle' ? op.pick : op.pick, ['pending']);
              if (!h) break;
              const f = op.kind === 'settle' ? op.fraction : 1;
              const usage = { characters: Math.floor(h.bound.characters * f), inputTokens: Math.floor(h.bound.tokens * f), outputTokens: 0, costUsd: h.bound.dollars.mul(f).toDecimalPlaces(8, D.ROUND_DOWN).toFixed(8) };
              const out = await settle(db, h.key, usage);
              if (h.status === 'pending' || h.status === 'uncertain') {
                // An uncertain operation whose usage arrives late is settled like a pending one.
                assert.equal(out, 'settled');
                h.status = 'settled';
                model.consumed.characters += usage.characters;
                model.consumed.tokens += usage.inputTokens;
                model.consumed.dollars = model.consumed.dollars.plus(usage.costUsd);
              } else assert.equal(out, 'already_resolved');
              if (op.kind === 'settleTwice') assert.equal(await settle(db, h.key, usage), 'already_resolved');
              break;
            }
            case 'settleUnknown': {
              const h = pick(op.pick, ['pending']);
              if (!h || h.status !== 'pending' || h.category !== 'rewrite') break;
              assert.equal(await settle(db, h.key, { inputTokens: null, outputTokens: null }), 'uncertain');
              h.status = 'uncertain';
              break;
            }
            case 'settleUncertainUnknown': {
              // Usage of an uncertain operation that arrives without token counts: recorded as unknown.
              const h = pick(op.pick, ['uncertain']);
              if (!h || h.status !== 'uncertain') break;
              assert.equal(await settle(db, h.key, { inputTokens: null, outputTokens: null }), 'settled');
              h.status = 'settled';
              model.unknownEvents++;
              break;
            }
            case 'release': {
              const h = pick(op.pick, ['pending']);
              if (!h) break;
              const released = await release(db, h.key);
              assert.equal(released, h.status === 'pending');
              if (h.status === 'pending') h.status = 'released';
              break;
            }
            case 'resolve': {
              const h = pick(op.pick, ['uncertain']);
              if (!h) break;
              const out = await resolveUncertain(db, h.key, op.used ? { used: true, inputTokens: h.bound.tokens, outputTokens: 0, costUsd: h.bound.dollars.toFixed(2) } : { used: false });
              assert.equal(out, h.status === 'uncertain' ? 'resolved' : 'not_uncertain');
              if (h.status === 'uncertain') {
                if (op.used) {
                  h.status = 'settled';
                  model.consumed.tokens += h.bound.tokens;
                  model.consumed.dollars = model.consumed.dollars.plus(h.bound.dollars);
                } else h.status = 'released';
              }
              break;
            }
            case 'limit': {
              const column = { characters: 'characterLimit', tokens: 'tokenLimit', dollars: 'dollarLimitUsd' }[op.dim];
              const value = op.value === null ? null : op.dim === 'dollars' ? new D(op.value).div(100) : BigInt(op.value);
              await db.knowledgeBase.update({ where: { id: kb.id }, data: { [column]: value } });
              model.limits[op.dim] = op.value === null ? null : op.dim === 'dollars' ? new D(op.value).div(100) : new D(op.value);
              break;
            }
          }
          await assertLedger(kb.id, model, admitted);
        }
      }),
      { numRuns: 250 },
    );
  });
});
