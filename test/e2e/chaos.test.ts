import assert from 'node:assert/strict';
import path from 'node:path';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newKnowledgeBase } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { freePort, startTemporal, type ManagedProcess } from '../../scripts/stack.js';
import { documentWorkflowId } from '../../lib/contracts/document-pipeline.js';
import { isWorkflowRunning } from '../../lib/platform/temporal.js';

const DOCUMENTS = 200;

/**
 * Chaos (issue #17): 200 documents are ingested while the worker is killed (SIGKILL) five times and
 * the Temporal server is restarted once. This file runs its own Temporal server on a database file,
 * so that a restart keeps what it knew, with the API, the worker (which runs the reconciler) and
 * a task queue of its own; Postgres and Weaviate are the suite's.
 */
describe('chaos: ingestion survives killed workers and a restarted Temporal server', function () {
  this.timeout(900_000);
  let temporal: ManagedProcess;
  let temporalOptions: Parameters<typeof startTemporal>[0];
  let api: RunningApi;
  let worker: RunningWorker;
  let http: ReturnType<typeof client>;
  let env: Record<string, string>;

  before(async function () {
    this.timeout(180_000);
    const port = await freePort();
    const dir = path.join(testStack().workDir, `chaos-${process.pid}`);
    temporalOptions = { port, uiPort: null, dbFile: path.join(dir, 'temporal.db'), logFile: path.join(dir, 'temporal.log') };
    temporal = await startTemporal(temporalOptions);
    env = {
      TEMPORAL_ADDRESS: `127.0.0.1:${port}`,
      TEMPORAL_TASK_QUEUE: `chaos-${process.pid}`,
      RECONCILE_INTERVAL_SECONDS: '2',
      RECONCILE_GRACE_SECONDS: '20',
      // The checks read all 200 documents one after another, faster than the default rate allows
      // (200 requests in 10 s); the limit itself is tested in test/abuse.
      REQUESTS_PER_MINUTE_KNOWLEDGE_BASE: '0',
    };
    api = await startApi(env);
    worker = await startWorker(env);
    http = client(api.url);
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
    await temporal?.stop();
  });

  it(`${DOCUMENTS} documents all end embedded, each charged once, with exactly its own vectors, and none queued without a workflow`, async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const kbRow = await api.deps.db.knowledgeBase.findFirstOrThrow({ where: { name: kb, partner: { name: partner.name } } });
    const texts = Array.from({ length: DOCUMENTS }, (_, i) => `Document ${i} of the chaos test.\n\n${'It says something about topic number '.repeat(3)}${i}.\n`);

    // Uploads in batches of 50 while the chaos goes on; a file refused while Temporal is down
    // (nothing is kept of it: 503 in its result) goes again with the next batch.
    const ids: string[] = [];
    const uploading = (async () => {
      const pending = texts.map((_, i) => i);
      while (pending.length > 0) {
        const batch = pending.splice(0, 50);
        const fd = new FormData();
        fd.append('folder', folder);
        fd.append('use_original_as_rewritten', 'true');
        for (const i of batch) fd.append('files', new Blob([texts[i]!]), `chaos-${i}.txt`);
        const res = await fetch(`${api.url}/api/documents/${partner.name}/${kb}/files/batch`, { method: 'POST', headers: { 'X-API-Key': partner.key }, body: fd }).catch(() => null);
        const body = res?.status === 200 ? await res.json() : null;
        if (!body) {
          pending.push(...batch);
          await new Promise((r) => setTimeout(r, 1000));
          continue;
        }
        body.results.forEach((r: { status: string; document_id: string; http_status?: number }, k: number) => {
          if (r.status === 'success') ids.push(r.document_id);
          else {
            assert.equal(r.http_status, 503, JSON.stringify(r));
            pending.push(batch[k]!);
          }
        });
      }
    })();

    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
    for (let kill = 1; kill <= 5; kill++) {
      await pause(6_000);
      await worker.kill('SIGKILL');
      if (kill === 3) {
        // The Temporal server goes down too, and comes back on its own database.
        await temporal.stop();
        await pause(2_000);
        temporal = await startTemporal(temporalOptions);
      }
      worker = await startWorker(env);
    }
    await uploading;
    assert.equal(ids.length, DOCUMENTS);

    const read = async (id: string) => {
      const res = await http('GET', `/api/document/${partner.name}/${kb}/${id}`, { key: partner.key });
      assert.equal(res.status, 200, `GET document ${id}: ${JSON.stringify(res.body)}`);
      return res.body;
    };
    await eventually('every document embedded', async () => {
      const docs = await api.deps.db.document.findMany({ where: { id: { in: ids } }, select: { embeddingStatus: true } });
      return docs.length === DOCUMENTS && docs.every((d) => d.embeddingStatus === 'success');
    }, 600_000);

    // Each document: its characters charged once, exactly its chunks in the index, no queue left.
    const events = await api.deps.db.usageEvent.groupBy({ by: ['documentId'], where: { documentId: { in: ids } }, _count: { _all: true }, _sum: { characters: true } });
    assert.equal(events.length, DOCUMENTS);
    for (const e of events) assert.equal(e._count._all, 1, `document ${e.documentId} has ${e._count._all} usage events`);
    const limits = (await http('GET', `/api/knowledgebases/${partner.name}/${kb}/limits`, { key: partner.key })).body;
    assert.equal(limits.characters.consumed, texts.reduce((n, t) => n + [...t].length, 0));
    assert.equal(limits.characters.reserved, 0);

    let chunks = 0;
    for (const id of ids) {
      const doc = await read(id);
      assert.deepEqual(doc.in_queues, [], `document ${id} still queued`);
      assert.equal(doc.processing_error, null);
      const indexes = (await api.deps.index.listDocumentChunkIndexes(id)).sort((a, b) => a - b);
      assert.deepEqual(indexes, Array.from({ length: doc.embedding_chunk_count }, (_, i) => i), `document ${id}'s vectors`);
      chunks += indexes.length;
    }
    // No vector of the knowledge base belongs to anything else (an orphan of a retried write).
    assert.equal(await api.deps.index.countKnowledgeBaseChunks(kbRow.id), chunks);

    // No document is queued without a workflow: every pipeline closes (the embedding step writes
    // the row's success and the workflow completes after it, so it may still be open just then).
    await eventually('every pipeline closed', async () => {
      for (const id of ids) if (await isWorkflowRunning(api.deps.temporal, documentWorkflowId(id))) return false;
      return true;
    }, 60_000);
  });
});
