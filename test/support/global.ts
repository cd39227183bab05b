import { connectTemporalClient } from '../../lib/platform/temporal.js';
import { recordHistories } from '../workflows/histories.js';
import { startTestStack, stopTestStack, testStack } from './stack.js';

/** Mocha root fixture: the real servers start once for the whole run and stop at its end. */
export async function mochaGlobalSetup() {
  // An interrupted run (Ctrl-C, CI cancelling) still stops the servers it started.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      void stopTestStack().finally(() => process.exit(130));
    });
  }
  await startTestStack();
}

export async function mochaGlobalTeardown() {
  // `npm run record:histories`: keep the histories this run made, for the replay tests.
  if (process.env.RECORD_WORKFLOW_HISTORIES) {
    const client = await connectTemporalClient(testStack().temporalAddress, 'default');
    const written = await recordHistories(client);
    console.log(`recorded ${written.length} new workflow histories:\n${written.join('\n')}`);
    await client.connection.close();
  }
  await stopTestStack();
}
