import fs from 'node:fs';
import path from 'node:path';
import type { Context, Suite } from 'mocha';
import { connectTemporalClient } from '../../lib/platform/temporal.js';
import { recordHistories } from '../workflows/histories.js';
import { repoRoot } from '../../scripts/stack.js';
import { needsOf } from './lanes.js';
import { startTestStack, stopTestStack, testStack } from './stack.js';
import { workerComplaints } from './worker-output.js';

/**
 * Mocha root hooks (.mocharc.json): before the first test, start what the files of this run need
 * (test/support/lanes.ts): nothing for unit tests, else a database, else every server; stop it all
 * after the last. Started here rather than in a global fixture, which cannot see the files.
 */
export const mochaHooks = {
  async beforeAll(this: Context) {
    const needs = needsOf(filesOf(this.test!.parent!));
    if (needs === 'nothing') return;
    this.timeout(300_000);
    // An interrupted run (Ctrl-C, CI cancelling) still stops the servers it started.
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.once(signal, () => {
        void stopTestStack().finally(() => process.exit(130));
      });
    }
    await startTestStack(needs);
  },

  afterEach(this: Context) {
    const failed = this.currentTest?.state === 'failed' ? this.currentTest.err : undefined;
    const complaints = failed ? workerComplaints() : '';
    if (failed && complaints) failed.stack = `${failed.stack ?? failed.message}\nwhat the running workers last warned of:\n${complaints}`;
    const file = this.currentTest?.file;
    if (file) fileTimes.set(file, (fileTimes.get(file) ?? 0) + Date.now() - lastTestEnded);
    lastTestEnded = Date.now();
  },

  async afterAll(this: Context) {
    this.timeout(120_000);
    // scripts/test: the time each file took, for its summary of the slowest.
    if (process.env.TEST_FILE_TIMES) {
      const times = Object.fromEntries([...fileTimes].map(([file, ms]) => [path.relative(repoRoot, file), ms]));
      fs.writeFileSync(process.env.TEST_FILE_TIMES, JSON.stringify(times));
    }
    // `npm run record:histories`: keep the histories this run made, for the replay tests.
    if (process.env.RECORD_WORKFLOW_HISTORIES) {
      const client = await connectTemporalClient(testStack().temporalAddress, 'default');
      const written = await recordHistories(client);
      console.log(`recorded ${written.length} new workflow histories:\n${written.join('\n')}`);
      await client.connection.close();
    }
    await stopTestStack();
  },
};

/**
 * Time since the previous test ended goes to the file of the test that ends next: its own `before`
 * hooks and its first test, and the `after` hooks of the file before it (close enough for lanes).
 */
const fileTimes = new Map<string, number>();
let lastTestEnded = Date.now();

function filesOf(suite: Suite): Set<string> {
  const files = new Set<string>();
  const visit = (s: Suite) => {
    if (s.file) files.add(s.file);
    for (const t of s.tests) if (t.file) files.add(t.file);
    s.suites.forEach(visit);
  };
  visit(suite);
  return files;
}
