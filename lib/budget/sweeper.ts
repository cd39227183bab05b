import type { Client } from '@temporalio/client';
import type { Db } from '../db.js';
import { release } from './ledger.js';
import { isWorkflowRunning } from '../temporal.js';

/**
 * Releases pending reservations whose workflow is no longer running, as Temporal reports it (never
 * guessed from a clock): a lost job cannot hold capacity forever, and a slow one that still runs
 * keeps its hold, so expiry can never cause an overspend. Only holds older than the grace period
 * are examined, to leave freshly admitted operations alone.
 */
export async function sweepReservations(db: Db, temporal: Client, olderThanSeconds: number): Promise<{ examined: number; released: number }> {
  const stale = await db.budgetReservation.findMany({
    where: { status: 'pending', createdAt: { lt: new Date(Date.now() - olderThanSeconds * 1000) } },
    select: { operationKey: true, workflowId: true },
    take: 500,
  });
  let released = 0;
  const running = new Map<string, boolean>();
  for (const r of stale) {
    if (!running.has(r.workflowId)) running.set(r.workflowId, await isWorkflowRunning(temporal, r.workflowId));
    if (!running.get(r.workflowId) && (await release(db, r.operationKey, 'released by sweeper: workflow closed'))) released++;
  }
  return { examined: stale.length, released };
}

