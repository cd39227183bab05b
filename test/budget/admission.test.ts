import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { createDb, type Db } from '../../lib/platform/db.js';
import { markUncertain, release, reserve, resolveUncertain, settle } from '../../lib/budget/ledger.js';
import { sweepReservations } from '../../lib/budget/sweeper.js';
import { budgetSweeperWorkflowType } from '../../lib/contracts/budget-sweeper.js';
import { connectTemporalClient } from '../../lib/platform/temporal.js';
import { testStack } from '../support/stack.js';
import type { Client } from '@temporalio/client';

describe('budget admission under concurrency, and the reservation sweeper', function () {
  let db: Db;
  let temporal: Client;
  before(async () => {
    db = createDb(testStack().databaseUrl, 20);
    temporal = await connectTemporalClient(testStack().temporalAddress, 'default');
  });
  after(async () => {
    await db?.$disconnect();
    await temporal?.connection.close();
  });

  async function newKb(data: { characterLimit?: bigint; tokenLimit?: bigint; dollarLimitUsd?: string } = {}) {
    const partner = await db.partner.create({ data: { name: `adm-${crypto.randomUUID()}`, keyHash: crypto.randomUUID() } });
    return db.knowledgeBase.create({ data: { partnerId: partner.id, name: 'kb', ...data } });
  }

  it('many clients racing for the last capacity of one KB admit exactly as many as fit', async () => {
    const kb = await newKb({ characterLimit: 70n, tokenLimit: 1000n });
    const attempts = Array.from({ length: 60 }, (_, i) =>
      reserve(db, { knowledgeBaseId: kb.id, operationKey: `race-${kb.id}-${i}`, workflowId: 'wf', category: 'digitization', bound: { characters: 10 } }),
    );
    const results = await Promise.all(attempts);
    assert.equal(results.filter((r) => r.admitted).length, 7);
    assert.ok(results.filter((r) => !r.admitted).every((r) => !r.admitted && r.reason === 'character_limit_exhausted'));

    // Settling less than reserved frees the rest for the next admissions, and never more.
    const admittedKeys = results.map((r, i) => (r.admitted ? `race-${kb.id}-${i}` : null)).filter(Boolean) as string[];
    await Promise.all(admittedKeys.map((k) => settle(db, k, { characters: 5 })));
    const second = await Promise.all(
      Array.from({ length: 20 }, (_, i) => reserve(db, { knowledgeBaseId: kb.id, operationKey: `race2-${kb.id}-${i}`, workflowId: 'wf', category: 'digitization', bound: { characters: 5 } })),
    );
    assert.equal(second.filter((r) => r.admitted).length, 7); // 35 consumed, 35 left: 7 × 5
  });

  it('racing clients on many KBs, decided together in shared batches, admit exactly what fits on each', async () => {
    const kbs = await Promise.all(Array.from({ length: 8 }, () => newKb({ characterLimit: 50n })));
    const attempts = kbs.flatMap((kb) =>
      Array.from({ length: 12 }, (_, i) => reserve(db, { knowledgeBaseId: kb.id, operationKey: `many-${kb.id}-${i}`, workflowId: 'wf', category: 'digitization', bound: { characters: 10 } }).then((r) => ({ kb: kb.id, r }))),
    );
    const results = await Promise.all(attempts);
    for (const kb of kbs) {
      const mine = results.filter((x) => x.kb === kb.id);
      assert.equal(mine.filter((x) => x.r.admitted).length, 5, 'five holds of 10 fit in 50 characters');
      const row = await db.knowledgeBase.findUniqueOrThrow({ where: { id: kb.id } });
      assert.equal(row.charactersHeld, 50n);
    }
  });

  it('a faulty request fails alone: the others decided in its batch are answered', async () => {
    const kb = await newKb({ characterLimit: 100n });
    const ok = (i: number) => reserve(db, { knowledgeBaseId: kb.id, operationKey: `fine-${kb.id}-${i}`, workflowId: 'wf', category: 'digitization', bound: { characters: 10 } });
    const results = await Promise.allSettled([
      ok(0),
      ok(1),
      // Not a document id at all: PostgreSQL refuses the whole statement of its batch.
      reserve(db, { knowledgeBaseId: kb.id, operationKey: `faulty-${kb.id}`, workflowId: 'wf', documentId: 'not-a-uuid', category: 'digitization', bound: { characters: 10 } }),
      ok(2),
      reserve(db, { knowledgeBaseId: crypto.randomUUID(), operationKey: `nowhere-${kb.id}`, workflowId: 'wf', category: 'digitization', bound: { characters: 10 } }),
      ok(3),
    ]);
    assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'rejected', 'fulfilled']);
    assert.ok(results.every((r) => r.status === 'rejected' || r.value.admitted));
    assert.match(String((results[4] as PromiseRejectedResult).reason), /does not exist/);
    const row = await db.knowledgeBase.findUniqueOrThrow({ where: { id: kb.id } });
    assert.equal(row.charactersHeld, 40n, 'exactly the four good requests hold capacity');
    assert.equal(await db.budgetReservation.count({ where: { operationKey: `faulty-${kb.id}` } }), 0);
  });

  it('racing settlements, releases, uncertain marks and resolutions of one KB keep its held counters equal to its holds', async () => {
    const kb = await newKb({ tokenLimit: 1_000_000n });
    const keys = Array.from({ length: 48 }, (_, i) => `mixed-${kb.id}-${i}`);
    await Promise.all(keys.map((operationKey, i) => reserve(db, { knowledgeBaseId: kb.id, operationKey, workflowId: 'wf', category: 'rewrite', bound: { tokens: 10 + i, characters: i } })));
    await Promise.all(
      keys.map(async (k, i) => {
        switch (i % 4) {
          case 0:
            return settle(db, k, { inputTokens: 5, outputTokens: 1, characters: 1 });
          case 1:
            return release(db, k);
          case 2:
            return markUncertain(db, k, 'lost');
          default:
            // settled and released at once: exactly one of them wins
            return Promise.all([settle(db, k, { inputTokens: 2, outputTokens: 2 }), release(db, k)]);
        }
      }),
    );
    await Promise.all(keys.filter((_, i) => i % 4 === 2).map((k, j) => resolveUncertain(db, k, j % 2 ? { used: false } : { used: true, inputTokens: 3, outputTokens: 0 })));
    const row = await db.knowledgeBase.findUniqueOrThrow({ where: { id: kb.id } });
    const holds = await db.budgetReservation.findMany({ where: { knowledgeBaseId: kb.id, status: { in: ['pending', 'uncertain'] } } });
    assert.equal(row.tokensHeld, holds.reduce((a, h) => a + h.tokens, 0n));
    assert.equal(row.charactersHeld, holds.reduce((a, h) => a + h.characters, 0n));
    assert.equal(row.uncertainHolds, holds.filter((h) => h.status === 'uncertain').length);
    assert.equal(holds.length, 0, 'every hold was resolved one way or the other');
    const events = await db.usageEvent.findMany({ where: { knowledgeBaseId: kb.id } });
    assert.equal(row.tokensConsumed, events.reduce((a, e) => a + (e.inputTokens ?? 0n) + (e.outputTokens ?? 0n), 0n), 'the ledger balances');
  });

  it('the sweeper releases holds of closed workflows and keeps those of running ones', async () => {
    const kb = await newKb({ characterLimit: 100n });
    const running = await temporal.workflow.start(budgetSweeperWorkflowType, {
      // Any workflow that stays open will do; the sweeper type sleeps between rounds. Its activities
      // are not served on this queue, so it just stays open.
      taskQueue: `nobody-${crypto.randomUUID()}`,
      workflowId: `hold-owner-${crypto.randomUUID()}`,
      args: [{ intervalSeconds: 3600, graceSeconds: 0 }],
    });
    const openKey = `open-${crypto.randomUUID()}`;
    const lostKey = `lost-${crypto.randomUUID()}`;
    await reserve(db, { knowledgeBaseId: kb.id, operationKey: openKey, workflowId: running.workflowId, category: 'digitization', bound: { characters: 40 } });
    await reserve(db, { knowledgeBaseId: kb.id, operationKey: lostKey, workflowId: `document-${crypto.randomUUID()}`, category: 'digitization', bound: { characters: 60 } });
    const blocked = await reserve(db, { knowledgeBaseId: kb.id, operationKey: `x-${crypto.randomUUID()}`, workflowId: 'wf', category: 'digitization', bound: { characters: 1 } });
    assert.equal(blocked.admitted, false);

    await sweepReservations(db, temporal, 0);
    const statuses = Object.fromEntries((await db.budgetReservation.findMany({ where: { knowledgeBaseId: kb.id } })).map((r) => [r.operationKey, r.status]));
    assert.equal(statuses[openKey], 'pending', 'a running workflow keeps its hold');
    assert.equal(statuses[lostKey], 'released', 'a workflow that does not exist loses its hold');

    await running.terminate('done');
    await sweepReservations(db, temporal, 0);
    assert.equal((await db.budgetReservation.findUniqueOrThrow({ where: { operationKey: openKey } })).status, 'released', 'closed workflow: released');
    const admitted = await reserve(db, { knowledgeBaseId: kb.id, operationKey: `y-${crypto.randomUUID()}`, workflowId: 'wf', category: 'digitization', bound: { characters: 100 } });
    assert.equal(admitted.admitted, true);
  });

  it('the sweeper leaves holds younger than the grace period alone', async () => {
    const kb = await newKb();
    const key = `young-${crypto.randomUUID()}`;
    await reserve(db, { knowledgeBaseId: kb.id, operationKey: key, workflowId: `document-${crypto.randomUUID()}`, category: 'digitization', bound: { characters: 1 } });
    await sweepReservations(db, temporal, 3600);
    assert.equal((await db.budgetReservation.findUniqueOrThrow({ where: { operationKey: key } })).status, 'pending');
  });
  it('an admission that requires headroom is refused by any exhausted limit or uncertain hold, whatever its bound', async () => {
    const ask = (kbId: string) => reserve(db, { knowledgeBaseId: kbId, operationKey: `headroom-${crypto.randomUUID()}`, workflowId: 'wf', category: 'discovery', bound: {}, requireHeadroom: true });
    // No limit at all: always room.
    assert.equal((await ask((await newKb()).id)).admitted, true);
    // A zero bound is admitted without the condition, even on a used-up KB.
    const full = await newKb({ characterLimit: 0n });
    assert.equal((await reserve(db, { knowledgeBaseId: full.id, operationKey: `zero-${crypto.randomUUID()}`, workflowId: 'wf', category: 'discovery', bound: {} })).admitted, true);
    const refusal = await ask(full.id);
    assert.equal(!refusal.admitted && refusal.reason, 'character_limit_exhausted');

    const tokens = await newKb({ tokenLimit: 100n });
    assert.equal((await ask(tokens.id)).admitted, true);
    await reserve(db, { knowledgeBaseId: tokens.id, operationKey: `t-${crypto.randomUUID()}`, workflowId: 'wf', category: 'rewrite', bound: { tokens: 100 } });
    const held = await ask(tokens.id);
    assert.equal(!held.admitted && held.reason, 'token_limit_exhausted', 'a pending hold uses the capacity up');

    const dollars = await newKb({ dollarLimitUsd: '0.5' });
    await reserve(db, { knowledgeBaseId: dollars.id, operationKey: `d-${crypto.randomUUID()}`, workflowId: 'wf', category: 'digitization', bound: { dollars: '0.5' } });
    const broke = await ask(dollars.id);
    assert.equal(!broke.admitted && broke.reason, 'dollar_limit_exhausted');

    const uncertain = await newKb({ characterLimit: 1000n });
    const key = `u-${crypto.randomUUID()}`;
    await reserve(db, { knowledgeBaseId: uncertain.id, operationKey: key, workflowId: 'wf', category: 'rewrite', bound: { tokens: 10 } });
    assert.equal(await settle(db, key, { inputTokens: null, outputTokens: null }), 'uncertain');
    const unresolved = await ask(uncertain.id);
    assert.equal(!unresolved.admitted && unresolved.reason, 'unresolved_provider_outcome');
  });
});
