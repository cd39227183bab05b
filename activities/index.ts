import { createDocumentActivities, type DocumentActivityDeps } from './documents.js';
import { createBudgetActivities, type BudgetActivityDeps } from './budget.js';
import { createDeletionActivities, type DeletionActivityDeps } from './deletion.js';
import { createEmbeddingActivities } from './embedding.js';
import { createMessagingActivities } from './messaging.js';

/** Every activity the worker registers, built over the process's shared clients. */
export function createActivities(deps: DocumentActivityDeps & BudgetActivityDeps & DeletionActivityDeps) {
  return {
    ...createDocumentActivities(deps),
    ...createBudgetActivities(deps),
    ...createDeletionActivities(deps),
    ...createEmbeddingActivities(deps),
    ...createMessagingActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
