/**
 * Contract of the `budgetSweeper` workflow (ID `budget-sweeper`, one per deployment): it releases
 * reservations whose workflow has closed.
 */
export const budgetSweeperWorkflowType = 'budgetSweeper';
export const budgetSweeperWorkflowId = 'budget-sweeper';

export interface BudgetSweeperInput {
  intervalSeconds: number;
  graceSeconds: number;
}
