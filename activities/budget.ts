import type { Client } from '@temporalio/client';
import type { Db } from '../lib/db.js';
import { release, reserve, settle, type ActualUsage, type ReserveRequest } from '../lib/budget/ledger.js';
import { sweepReservations } from '../lib/budget/sweeper.js';

export interface BudgetActivityDeps {
  db: Db;
  temporal: Client;
}

/** Budget admission as activities: each is idempotent by its operation key. */
export function createBudgetActivities({ db, temporal }: BudgetActivityDeps) {
  return {
    reserveBudget: (req: ReserveRequest) => reserve(db, req),
    settleBudget: ({ operationKey, usage }: { operationKey: string; usage: ActualUsage }) => settle(db, operationKey, usage),
    releaseBudget: ({ operationKey, note }: { operationKey: string; note?: string }) => release(db, operationKey, note),

    /** Shows the block on the document while its workflow waits for capacity. */
    async markBudgetBlocked({ documentId, reason, detail }: { documentId: string; reason: string; detail: string }): Promise<void> {
      await db.document.updateMany({ where: { id: documentId }, data: { processingError: `BUDGET_BLOCKED:${reason}: ${detail}` } });
    },

    sweepStaleReservations: ({ olderThanSeconds }: { olderThanSeconds: number }) => sweepReservations(db, temporal, olderThanSeconds),
  };
}
