import assert from 'node:assert/strict';
import path from 'node:path';
import { client, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newPartner } from '../support/fixtures.js';
import { startOpenAiUpstream, type OpenAiUpstream } from '../support/openai-upstream.js';
import { testStack } from '../support/stack.js';
import { fastForward, skipTimeUntilClosed, startTimeSkippingTemporal, type TimeSkippingTemporal } from '../support/time-skipping.js';
import { callOf, create, dialogInput, forDialog, newToken, uuidOf, waitForState } from '../dialog-analysis/support.js';
import { dialogAnalysisWorkflowId } from '../../lib/contracts/dialog-analysis.js';

const minute = 60_000;
const hour = 60 * minute;

/**
 * Workflow timing that only needs Temporal's clock, at the production defaults, on a Temporal
 * server whose workflows skip time (test/support/time-skipping.ts): what takes hours on the wall
 * clock takes seconds here, with the real workflow, activities and worker. The API and the worker
 * run against that server on a task queue of their own.
 */
describe("workflow timing on Temporal's clock, with time skipping (production defaults)", function () {
  let temporal: TimeSkippingTemporal;
  let upstream: OpenAiUpstream;
  let api: RunningApi;
  let worker: RunningWorker;
  let http: ReturnType<typeof client>;
  let partner: { name: string; key: string };

  before(async function () {
    this.timeout(180_000);
    temporal = await startTimeSkippingTemporal(path.join(testStack().workDir, 'time-skipping'));
    upstream = await startOpenAiUpstream();
    // No DIALOG_ANALYSIS_MAX_OUTAGE_SECONDS or DIALOG_ANALYSIS_RETENTION_SECONDS: their defaults (30 minutes, 24 hours).
    const env = {
      TEMPORAL_ADDRESS: temporal.address,
      TEMPORAL_TASK_QUEUE: `time-skipping-${process.pid}`,
      OPENAI_BASE_URL: upstream.baseUrl,
      DIALOG_ANALYSIS_MODEL: 'dialog-model',
    };
    api = await startApi(env);
    worker = await startWorker(env);
    http = client(api.url);
    partner = await newPartner(http);
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
    await upstream?.close();
    await temporal?.stop();
  });

  it('dialog analysis: a provider down for 30 minutes fails it after 15 calls 1, 2, 4 ... 256 s, then 5 minutes apart; it is readable for 24 hours, then 404', async () => {
    const token = newToken();
    const unavailable = { status: 503, json: { error: { message: 'overloaded', type: 'server_error' } } };
    upstream.respond(forDialog(token, [unavailable]));
    const started = Date.now();
    const analysis = await create(http, partner.key, dialogInput(token));
    const workflowId = dialogAnalysisWorkflowId(uuidOf(analysis.id));
    const temporalClient = api.deps.temporal;

    // An hour of the workflow's time: the outage window (DIALOG_ANALYSIS_MAX_OUTAGE_SECONDS, 1800)
    // runs out on the way, and the analysis is failed.
    await fastForward(temporalClient, workflowId, hour);
    const failed = await waitForState(http, partner.key, analysis.id, 'failed', 30_000);
    const over = /^the model API failed 15 times in a row over (\d+) seconds: .*overloaded/.exec(failed.error);
    // The window as measured: 30 minutes plus the real round trip of the last call.
    assert.ok(over && Number(over[1]) >= 1800 && Number(over[1]) <= 1810, failed.error);
    assert.equal(upstream.calls.filter(callOf(token)).length, 15);
    // The provider was called 1, 2, 4 ... s apart: the workflow's timers between the calls.
    const events = (await temporalClient.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
    const waits = events.flatMap((e) => (e.timerStartedEventAttributes ? [Number(e.timerStartedEventAttributes.startToFireTimeout!.seconds)] : []));
    assert.deepEqual(waits.slice(0, 13), [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300, 300]);
    // The last wait is what is left of the window (89 s, less the calls' real round trips).
    assert.ok(waits[13]! >= 60 && waits[13]! <= 89, `last wait ${waits[13]} s`);

    // 23 hours later it is still there; the retention timer has not fired.
    await fastForward(temporalClient, workflowId, 22 * hour);
    assert.equal((await waitForState(http, partner.key, analysis.id, 'failed', 30_000)).error, failed.error);

    // Then its clock runs on to the retention timer: the workflow deletes the analysis and closes.
    await skipTimeUntilClosed(temporalClient, workflowId);
    assert.equal(await temporalClient.workflow.getHandle(workflowId).result(), 'failed');
    const gone = await http('GET', analysis.id, { key: partner.key });
    assert.equal(gone.status, 404);
    assert.match(gone.body.message, /results are kept for 24 hours after completion/);
    assert.equal(await api.deps.db.dialogAnalysis.count({ where: { id: uuidOf(analysis.id) } }), 0);
    // A day of the workflow's time in seconds of ours (the bound leaves room for a loaded machine).
    assert.ok(Date.now() - started < 2 * minute, `took ${Date.now() - started} ms`);
  }).timeout(180_000);
});
