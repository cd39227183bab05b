import { createDocumentActivities, type DocumentActivityDeps } from './documents.js';
import { createBudgetActivities, type BudgetActivityDeps } from './budget.js';

/** Every activity the worker registers, built over the process's shared clients. */
export function createActivities(deps: DocumentActivityDeps & BudgetActivityDeps) {
  return {
    ...createDocumentActivities(deps),
    ...createBudgetActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
