import assert from 'node:assert/strict';
import { eventually, startWorker, useRunningSystem } from '../support/system.js';
import { newKnowledgeBase } from '../support/fixtures.js';
import { freePort } from '../../scripts/stack.js';
import { documentWorkflowId } from '../../lib/contracts/document-pipeline.js';

/**
 * A new upload with use_original_as_rewritten and the local encoder is digitized and embedded in
 * one activity (activities/ingestion.ts, patch `embed-with-digitize`). When the embedding half
 * fails there, the document is not lost or misreported: the digitization stands, the workflow runs
 * the ordinary `embed` step, and that step finishes the document once the index can be reached.
 */
describe('ingestion in one activity: an embedding that fails there is left to the embed step', function () {
  this.timeout(300_000);
  const env = { TEMPORAL_TASK_QUEUE: `ingestion-one-activity-${process.pid}` };
  const system = useRunningSystem({ env, worker: false });

  it('a worker that cannot reach the index digitizes the document, hands embedding to the embed step, and a healthy worker finishes it', async () => {
    const { api, http } = system;
    const { partner, kb, folder } = await newKnowledgeBase(http);
    // Nothing listens on this port: every index write of this worker fails.
    system.worker = await startWorker({ ...env, WEAVIATE_URL: `http://127.0.0.1:${await freePort()}` });
    const text = `# Lighthouse keeping\n\n${'The keeper trims the wick, winds the clockwork and logs the weather every four hours. '.repeat(20)}\n`;
    const created = await http('POST', `/api/documents/${partner.name}/${kb}`, {
      key: partner.key,
      form: { type: 'file', folder, use_original_as_rewritten: 'true', file: { name: 'lighthouse.md', content: text } },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id: string = created.body.id;
    const handle = api.deps.temporal.workflow.getHandle(documentWorkflowId(id));

    const events = await eventually('the one activity to finish without embedding and the embed step to be scheduled', async () => {
      const history = (await handle.fetchHistory()).events ?? [];
      const scheduled = history.map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name).filter(Boolean);
      return scheduled.includes('digitizeAndEmbedDocument') && scheduled.includes('embedDocument') ? history : null;
    }, 120_000);
    const completed = events.find((e) => e.activityTaskCompletedEventAttributes)!;
    const result = JSON.parse(Buffer.from(completed.activityTaskCompletedEventAttributes!.result!.payloads![0]!.data!).toString()) as { outcome: string; finalized: boolean; embedded: boolean };
    assert.deepEqual({ outcome: result.outcome, finalized: result.finalized, embedded: result.embedded }, { outcome: 'accepted', finalized: true, embedded: false });
    assert.ok(system.worker.output.some((line) => line.includes('embedding after digitization failed')), 'the worker says why it did not embed');
    const waiting = (await http('GET', `/api/document/${partner.name}/${kb}/${id}`, { key: partner.key })).body;
    assert.equal(waiting.digitized_char_count, [...text].length, 'the digitization stands');
    assert.notEqual(waiting.embedding_status, 'success');
    assert.deepEqual(waiting.in_queues, ['embedding']);

    await system.worker.kill('SIGKILL');
    system.worker = await startWorker(env);
    const done = await eventually('the embed step to finish the document', async () => {
      const d = (await http('GET', `/api/document/${partner.name}/${kb}/${id}`, { key: partner.key })).body;
      return d.embedding_status === 'success' ? d : null;
    }, 180_000);
    assert.equal(done.processing_error, null);
    assert.deepEqual(done.in_queues, []);
    const indexes = (await api.deps.index.listDocumentChunkIndexes(id)).sort((a, b) => a - b);
    assert.deepEqual(indexes, Array.from({ length: done.embedding_chunk_count }, (_, i) => i), 'each chunk written once');
    const progress = (await handle.result()) as { completedSteps: string[] };
    assert.deepEqual(progress.completedSteps, ['digitize', 'finalize_original', 'embed']);
  });
});
