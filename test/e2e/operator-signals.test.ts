import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { client, eventually, useRunningSystem } from '../support/system.js';
import { newKnowledgeBase } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { binaries } from '../../scripts/stack.js';
import { documentWorkflowId, progressQuery } from '../../lib/contracts/document-pipeline.js';
import { documentFiles } from '../../lib/platform/storage.js';
import { pdf } from '../support/samples.js';

const run = promisify(execFile);

/** The exact operator commands docs/operations.md documents, run with the Temporal CLI against the test server. */
const temporalCli = (...args: string[]) => run(binaries.temporal, [...args, '--address', testStack().temporalAddress]);

describe('operator signals: retry, pause and resume from the Temporal CLI', function () {
  const system = useRunningSystem();
  const http: ReturnType<typeof client> = (...args) => system.http(...args);

  it('a failed step waits with a readable error, is paused and resumed, and a retry finishes it from the failed step', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    // A valid PDF without any text (a scanned page, say): accepted at upload, but digitization fails.
    const created = await http('POST', `/api/documents/${partner.name}/${kb}`, {
      key: partner.key,
      form: { type: 'file', folder, use_original_as_rewritten: 'true', file: { name: 'menu.pdf', content: pdf([]) } },
    });
    assert.equal(created.status, 201);
    const id = created.body.id as string;
    const read = async () => (await http('GET', `/api/document/${partner.name}/${kb}/${id}`, { key: partner.key })).body;

    const failed = await eventually('the failure to be recorded', async () => ((await read()).processing_error ? read() : null));
    assert.match(failed.processing_error, /menu\.pdf: the PDF contains no text/);
    assert.deepEqual(failed.in_queues, []);
    const handle = system.api.deps.temporal.workflow.getHandle(documentWorkflowId(id));
    assert.equal((await handle.describe()).status.name, 'RUNNING', 'the workflow keeps the work and waits for a retry');
    // Operators find stuck work by search attribute. The workflow sets PipelineStatus after it has
    // recorded the error on the document, and visibility indexes it a moment later: wait on the list.
    const listed = await eventually('the failed run listed by search attribute', async () => {
      const { stdout } = await temporalCli('workflow', 'list', '--query', `DocumentId="${id}" AND PipelineStatus="failed"`);
      return stdout.includes(documentWorkflowId(id)) ? stdout : null;
    });
    assert.match(listed, /documentPipeline/);

    // The operator fixes the cause (here: replaces the stored original), pauses, retries, resumes.
    await system.api.deps.storage.write(documentFiles.original(id, 'pdf'), pdf(['Cafe creme brulee, served warm.']));
    await temporalCli('workflow', 'signal', '--workflow-id', documentWorkflowId(id), '--name', 'pause');
    await temporalCli('workflow', 'signal', '--workflow-id', documentWorkflowId(id), '--name', 'retry');
    await eventually('the pipeline to hold while paused', async () => (await handle.query(progressQuery)).status === 'paused');
    assert.equal((await read()).embedding_status, null, 'nothing runs while paused');

    await temporalCli('workflow', 'signal', '--workflow-id', documentWorkflowId(id), '--name', 'resume');
    const done = await eventually('the document to be embedded', async () => {
      const d = await read();
      return d.embedding_status === 'success' ? d : null;
    });
    assert.equal(done.processing_error, null);
    assert.equal(done.processing_error, null);
    const digitized = await http('GET', `/api/documents/${partner.name}/${kb}/${id}/content/digitized`, { key: partner.key });
    assert.match(digitized.body.content, /Cafe creme brulee, served warm\./);
    const result = await handle.result();
    assert.equal(result.status, 'completed');
    assert.deepEqual(result.completedSteps, ['digitize', 'finalize_original', 'embed']);
  });
});
