import type { Services } from '../lib/services.js';
import { deleteLegacyCompletion, generateLegacyCompletion } from '../lib/messaging/legacy.js';
import { heartbeating } from './heartbeating.js';

/** Activities of the legacy /v2/completions workflow; both are idempotent by completion id, the model call never repeated. */
export function createMessagingActivities(deps: Services) {
  return {
    generateLegacyCompletion: ({ id, retentionSeconds }: { id: string; retentionSeconds: number }) => heartbeating(() => generateLegacyCompletion(deps, id, retentionSeconds)),
    deleteLegacyCompletion: ({ id }: { id: string }) => deleteLegacyCompletion(deps, id),
  };
}
