import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as workflows from '../../workflows/index.js';
import { countedWorkflowTypes } from '../../lib/knowledge/operational-metrics.js';

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
});
