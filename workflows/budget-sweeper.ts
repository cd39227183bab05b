import { continueAsNew, proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { BudgetSweeperInput } from '../lib/contracts/budget-sweeper.js';

/**
 * One long-lived workflow (contract: lib/contracts/budget-sweeper.ts) that periodically releases
 * reservations whose workflow has closed (lib/budget/sweeper.ts). Continues as new to keep its
 * history short.
 */

const { sweepStaleReservations } = proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '5s', maximumInterval: '1 minute' },
});

export async function budgetSweeper(input: BudgetSweeperInput): Promise<void> {
  for (let round = 0; round < 100; round++) {
    await sweepStaleReservations({ olderThanSeconds: input.graceSeconds });
    await sleep(input.intervalSeconds * 1000);
  }
  await continueAsNew<typeof budgetSweeper>(input);
}
