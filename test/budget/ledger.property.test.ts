import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fc from 'fast-check';
import { createDb, Prisma, type Db } from '../../lib/db.js';
import { release, reserve, resolveUncertain, settle, type BlockReason } from '../../lib/budget/ledger.js';
import { testStack } from '../support/stack.js';

/**
 * Model-based property test of budget admission against the real ledger in Postgres: random
 * interleavings of reserve / settle / settle-without-usage / release / expire / resolve / limit
 * changes. A plain in-memory model says what must happen; after every step the database must agree,
 * every admission must keep consumed + reserved within every limit, every operation resolves at
 * most once, and the ledger balances (consumed equals the sum of settled events).
 */
const D = Prisma.Decimal;
type Dim = 'characters' | 'tokens' | 'dollars';

type Op =
  | { kind: 'reserve'; characters: number; tokens: number; cents: number; requestLimit: number | null }
  | { kind: 'settle'; pick: number; fraction: number }
  | { kind: 'settleUnknown'; pick: number }
  | { kind: 'settleTwice'; pick: number }
  | { kind: 'release'; pick: number }
  | { kind: 'resolve'; pick: number; used: boolean }
  | { kind: 'limit'; dim: Dim; value: number | null };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('reserve' as const), characters: fc.integer({ min: 0, max: 20 }), tokens: fc.integer({ min: 0, max: 20 }), cents: fc.integer({ min: 0, max: 20 }), requestLimit: fc.option(fc.integer({ min: 1, max: 100 }), { freq: 4 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('settle' as const), pick: fc.nat(), fraction: fc.double({ min: 0, max: 1, noNaN: true }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('settleUnknown' as const), pick: fc.nat() }) },
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
              if (got.admitted) {
                model.holds.push({ key, status: 'pending', bound, category });
                admitted = bound;
                // A repeated reserve with the same key returns the same answer and holds nothing more.
                assert.deepEqual(await reserve(db, { knowledgeBaseId: kb.id, operationKey: key, workflowId: 'wf', category, bound: { characters: 1 } }), got);
              }
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
