import type { Client } from '@temporalio/client';
import type { Db } from '../lib/platform/db.js';
import { release, reserve, settle } from '../lib/budget/ledger.js';
import type { ActualUsage, BlockReason, ReserveRequest, ReserveResult } from '../lib/contracts/budget-admission.js';
import type { Config } from '../lib/platform/config.js';
import { sweepReservations } from '../lib/budget/sweeper.js';
import { markBudgetBlocked } from '../lib/knowledge/state.js';

export interface BudgetActivityDeps {
  db: Db;
  temporal: Client;
  config: Pick<Config, 'budgetRecheckIntervalMs'>;
}

/** A refusal tells the waiting workflow when to check again (BUDGET_RECHECK_INTERVAL_MS of the worker). */
export type Admission = ReserveResult | (Extract<ReserveResult, { admitted: false }> & { recheckAfterMs: number });

/** Budget admission as activities: each is idempotent by its operation key. */
export function createBudgetActivities({ db, temporal, config }: BudgetActivityDeps) {
  return {
    async reserveBudget(req: ReserveRequest): Promise<Admission> {
      const result = await reserve(db, req);
      return result.admitted ? result : { ...result, recheckAfterMs: config.budgetRecheckIntervalMs };
    },
    settleBudget: ({ operationKey, usage }: { operationKey: string; usage: ActualUsage }) => settle(db, operationKey, usage),
    releaseBudget: ({ operationKey, note }: { operationKey: string; note?: string }) => release(db, operationKey, note),

    /** Shows the block on the document while its workflow waits for capacity. */
    markBudgetBlocked: ({ documentId, reason, detail }: { documentId: string; reason: BlockReason; detail: string }) => markBudgetBlocked(db, documentId, reason, detail),

    sweepStaleReservations: ({ olderThanSeconds }: { olderThanSeconds: number }) => sweepReservations(db, temporal, olderThanSeconds),
  };
}
