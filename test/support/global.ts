import { startTestStack, stopTestStack } from './stack.js';

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
  await stopTestStack();
}
