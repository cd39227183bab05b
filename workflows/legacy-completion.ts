import { proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

const { generateLegacyCompletion } = proxyActivities<Activities>({
  startToCloseTimeout: '15 minutes',
  retry: { maximumAttempts: 3, initialInterval: '2s' },
});
const { deleteLegacyCompletion } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '5s' },
});

/**
 * One legacy /v2/completions operation (ID `legacy-completion-<id>`): generate, keep the result
 * for the retention period, then delete it. The activity records failure itself, so a provider
 * error ends as state `failed` rather than a failed workflow.
 */
export async function legacyCompletion(input: { id: string; retentionSeconds: number }): Promise<string> {
  const state = await generateLegacyCompletion({ id: input.id, retentionSeconds: input.retentionSeconds });
  await sleep(input.retentionSeconds * 1000);
  await deleteLegacyCompletion({ id: input.id });
  return state;
}
