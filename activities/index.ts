import type { Client } from '@temporalio/client';
import type { Services } from '../lib/runtime.js';
import { createDocumentActivities } from './documents.js';
import { createBudgetActivities } from './budget.js';
import { createDeletionActivities } from './deletion.js';
import { createEmbeddingActivities } from './embedding.js';
import { createVendorSyncActivities } from './vendor-sync.js';
import { createMessagingActivities } from './messaging.js';
import { createRewriteActivities } from './rewrite.js';

/** Every activity the worker registers, built over the process's shared clients. */
export function createActivities(deps: Services & { temporal: Client }) {
  return {
    ...createDocumentActivities(deps),
    ...createBudgetActivities(deps),
    ...createDeletionActivities(deps),
    ...createEmbeddingActivities(deps),
    ...createVendorSyncActivities(deps),
    ...createMessagingActivities(deps),
    ...createRewriteActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
