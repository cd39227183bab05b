import { createDocumentActivities, type DocumentActivityDeps } from './documents.js';
import { createBudgetActivities, type BudgetActivityDeps } from './budget.js';
import { createDeletionActivities, type DeletionActivityDeps } from './deletion.js';
import { createEmbeddingActivities, type EmbeddingActivityDeps } from './embedding.js';
import { createVendorSyncActivities, type VendorSyncActivityDeps } from './vendor-sync.js';
import { createMessagingActivities } from './messaging.js';

/** Every activity the worker registers, built over the process's shared clients. */
export function createActivities(deps: DocumentActivityDeps & BudgetActivityDeps & DeletionActivityDeps & EmbeddingActivityDeps & VendorSyncActivityDeps) {
  return {
    ...createDocumentActivities(deps),
    ...createBudgetActivities(deps),
    ...createDeletionActivities(deps),
    ...createEmbeddingActivities(deps),
    ...createVendorSyncActivities(deps),
    ...createMessagingActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
