import { proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { LegacyCompletionInput } from '../lib/contracts/legacy-completion.js';

/** A lost worker is noticed by its missing heartbeat; the retry finishes without calling the model again. */
const { generateLegacyCompletion } = proxyActivities<Activities>({
  startToCloseTimeout: '15 minutes',
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '2s', maximumInterval: '1 minute' },
});
const { deleteLegacyCompletion } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '5s' },
});

/**
 * One legacy /v2/completions operation (contract: lib/contracts/legacy-completion.ts): generate, keep the result
 * for the retention period, then delete it. The activity records a provider's failure itself, so
 * it ends as state `failed` rather than a failed workflow; its own failures (database) are retried.
 * History bound: under 30 events.
 */
export async function legacyCompletion(input: LegacyCompletionInput): Promise<string> {
  const state = await generateLegacyCompletion({ id: input.id, retentionSeconds: input.retentionSeconds });
  await sleep(input.retentionSeconds * 1000);
  await deleteLegacyCompletion({ id: input.id });
  return state;
}
