import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newPartner } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { startOpenAiUpstream, type OpenAiUpstream } from '../support/openai-upstream.js';
import { binaries } from '../../scripts/stack.js';
import { dialogAnalysisWorkflowId, progressQuery } from '../../lib/contracts/dialog-analysis.js';
import { searchAttributes } from '../../lib/contracts/search-attributes.js';
import { callOf, create, dialogInput, forDialog, json, newToken, uuidOf, validAnswer, waitForState } from './support.js';

const run = promisify(execFile);
/** The operator commands docs/operations.md documents, run with the Temporal CLI against the test server. */
const temporalCli = (...args: string[]) => run(binaries.temporal, [...args, '--address', testStack().temporalAddress]);

/** Workers that die mid-call, and workers without a model: nothing of an accepted analysis is lost. */
describe('dialog analysis recovery: a worker killed mid-call, no model configured', function () {
  let upstream: OpenAiUpstream;
  let api: RunningApi;
  let worker: RunningWorker | undefined;
  let http: ReturnType<typeof client>;
  let partner: { name: string; key: string };
  const queue = `dialog-recovery-${process.pid}`;
  const withModel = () => ({ TEMPORAL_TASK_QUEUE: queue, OPENAI_BASE_URL: upstream.baseUrl, DIALOG_ANALYSIS_MODEL: 'dialog-model' });

  before(async function () {
    this.timeout(120_000);
    upstream = await startOpenAiUpstream();
    api = await startApi({ TEMPORAL_TASK_QUEUE: queue });
    http = client(api.url);
    partner = await newPartner(http);
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
    await upstream?.close();
  });

  const handleOf = (path: string) => api.deps.temporal.workflow.getHandle(dialogAnalysisWorkflowId(uuidOf(path)));

  it('a worker killed while the model call is in flight: another worker records the call as interrupted and asks again once', async function () {
    this.timeout(120_000);
    worker = await startWorker(withModel());
    const token = newToken();
    upstream.respond(forDialog(token, [{ hang: true }, json(validAnswer)]));
    const created = await create(http, partner.key, dialogInput(token));
    await upstream.waitForCalls(callOf(token), 1);
    await worker.kill('SIGKILL');
    worker = await startWorker(withModel());

    const done = await waitForState(http, partner.key, created.id, 'completed', 90_000);
    assert.deepEqual(done.output, validAnswer);
    const calls = upstream.calls.filter(callOf(token));
    assert.equal(calls.length, 2, 'the lost call, then one more');
    assert.ok(calls[0]!.abortedAt, 'the first call died with its worker');
    // The row is completed by the call's activity; the run counts the attempt once it has returned.
    const progress = await eventually('the run to record its outcome', async () => {
      const p = await handleOf(created.id).query(progressQuery);
      return p.state === 'completed' ? p : null;
    });
    assert.equal(progress.interruptedCalls, 1);
    assert.equal(progress.attempts, 1);
    const rows = await api.deps.db.dialogAnalysisCall.findMany({ where: { analysisId: uuidOf(created.id) }, orderBy: { seq: 'asc' } });
    assert.deepEqual(rows.map((r) => [r.seq, r.status, r.valid]), [[1, 'interrupted', null], [2, 'answered', true]]);
  });

  it('without a model the analysis fails at once, saying what to configure; after that, the operator retry runs it from the stored input', async function () {
    this.timeout(120_000);
    await worker?.kill();
    worker = await startWorker({ TEMPORAL_TASK_QUEUE: queue, OPENAI_BASE_URL: '', OPENAI_API_KEY: '' });
    const token = newToken();
    const input = dialogInput(token, { language: 'fr' });
    const created = await create(http, partner.key, input);
    const failed = await waitForState(http, partner.key, created.id, 'failed', 30_000);
    assert.match(failed.error, /no model is configured for dialog analysis: set OPENAI_BASE_URL/);
    const row = await api.deps.db.dialogAnalysis.findUnique({ where: { id: uuidOf(created.id) } });
    assert.deepEqual(JSON.parse(row!.input), { ...input, current_profile: {}, prompt_extra_text: '' }, 'nothing of the request is lost');
    // Operators find failed analyses by search attribute.
    await eventually('the failed analysis to be listed', async () => {
      const { stdout } = await temporalCli('workflow', 'list', '--query', 'WorkflowType="dialogAnalysis" AND JobStatus="failed"');
      return stdout.includes(dialogAnalysisWorkflowId(uuidOf(created.id)));
    }, 20_000);

    // The operator configures the model, restarts the workers and sends `retry`.
    await worker.kill();
    worker = await startWorker(withModel());
    upstream.respond(forDialog(token, [json(validAnswer)]));
    await temporalCli('workflow', 'signal', '--workflow-id', dialogAnalysisWorkflowId(uuidOf(created.id)), '--name', 'retry');
    const done = await waitForState(http, partner.key, created.id, 'completed');
    assert.deepEqual(done.output, validAnswer);
    assert.match(upstream.calls.filter(callOf(token))[0]!.body.messages[0].content, /written in this language: fr\./);
    const progress = await handleOf(created.id).query(progressQuery);
    assert.equal(progress.generation, 2);
    await eventually('JobStatus completed', async () => (await handleOf(created.id).describe()).typedSearchAttributes.get(searchAttributes.jobStatus) === 'completed');
  });
});
