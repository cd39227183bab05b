import { condition, makeContinueAsNewFunc, proxyActivities, setHandler } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { reconcileNowSignal, type ReconcileRequest, type ReconcilerInput } from '../lib/contracts/reconciler.js';

/**
 * The reconciler (contract: lib/contracts/reconciler.ts): one round every `intervalSeconds`, or at
 * once when signalled. History bound: it continues as new every 50 rounds (about 10 events a round).
 */
const { reconcileStrandedWork } = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '5s', maximumInterval: '1 minute' },
});

const ROUNDS_PER_RUN = 50;

export async function reconciler(input: ReconcilerInput): Promise<void> {
  let cursor = input.cursor ?? null;
  const named: Required<ReconcileRequest> = { documentIds: [...(input.pending?.documentIds ?? [])], channelSourceIds: [...(input.pending?.channelSourceIds ?? [])] };
  let asked = false;
  setHandler(reconcileNowSignal, (request) => {
    asked = true;
    named.documentIds.push(...(request?.documentIds ?? []));
    named.channelSourceIds.push(...(request?.channelSourceIds ?? []));
  });
  for (let round = 0; round < ROUNDS_PER_RUN; round++) {
    asked = false;
    const request = { documentIds: named.documentIds.splice(0), channelSourceIds: named.channelSourceIds.splice(0) };
    ({ cursor } = await reconcileStrandedWork({ graceSeconds: input.graceSeconds, cursor, named: request }));
    await condition(() => asked, input.intervalSeconds * 1000);
  }
  await makeContinueAsNewFunc<typeof reconciler>()({ ...input, cursor, pending: named });
}
