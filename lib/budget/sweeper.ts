import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { budgetSweeperWorkflowId, budgetSweeperWorkflowType, type BudgetSweeperInput } from '../contracts/budget-sweeper.js';
import type { Db } from '../platform/db.js';
import { release } from './ledger.js';
import { isWorkflowRunning } from '../platform/temporal.js';

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


/** Starts the reservation sweeper unless it already runs (every worker calls this at start). */
export async function ensureBudgetSweeper(client: Client, taskQueue: string, input: BudgetSweeperInput) {
  try {
    await client.workflow.start(budgetSweeperWorkflowType, { taskQueue, workflowId: budgetSweeperWorkflowId, args: [input] });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}
