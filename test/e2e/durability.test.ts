import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newKnowledgeBase, unique } from '../support/fixtures.js';
import { budgetChangedSignal, documentWorkflowId, historyEventsLimit, progressQuery, type DocumentPipelineInput } from '../../lib/contracts/document-pipeline.js';
import { deletionPageSize, deletionWorkflowId } from '../../lib/contracts/deletion.js';
import { searchAttributes } from '../../lib/contracts/search-attributes.js';

type Http = ReturnType<typeof client>;
type Partner = { name: string; key: string };

type HistoryEvent = NonNullable<Awaited<ReturnType<ReturnType<Client['workflow']['getHandle']>['fetchHistory']>>['events']>[number];

/** Every run of a workflow, newest first, following the chain of continue-as-new back to the first. */
async function runsOf(temporal: Client, workflowId: string): Promise<Array<{ runId: string; events: HistoryEvent[] }>> {
  const runs: Array<{ runId: string; events: HistoryEvent[] }> = [];
  let runId: string | undefined = (await temporal.workflow.getHandle(workflowId).describe()).runId as string;
  while (runId) {
    const events: HistoryEvent[] = (await temporal.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? [];
    runs.push({ runId, events });
    runId = events[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  }
  return runs;
}

/**
 * Durable for months (issue #17): long waits stay within a bounded history, work whose workflow is
 * gone is started again by the reconciler, a user can replace the content of a failed or blocked
 * document, and deletions of any size proceed in pages. The worker re-checks a blocked budget by
 * itself only every hour (BUDGET_RECHECK_INTERVAL_MS: signals wake the re-checks here) and runs
 * the reconciler every second on this file's own task queue; its periodic scan looks only at rows
 * older than an hour (RECONCILE_GRACE_SECONDS), which the tests make so explicitly.
 */
describe('durable for months: bounded histories, the reconciler, fixing failed work, paged deletion', function () {
  this.timeout(240_000);
  const env = {
    TEMPORAL_TASK_QUEUE: `durability-${process.pid}`,
    BUDGET_RECHECK_INTERVAL_MS: '3600000',
    RECONCILE_INTERVAL_SECONDS: '1',
    RECONCILE_GRACE_SECONDS: '3600',
    // The paged-deletion case creates 400 documents at once, more than the default rate allows.
    REQUESTS_PER_MINUTE_KNOWLEDGE_BASE: '0',
  };
  let api: RunningApi;
  let worker: RunningWorker;
  let http: Http;
  let temporal: Client;

  before(async function () {
    this.timeout(120_000);
    api = await startApi(env);
    worker = await startWorker(env);
    http = client(api.url);
    temporal = api.deps.temporal;
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
  });

  const upload = (p: Partner, kb: string, folder: string, content: string, extra: Record<string, string> = {}) =>
    http('POST', `/api/documents/${p.name}/${kb}`, { key: p.key, form: { type: 'file', folder, use_original_as_rewritten: 'true', ...extra, file: { name: `${unique('doc')}.txt`, content } } });
  const read = async (p: Partner, kb: string, id: string) => (await http('GET', `/api/document/${p.name}/${kb}/${id}`, { key: p.key })).body;
  const setLimit = (p: Partner, kb: string, characterLimit: number) =>
    http('PATCH', `/api/knowledgebases/${p.name}/${kb}/limits`, { key: p.key, json: { character_limit: characterLimit } });
  const consumed = async (p: Partner, kb: string) => (await http('GET', `/api/knowledgebases/${p.name}/${kb}/limits`, { key: p.key })).body.characters.consumed as number;
  const usageEvents = (documentId: string) => api.deps.db.usageEvent.count({ where: { documentId } });
  const blocked = (p: Partner, kb: string, id: string) =>
    eventually(`${id} to be budget-blocked`, async () => ((await read(p, kb, id)).processing_error?.startsWith('BUDGET_BLOCKED:') ? true : null));
  const embedded = (p: Partner, kb: string, id: string) => eventually(`${id} to be embedded`, async () => ((await read(p, kb, id)).embedding_status === 'success' ? read(p, kb, id) : null), 120_000);
  const text = (n: number) => `${'word '.repeat(Math.ceil(n / 5)).slice(0, n - 1)}\n`;

  it('a document blocked through hundreds of re-checks continues as new, keeps every run under the history bound, and resumes when the limit is raised', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    await setLimit(partner, kb, 10);
    const created = await upload(partner, kb, folder, text(100));
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.id as string;
    const handle = temporal.workflow.getHandle(documentWorkflowId(id));
    await blocked(partner, kb, id);
    // Each budgetChanged wakes a re-check; the timer would wake one only every
    // BUDGET_RECHECK_INTERVAL_MS, an hour here. One signal at a time: signals that arrive together,
    // or while an admission is being tried, are answered by that one admission.
    const rechecks = async () => (await handle.query(progressQuery)).budgetRechecks;
    const deadline = Date.now() + 150_000;
    for (let n = await rechecks(); n < 300; ) {
      assert.ok(Date.now() < deadline, `only ${n} re-checks in time`);
      await handle.signal(budgetChangedSignal);
      const before = n;
      for (const waitUntil = Date.now() + 3000; n === before && Date.now() < waitUntil; n = await rechecks()) await new Promise((r) => setTimeout(r, 10));
    }
    await eventually('the blocked run to continue as new', async () => ((await handle.query(progressQuery)).generation >= 2 ? true : null), 120_000);

    const runs = await runsOf(temporal, documentWorkflowId(id));
    assert.ok(runs.length >= 2, `${runs.length} runs`);
    for (const run of runs) assert.ok(run.events.length < historyEventsLimit + 50, `a run of ${run.events.length} events`);
    // Each re-check waits on a timer of its own, as long as the worker says.
    const timers = runs.flatMap((run) => run.events.filter((e) => e.timerStartedEventAttributes).map((e) => e.timerStartedEventAttributes!.startToFireTimeout));
    assert.ok(timers.length >= 300, `${timers.length} re-checks`);
    assert.ok(timers.every((t) => Number(t?.seconds) === 3600), 'the re-check interval is BUDGET_RECHECK_INTERVAL_MS');
    const waiting = await read(partner, kb, id);
    assert.match(waiting.processing_error, /^BUDGET_BLOCKED:character_limit_exhausted/);
    assert.equal((await handle.describe()).typedSearchAttributes.get(searchAttributes.budgetBlocked), true, 'the continued run is still findable as blocked');

    await setLimit(partner, kb, 1000);
    const done = await embedded(partner, kb, id);
    assert.equal(done.processing_error, null);
    assert.equal(await consumed(partner, kb), 100, 'the characters were charged once');
    assert.equal(await usageEvents(id), 1);
    const progress = await handle.query(progressQuery);
    assert.deepEqual(progress.completedSteps, ['digitize', 'finalize_original', 'embed']);
  });

  it('a blocked document whose run an operator terminated is started again by the reconciler when the limit is raised', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    await setLimit(partner, kb, 10);
    const id = (await upload(partner, kb, folder, text(60))).body.id as string;
    await blocked(partner, kb, id);
    await temporal.workflow.getHandle(documentWorkflowId(id)).terminate('an operator stopped it');
    // The limit is raised: its budgetChanged finds no workflow and names the document to the
    // reconciler, whose periodic scan would not look at it for an hour.
    await setLimit(partner, kb, 1000);
    await embedded(partner, kb, id);
    assert.equal(await consumed(partner, kb), 60);
  });

  it('a document row left queued without a workflow (a crash between insert and start) is started by the reconciler scan', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const empty = await http('POST', `/api/documents/${partner.name}/${kb}/empty`, { key: partner.key, form: { folder, name: 'stranded', type: 'file' } });
    assert.equal(empty.status, 201, JSON.stringify(empty.body));
    const id = empty.body.id as string;
    const original = await http('PUT', `/api/documents/${partner.name}/${kb}/${id}/content/original`, { key: partner.key, form: { content: text(80) } });
    assert.equal(original.status, 200, JSON.stringify(original.body));
    // The state the create path writes in one insert, with its workflow never started; an hour old.
    const kbRow = await api.deps.db.knowledgeBase.findFirstOrThrow({ where: { name: kb, partner: { name: partner.name } } });
    const request: DocumentPipelineInput = { documentId: id, knowledgeBaseId: kbRow.id, partner: partner.name, steps: ['digitize', 'finalize_original', 'embed'], requestCharacterLimit: null };
    await api.deps.db.$executeRaw`
      UPDATE documents SET "inQueues" = ARRAY['digitize'], "useOriginalAsRewritten" = true, "pipelineRequest" = ${JSON.stringify(request)}::jsonb,
        "updatedAt" = now() - interval '2 hours' WHERE id = ${id}::uuid`;
    const done = await embedded(partner, kb, id);
    assert.equal(done.digitized_char_count, 80);
    assert.deepEqual(done.in_queues, []);
  });

  it('a document marked for deletion whose deletion never started is deleted by the reconciler scan', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const id = (await http('POST', `/api/documents/${partner.name}/${kb}/empty`, { key: partner.key, form: { folder, name: 'doomed', type: 'file' } })).body.id as string;
    await api.deps.db.$executeRaw`UPDATE documents SET "deletionRequestedAt" = now() - interval '2 hours' WHERE id = ${id}::uuid`;
    await eventually('the row to be gone', async () => (await api.deps.db.document.count({ where: { id } })) === 0, 60_000);
    assert.equal((await http('GET', `/api/document/${partner.name}/${kb}/${id}`, { key: partner.key })).status, 404);
  });

  it('a document whose rewrite failed accepts new rewritten content: the waiting run stands down and the new text is embedded, charged once', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    // No model API is configured: the rewrite fails and the run waits for `retry`.
    const id = (await upload(partner, kb, folder, text(120), { use_original_as_rewritten: 'false', auto_rewrite: 'true' })).body.id as string;
    const failed = await eventually('the rewrite to fail', async () => {
      const d = await read(partner, kb, id);
      return d.processing_error && !d.processing_error.startsWith('BUDGET_BLOCKED:') ? d : null;
    });
    assert.match(failed.processing_error, /OPENAI_BASE_URL/);
    const handle = temporal.workflow.getHandle(documentWorkflowId(id));
    const failedRun = (await handle.describe()).runId;
    assert.equal((await handle.query(progressQuery)).status, 'failed');

    const put = await http('PUT', `/api/documents/${partner.name}/${kb}/${id}/content/rewritten`, { key: partner.key, form: { content: 'A text the user wrote by hand.\n' } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    const old = await temporal.workflow.getHandle(documentWorkflowId(id), failedRun).result();
    assert.equal(old.status, 'superseded');
    const done = await embedded(partner, kb, id);
    assert.equal(done.processing_error, null);
    assert.equal((await http('GET', `/api/documents/${partner.name}/${kb}/${id}/content/rewritten`, { key: partner.key })).body.content, 'A text the user wrote by hand.\n');
    assert.equal(await consumed(partner, kb), 120, 'the digitized characters were charged once');
    assert.equal(await usageEvents(id), 1);
  });

  it('a budget-blocked document accepts a digitized update and queue/process: the waiting run stands down each time', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    await setLimit(partner, kb, 10);
    const id = (await upload(partner, kb, folder, text(100))).body.id as string;
    await blocked(partner, kb, id);
    const handle = temporal.workflow.getHandle(documentWorkflowId(id));
    const firstRun = (await handle.describe()).runId;
    await eventually('the run to show the block', async () => ((await handle.query(progressQuery)).status === 'budget_blocked' ? true : null));

    const processed = await http('POST', `/api/queue/process?action=digitize&partner=${partner.name}&kb=${kb}`, { key: partner.key, json: { document: { id } } });
    assert.equal(processed.status, 202, JSON.stringify(processed.body));
    assert.equal((await temporal.workflow.getHandle(documentWorkflowId(id), firstRun).result()).status, 'superseded');
    await blocked(partner, kb, id);
    const secondRun = (await handle.describe()).runId;
    assert.notEqual(secondRun, firstRun);
    await eventually('the new run to show the block', async () => ((await handle.query(progressQuery)).status === 'budget_blocked' ? true : null));

    const put = await http('PUT', `/api/documents/${partner.name}/${kb}/${id}/content/digitized`, { key: partner.key, form: { content: 'fits\n' } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    assert.equal(put.body.status ?? 'updated', 'updated');
    assert.equal((await temporal.workflow.getHandle(documentWorkflowId(id), secondRun).result()).status, 'superseded');
    const doc = await read(partner, kb, id);
    assert.equal(doc.processing_error, null);
    assert.equal(doc.digitized_char_count, 5);
    assert.equal(await consumed(partner, kb), 5);
  });

  it(`deleting a knowledge base of more documents than one history holds proceeds in pages of ${deletionPageSize} and continues as new`, async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const count = 400;
    const ids: string[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (ids.length < count) {
          const r = await http('POST', `/api/documents/${partner.name}/${kb}/empty`, { key: partner.key, form: { folder, name: unique('d'), type: 'file' } });
          assert.equal(r.status, 201, JSON.stringify(r.body));
          ids.push(r.body.id);
        }
      }),
    );
    const kbRow = await api.deps.db.knowledgeBase.findFirstOrThrow({ where: { name: kb, partner: { name: partner.name } } });
    const res = await http('DELETE', `/api/knowledgebases/${partner.name}/${kb}`, { key: partner.key });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const workflowId = deletionWorkflowId.knowledgeBase(kbRow.id);
    const result = await eventually('the deletion to finish', async () => {
      const d = await temporal.workflow.getHandle(workflowId).describe();
      return d.status.name === 'COMPLETED' ? temporal.workflow.getHandle(workflowId).result() : null;
    }, 180_000);
    assert.equal(result.deletedDocuments, ids.length);
    assert.ok((await runsOf(temporal, workflowId)).length >= 2, 'the deletion continued as new');
    assert.equal(await api.deps.db.document.count({ where: { knowledgeBaseId: kbRow.id } }), 0);
    assert.equal(await api.deps.db.knowledgeBase.count({ where: { id: kbRow.id } }), 0);
  });
});
