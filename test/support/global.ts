import { startTestStack, stopTestStack } from './stack.js';

/** Mocha root fixture: the real servers start once for the whole run and stop at its end. */
export async function mochaGlobalSetup() {
  await startTestStack();
}

export async function mochaGlobalTeardown() {
  await stopTestStack();
}
