import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type proto from '@temporalio/proto';
import { client, eventually, isolatedSystemEnv, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newPartner, unique } from '../support/fixtures.js';
import { speak } from '../support/audio.js';
import { binary, startAudioHost } from '../support/audio-host.js';
import { startOpenAiUpstream, type OpenAiUpstream } from '../support/openai-upstream.js';
import { testStack } from '../support/stack.js';
import { fastForward, skipTimeUntilClosed, startTimeSkippingTemporal, type TimeSkippingTemporal } from '../support/time-skipping.js';
import { callOf, create, dialogInput, forDialog, newToken, uuidOf, waitForState } from '../dialog-analysis/support.js';
import { dialogAnalysisWorkflowId } from '../../lib/contracts/dialog-analysis.js';
import { transcriptWorkflowId } from '../../lib/contracts/transcript.js';
import { documentWorkflowId, progressQuery } from '../../lib/contracts/document-pipeline.js';

const second = 1000;
const minute = 60 * second;
const hour = 60 * minute;
const day = 24 * hour;

type HistoryEvent = proto.temporal.api.history.v1.IHistoryEvent;
const ms = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) => Number(t?.seconds ?? 0) * 1000 + Math.round((t?.nanos ?? 0) / 1e6);
const historyOf = async (temporal: Client, workflowId: string): Promise<HistoryEvent[]> => (await temporal.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
/** The workflow's clock after each skip of it: where time skipping moved it to (the server's history event). */
const skippedTo = (events: HistoryEvent[]) => events.flatMap((e) => (e.workflowExecutionTimeSkippingTransitionedEventAttributes?.targetTime ? [ms(e.workflowExecutionTimeSkippingTransitionedEventAttributes.targetTime)] : []));

/**
 * Workflow timing that only needs Temporal's clock, at the production defaults, on a Temporal
 * server whose workflows skip time (test/support/time-skipping.ts): what takes hours on the wall
 * clock takes seconds here, with the real workflow, activities and worker. The API and the worker
 * run against that server with a database and task queue of their own: their reconciler and budget
 * sweeper must not take the lane's other work (whose workflows are on the lane's Temporal) for lost.
 */
describe("workflow timing on Temporal's clock, with time skipping (production defaults)", function () {
  let temporal: TimeSkippingTemporal;
  let upstream: OpenAiUpstream;
  let api: RunningApi;
  let worker: RunningWorker;
  let http: ReturnType<typeof client>;
  let partner: { name: string; key: string };
  let audioHost: Awaited<ReturnType<typeof startAudioHost>>;
  let dropIsolated: (() => Promise<void>) | undefined;

  before(async function () {
    this.timeout(180_000);
    temporal = await startTimeSkippingTemporal(path.join(testStack().workDir, 'time-skipping'));
    upstream = await startOpenAiUpstream();
    const isolated = await isolatedSystemEnv('time_skipping');
    dropIsolated = isolated.drop;
    // No timing setting at all: DIALOG_ANALYSIS_MAX_OUTAGE_SECONDS and DIALOG_ANALYSIS_RETENTION_SECONDS
    // (30 minutes, 24 hours), TRANSCRIPT_RETENTION_SECONDS (30 days), BUDGET_RECHECK_INTERVAL_MS
    // (5 minutes) keep their defaults.
    const env = {
      ...isolated.env,
      TEMPORAL_ADDRESS: temporal.address,
      OPENAI_BASE_URL: upstream.baseUrl,
      DIALOG_ANALYSIS_MODEL: 'dialog-model',
    };
    api = await startApi(env);
    worker = await startWorker(env);
    http = client(api.url);
    partner = await newPartner(http);
    // The recording of a transcript, and the partner's webhook receiver, which is down (503).
    const clip = fs.readFileSync(await speak('Please call the doctor tomorrow morning.', 'flite-kal'));
    audioHost = await startAudioHost({
      '/clip.wav': binary(clip, 'audio/wav'),
      '/hooks/transcripts': (res) => void res.writeHead(503, { 'content-type': 'text/plain' }).end('down for maintenance'),
    });
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
    await upstream?.close();
    await audioHost?.close();
    await temporal?.stop();
    await dropIsolated?.();
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

  it("transcript webhook: a receiver answering 503 is tried 10 times, 5, 10, 20 ... 300 s apart, then given up; the transcript is kept 30 days, then 404", async () => {
    const started = Date.now();
    const submitted = await http('POST', '/v2/transcript', { key: partner.key, json: { audio_url: audioHost.url('/clip.wav'), webhook_url: audioHost.url('/hooks/transcripts') } });
    assert.equal(submitted.status, 200, JSON.stringify(submitted.body));
    const workflowId = transcriptWorkflowId(submitted.body.id.split('/').pop());
    const temporalClient = api.deps.temporal;

    // An hour of the workflow's time: the transcription itself (real work, no timers), then the
    // webhook's 10 attempts with the 9 backoffs between them (21 minutes), then the retention wait.
    await fastForward(temporalClient, workflowId, hour);
    assert.equal(audioHost.requestsTo('/hooks/transcripts'), 10, 'delivered 10 times, then given up');
    const read = await http('GET', submitted.body.id, { key: partner.key });
    assert.equal(read.body.status, 'completed');
    assert.match(read.body.text, /doctor/i);
    assert.equal(read.body.webhook_status_code, 503, "the receiver's answer to the last attempt");

    // The attempts' spacing on the workflow's clock: the webhook activity was scheduled (its first
    // attempt), and each backoff before the next attempt was skipped to that attempt's time.
    const events = await historyOf(temporalClient, workflowId);
    const scheduled = events.findIndex((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'notifyTranscriptWebhook');
    assert.ok(scheduled >= 0, 'the webhook step ran');
    const attempts = [ms(events[scheduled]!.eventTime), ...skippedTo(events.slice(scheduled)).slice(0, 9)];
    const gaps = attempts.slice(1).map((t, i) => (t - attempts[i]!) / 1000);
    // Each gap is the backoff plus the real time of the failed attempt before it (milliseconds here).
    const backoffs = [5, 10, 20, 40, 80, 160, 300, 300, 300];
    assert.equal(gaps.length, backoffs.length, `gaps ${gaps}`);
    gaps.forEach((gap, i) => assert.ok(gap >= backoffs[i]! && gap < backoffs[i]! + 3, `gap ${i + 1}: ${gap} s, not ${backoffs[i]} s (gaps ${gaps.map((g) => g.toFixed(1))})`));
    // The last attempt, as the history records it once the activity is given up: the tenth.
    const webhookEventId = String(events[scheduled]!.eventId);
    const lastAttempt = events.find((e) => String(e.activityTaskStartedEventAttributes?.scheduledEventId) === webhookEventId);
    assert.equal(lastAttempt?.activityTaskStartedEventAttributes?.attempt, 10);

    // 29 days later it is still there; the retention timer has not fired.
    await fastForward(temporalClient, workflowId, 29 * day);
    assert.equal((await http('GET', submitted.body.id, { key: partner.key })).body.status, 'completed');

    // Then its clock runs on to the retention timer: the workflow deletes the transcript and closes.
    await skipTimeUntilClosed(temporalClient, workflowId);
    assert.equal(await temporalClient.workflow.getHandle(workflowId).result(), 'completed');
    assert.equal((await http('GET', submitted.body.id, { key: partner.key })).status, 404);
    const retention = (await historyOf(temporalClient, workflowId)).flatMap((e) => (e.timerStartedEventAttributes ? [Number(e.timerStartedEventAttributes.startToFireTimeout!.seconds)] : []));
    assert.deepEqual(retention, [30 * 86400], 'one timer: the default retention, 30 days');
    assert.equal(audioHost.requestsTo('/hooks/transcripts'), 10, 'no delivery after the tenth');
    assert.ok(Date.now() - started < 2 * minute, `took ${Date.now() - started} ms`);
  }).timeout(180_000);

  it('a budget-blocked document checks again by itself after 5 minutes (BUDGET_RECHECK_INTERVAL_MS), unsignalled: still blocked at 4, embedded after the re-check', async () => {
    const started = Date.now();
    const kb = unique('kb');
    const created = await http('POST', `/api/knowledgebases/${partner.name}`, { key: partner.key, form: { name: kb, character_limit: '10' } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal((await http('POST', `/api/folders/${partner.name}/${kb}`, { key: partner.key, form: { name: 'notes' } })).status, 201);
    const content = 'The keeper trims the lamp at dusk and logs each passing ship.\n';
    const uploaded = await http('POST', `/api/documents/${partner.name}/${kb}`, {
      key: partner.key,
      form: { type: 'file', folder: 'notes', use_original_as_rewritten: 'true', file: { name: `${unique('doc')}.txt`, content } },
    });
    assert.equal(uploaded.status, 201, JSON.stringify(uploaded.body));
    const read = async () => (await http('GET', `/api/document/${partner.name}/${kb}/${uploaded.body.id}`, { key: partner.key })).body;
    const workflowId = documentWorkflowId(uploaded.body.id);
    const temporalClient = api.deps.temporal;
    const handle = temporalClient.workflow.getHandle(workflowId);

    // Blocked by the 10-character limit: the workflow marks the document and waits for a
    // budgetChanged signal or its re-check, whichever comes first (its search attribute says so).
    await eventually('the document to wait for budget', async () => (await handle.describe()).searchAttributes.BudgetBlocked?.[0] === true, 30_000);
    assert.match((await read()).processing_error, /^BUDGET_BLOCKED:character_limit_exhausted/);

    // The limit is lifted behind the API's back: no budgetChanged signal is sent.
    const lifted = await api.deps.db.knowledgeBase.updateMany({ where: { name: kb, partner: { name: partner.name } }, data: { characterLimit: null } });
    assert.equal(lifted.count, 1);

    // Four minutes of the workflow's time: the re-check is not due yet, so nothing has moved.
    await fastForward(temporalClient, workflowId, 4 * minute);
    assert.equal((await handle.query(progressQuery)).budgetRechecks, 0);
    const waiting = await read();
    assert.match(waiting.processing_error, /^BUDGET_BLOCKED:/);
    assert.equal(waiting.file_digitized, null, 'nothing was accepted');

    // Then its clock runs on: at 5 minutes the re-check finds the budget, and the document is
    // digitized and embedded (real work, no timer) and its workflow completes.
    await skipTimeUntilClosed(temporalClient, workflowId);
    const progress = await handle.result();
    assert.equal(progress.status, 'completed');
    assert.equal(progress.budgetRechecks, 1, 'one re-check, the one that found the budget');
    const done = await read();
    assert.equal(done.embedding_status, 'success');
    assert.equal(done.processing_error, null);
    assert.equal(done.digitized_char_count, content.length);

    // The wait as the history has it: one timer of 5 minutes, which fired, and no signal.
    const events = await historyOf(temporalClient, workflowId);
    const timers = events.filter((e) => e.timerStartedEventAttributes);
    assert.deepEqual(timers.map((e) => Number(e.timerStartedEventAttributes!.startToFireTimeout!.seconds)), [300], 'the default BUDGET_RECHECK_INTERVAL_MS');
    const fired = events.find((e) => e.timerFiredEventAttributes);
    assert.ok(fired, 'the re-check timer fired');
    const waited = (ms(fired.eventTime) - ms(timers[0]!.eventTime)) / 1000;
    assert.ok(waited >= 300 && waited < 303, `the block lasted ${waited} s of the workflow's time`);
    assert.equal(events.filter((e) => e.workflowExecutionSignaledEventAttributes).length, 0, 'no signal woke it');
    assert.ok(Date.now() - started < minute, `took ${Date.now() - started} ms`);
  }).timeout(120_000);
});
