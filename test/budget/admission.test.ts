import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { createDb, type Db } from '../../lib/db.js';
import { reserve, settle } from '../../lib/budget/ledger.js';
import { sweepReservations } from '../../lib/budget/sweeper.js';
import { connectTemporalClient } from '../../lib/temporal.js';
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

  async function newKb(data: { characterLimit?: bigint; tokenLimit?: bigint } = {}) {
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

  it('the sweeper releases holds of closed workflows and keeps those of running ones', async () => {
    const kb = await newKb({ characterLimit: 100n });
    const running = await temporal.workflow.start('budgetSweeper', {
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
});
