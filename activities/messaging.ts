import type { Services } from '../lib/runtime.js';
import { deleteLegacyCompletion, generateLegacyCompletion } from '../lib/messaging/legacy.js';

/** Activities of the legacy /v2/completions workflow; both are idempotent by completion id. */
export function createMessagingActivities(deps: Services) {
  return {
    generateLegacyCompletion: ({ id, retentionSeconds }: { id: string; retentionSeconds: number }) => generateLegacyCompletion(deps, id, retentionSeconds),
    deleteLegacyCompletion: ({ id }: { id: string }) => deleteLegacyCompletion(deps, id),
  };
}
