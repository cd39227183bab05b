import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as workflows from '../../workflows/index.js';
import { ActivityFailure, ApplicationFailure, RetryState, TimeoutFailure, TimeoutType } from '@temporalio/common';
import { countedWorkflowTypes } from '../../lib/knowledge/operational-metrics.js';
import { activityFailureMessage } from '../../lib/contracts/activity-failure.js';

/**
 * The API starts workflows by the type names of their contracts (lib/contracts/); the worker runs
 * the functions workflows/index.ts exports. A name that differs would leave every start of that
 * workflow waiting on a task queue that no worker can serve.
 */
describe('workflow contracts', () => {
  const dir = fileURLToPath(new URL('../../lib/contracts/', import.meta.url));

  it('every contract names a workflow type that the worker bundle exports, and each type has one contract', async () => {
    const types: string[] = [];
    for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
      const contract = (await import(path.join(dir, file))) as Record<string, unknown>;
      for (const [name, value] of Object.entries(contract)) {
        if (!name.endsWith('WorkflowType')) continue;
        assert.equal(typeof value, 'string', `${file}: ${name}`);
        assert.equal(typeof (workflows as Record<string, unknown>)[value as string], 'function', `${file}: ${name} = ${String(value)} is not exported by workflows/index.ts`);
        types.push(value as string);
      }
    }
    assert.deepEqual([...types].sort(), Object.keys(workflows).sort());
  });

  it('/metrics counts the executions of every workflow type by name', () => {
    assert.deepEqual([...countedWorkflowTypes].sort(), Object.keys(workflows).sort());
  });

  it('an activity that failed for good is recorded for the user in words: its own message, or what a timeout means', () => {
    const failed = (cause: Error) => new ActivityFailure('activity failed', 'digitizeDocument', '1', RetryState.MAXIMUM_ATTEMPTS_REACHED, 'worker', cause);
    assert.equal(activityFailureMessage(failed(ApplicationFailure.create({ message: 'the PDF is encrypted' }))), 'the PDF is encrypted');
    const heartbeat = activityFailureMessage(failed(new TimeoutFailure('activity Heartbeat timeout', undefined, TimeoutType.HEARTBEAT)));
    assert.equal(heartbeat, 'the step stopped reporting progress (its worker was lost or held up) until its retries ran out');
    assert.match(activityFailureMessage(failed(new TimeoutFailure('activity StartToClose timeout', undefined, TimeoutType.START_TO_CLOSE))), /did not finish within its time limit/);
    assert.match(activityFailureMessage(failed(new TimeoutFailure('activity ScheduleToStart timeout', undefined, TimeoutType.SCHEDULE_TO_START))), /no worker took up the step/);
    assert.equal(activityFailureMessage(new Error('plain')), 'plain');
  });
});
