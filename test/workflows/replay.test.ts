import assert from 'node:assert/strict';
import fs from 'node:fs';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import * as workflows from '../../workflows/index.js';
import { testStack } from '../support/stack.js';
import { historiesDir, readHistory } from './histories.js';

/**
 * Workflow versioning (docs/operations.md, "Workflow versioning"): histories recorded from the real
 * server by earlier code (`npm run record:histories`, test/workflows/histories/<type>.<path>.json)
 * must replay with the current code of the worker bundle. A change that would break runs still open
 * after a deploy — days-long budget blocks, failed steps waiting for `retry`, channel sources —
 * fails here until it is made behind `patched()`.
 */
const files = fs.readdirSync(historiesDir).filter((f) => f.endsWith('.json')).sort();
const typeOf = (file: string) => file.split('.')[0]!;

describe('workflow versioning: recorded histories replay with the current code', function () {
  this.timeout(300_000);

  before(() => {
    try {
      Runtime.install({ logger: new DefaultLogger('WARN') });
    } catch {
      // Another test of this process installed the runtime already.
    }
  });

  it('holds a recorded history of every workflow type the worker runs', () => {
    assert.deepEqual([...new Set(files.map(typeOf))].sort(), Object.keys(workflows).sort());
  });

  it('holds the document pipeline on every path a run can wait on or end in', () => {
    const paths = files.filter((f) => typeOf(f) === 'documentPipeline').map((f) => f.split('.')[1]);
    for (const p of ['completed', 'completed-embedded-with-digitize', 'budget-blocked', 'failed-and-retried', 'cancelled', 'continued-as-new', 'continued-as-new-mid-rewrite', 'continued', 'superseded', 'completed-after-service-outage', 'completed-after-service-outage-resumed']) {
      assert.ok(paths.includes(p), `documentPipeline.${p}.json is missing`);
    }
  });

  it(`replays all ${files.length} histories without a determinism error (Worker.runReplayHistories)`, async () => {
    const histories = files.map((file) => ({ workflowId: `replay-${file}`, history: readHistory(file) }));
    const failures: string[] = [];
    for await (const result of Worker.runReplayHistories({ workflowBundle: { codePath: testStack().workflowBundlePath } }, histories)) {
      if (result.error) failures.push(`${result.workflowId}: ${result.error.message}`);
    }
    assert.deepEqual(failures, []);
  });
});
