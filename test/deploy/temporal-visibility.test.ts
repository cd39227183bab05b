import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import { binaries, freePort, startTemporal, visibilityIndexName, type ManagedProcess, type TemporalOptions } from '../../scripts/stack.js';
import { searchAttributes } from '../../lib/contracts/search-attributes.js';
import { connectTemporalClient } from '../../lib/platform/temporal.js';
import { testStack } from '../support/stack.js';

const run = promisify(execFile);

/**
 * The embedded Temporal server keeps only the visibility indexes the operator guide's filters use
 * (scripts/stack.ts): every filter of the guide still finds its workflows, each of our search
 * attributes keeps an index, and one that lost it gets it back at the next start.
 */
describe('the embedded Temporal server: visibility indexes for the operator guide filters', function () {
  this.timeout(180_000);
  let options: TemporalOptions;
  let temporal: ManagedProcess;
  let client: Client;
  const id = crypto.randomUUID();
  const workflowId = `visibility-${id}`;

  const indexes = async () =>
    (await run('sqlite3', ['-readonly', options.dbFile!, "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'executions_visibility' AND sql IS NOT NULL"])).stdout.split('\n').filter(Boolean).sort();
  /** The column the server gave each custom search attribute (Keyword01, Bool01, ...). */
  const columns = async () => {
    const { stdout } = await run(binaries.temporal, ['operator', 'namespace', 'describe', '--namespace', 'default', '--address', `127.0.0.1:${options.port}`, '--output', 'json']);
    const aliases = (JSON.parse(stdout) as { config: { customSearchAttributeAliases: Record<string, string> } }).config.customSearchAttributeAliases;
    return new Map(Object.entries(aliases).map(([column, alias]) => [alias, column]));
  };
  /** The IDs `temporal workflow list --query <query>` shows, once the visibility record is written. */
  const listed = async (query: string) => {
    for (let attempt = 0; ; attempt++) {
      const ids: string[] = [];
      for await (const wf of client.workflow.list({ query })) ids.push(wf.workflowId);
      if (ids.length || attempt === 50) return ids;
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  before(async () => {
    const dir = path.join(testStack().workDir, `visibility-${process.pid}`);
    options = { port: await freePort(), uiPort: null, dbFile: path.join(dir, 'temporal.db'), logFile: path.join(dir, 'temporal.log') };
    temporal = await startTemporal(options);
    client = await connectTemporalClient(`127.0.0.1:${options.port}`, 'default');
    // No worker polls this queue: the workflow stays running, with the attributes it started with.
    await client.workflow.start('documentPipeline', {
      taskQueue: `visibility-${id}`,
      workflowId,
      args: [],
      typedSearchAttributes: new TypedSearchAttributes([
        { key: searchAttributes.partner, value: 'acme' },
        { key: searchAttributes.knowledgeBaseId, value: id },
        { key: searchAttributes.documentId, value: id },
        { key: searchAttributes.pipelineStatus, value: 'queued' },
        { key: searchAttributes.budgetBlocked, value: true },
        { key: searchAttributes.jobStatus, value: 'processing' },
      ]),
    });
  });

  after(async () => {
    await client?.connection.close();
    await temporal?.stop();
  });

  it('keeps the default order, the WorkflowId, WorkflowType and ExecutionStatus filters and one index per search attribute of ours; the guide\'s queries find the workflow', async () => {
    const byAlias = await columns();
    const ours = Object.values(searchAttributes).map((k) => k.name);
    assert.deepEqual(await indexes(), ['by_status', 'by_workflow_id', 'by_workflow_type', 'default_idx', ...ours.map((name) => visibilityIndexName(byAlias.get(name)!))].sort());
    for (const query of [
      `Partner="acme" AND KnowledgeBaseId="${id}"`,
      `DocumentId="${id}" AND PipelineStatus="queued"`,
      `BudgetBlocked=true AND KnowledgeBaseId="${id}"`,
      `WorkflowType="documentPipeline" AND JobStatus="processing" AND DocumentId="${id}"`,
      `WorkflowId="${workflowId}" AND ExecutionStatus="Running"`,
      // A filter without an index of its own still answers.
      `TaskQueue="visibility-${id}"`,
    ]) {
      assert.deepEqual(await listed(query), [workflowId], query);
    }
  });

  it('gives a search attribute of ours its index back at the next start when it lost it', async () => {
    const partnerIndex = visibilityIndexName((await columns()).get('Partner')!);
    await client.connection.close();
    await temporal.stop();
    await run('sqlite3', [options.dbFile!, `DROP INDEX ${partnerIndex}`]);
    assert.ok(!(await indexes()).includes(partnerIndex));
    temporal = await startTemporal(options);
    client = await connectTemporalClient(`127.0.0.1:${options.port}`, 'default');
    assert.ok((await indexes()).includes(partnerIndex));
    assert.deepEqual(await listed(`Partner="acme" AND DocumentId="${id}"`), [workflowId]);
  });
});
