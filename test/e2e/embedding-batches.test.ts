import assert from 'node:assert/strict';
import { eventually, startWorker, useRunningSystem } from '../support/system.js';
import { newKnowledgeBase } from '../support/fixtures.js';
import { documentWorkflowId } from '../../lib/contracts/document-pipeline.js';
import { isWorkflowRunning } from '../../lib/platform/temporal.js';

const DOCUMENTS = 24;

/**
 * Embedding batched across documents (issue #20, lib/retrieval/embedding-batcher.ts): the worker's
 * batcher embeds and writes the chunks of several documents in one model call and one Weaviate
 * batch. A worker killed (SIGKILL) while such a batch is in flight leaves each of its documents to
 * be embedded again by another worker: every document ends embedded, each chunk once, its
 * characters charged once, nothing queued.
 */
describe('embedding batches: a worker killed mid-batch', function () {
  this.timeout(600_000);
  const env = {
    TEMPORAL_TASK_QUEUE: `embedding-batches-${process.pid}`,
    // Small batches, so that one batch holds chunks of several documents and there are many.
    EMBEDDING_BATCH_CHUNKS: '12',
    EMBEDDING_LOCAL_THREADS: '1',
  };
  const system = useRunningSystem({ env, worker: false });

  it(`${DOCUMENTS} documents: the batch in flight dies with its worker, and every document still ends embedded once`, async () => {
    const { api, http } = system;
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const kbRow = await api.deps.db.knowledgeBase.findFirstOrThrow({ where: { name: kb, partner: { name: partner.name } } });
    const paragraph = (i: number, p: number) => `Paragraph ${p} of document ${i} explains how batches of chunks travel from a workflow to the encoder and on to the index, and why an identifier derived from the document and the chunk index makes a second write harmless.`;
    const texts = Array.from({ length: DOCUMENTS }, (_, i) => `# Document ${i}\n\n${Array.from({ length: 8 }, (_, p) => paragraph(i, p)).join('\n\n')}\n`);

    // The worker logs each batch it starts (debug): the test kills it as soon as one holds chunks
    // of more than one document, before that batch can be written.
    system.worker = await startWorker({ ...env, LOG_LEVEL: 'debug' });
    const fd = new FormData();
    fd.append('folder', folder);
    fd.append('use_original_as_rewritten', 'true');
    texts.forEach((t, i) => fd.append('files', new Blob([t]), `batch-${i}.md`));
    const res = await fetch(`${api.url}/api/documents/${partner.name}/${kb}/files/batch`, { method: 'POST', headers: { 'X-API-Key': partner.key }, body: fd });
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.equal(body.summary.succeeded, DOCUMENTS);
    const ids: string[] = body.results.map((r: { document_id: string }) => r.document_id);

    const batch = await eventually('a batch of several documents to start', async () => {
      for (const line of system.worker.output) {
        if (!line.includes('"embedding batch"')) continue;
        const entry = JSON.parse(line) as { documents: number; ids: string[] };
        if (entry.documents > 1) return entry;
      }
      return null;
    }, 240_000);
    await system.worker.kill('SIGKILL');
    const inFlight = await api.deps.db.document.findMany({ where: { id: { in: batch.ids } }, select: { embeddingStatus: true } });
    assert.ok(inFlight.every((d) => d.embeddingStatus !== 'success'), 'the killed batch had not been recorded as embedded');

    system.worker = await startWorker(env);
    await eventually('every document embedded', async () => {
      const docs = await api.deps.db.document.findMany({ where: { id: { in: ids } }, select: { embeddingStatus: true } });
      return docs.every((d) => d.embeddingStatus === 'success');
    }, 420_000);

    let chunks = 0;
    for (const id of ids) {
      const doc = (await http('GET', `/api/document/${partner.name}/${kb}/${id}`, { key: partner.key })).body;
      assert.deepEqual(doc.in_queues, [], `document ${id} still queued`);
      assert.equal(doc.processing_error, null);
      assert.ok(doc.embedding_chunk_count > 1, `document ${id} has ${doc.embedding_chunk_count} chunks`);
      const indexes = (await api.deps.index.listDocumentChunkIndexes(id)).sort((a, b) => a - b);
      assert.deepEqual(indexes, Array.from({ length: doc.embedding_chunk_count }, (_, i) => i), `document ${id}'s vectors`);
      chunks += indexes.length;
    }
    assert.equal(await api.deps.index.countKnowledgeBaseChunks(kbRow.id), chunks, 'no chunk of the KB belongs to anything else');
    const events = await api.deps.db.usageEvent.groupBy({ by: ['documentId'], where: { documentId: { in: ids } }, _count: { _all: true } });
    assert.equal(events.length, DOCUMENTS);
    assert.ok(events.every((e) => e._count._all === 1), 'each document charged once');
    const limits = (await http('GET', `/api/knowledgebases/${partner.name}/${kb}/limits`, { key: partner.key })).body;
    assert.equal(limits.characters.consumed, texts.reduce((n, t) => n + [...t].length, 0));
    assert.equal(limits.characters.reserved, 0);
    await eventually('every pipeline to close', async () => {
      for (const id of ids) if (await isWorkflowRunning(api.deps.temporal, documentWorkflowId(id))) return null;
      return true;
    });
  });

  it('a large document does not hold up the small ones behind it: their chunks go into the next batches', async () => {
    const { api, http } = system;
    system.worker ??= await startWorker(env);
    const k = await newKnowledgeBase(http);
    const upload = async (name: string, text: string) => {
      const res = await http('POST', `/api/documents/${k.partner.name}/${k.kb}`, { key: k.partner.key, form: { type: 'file', folder: k.folder, use_original_as_rewritten: 'true', file: { name, content: text } } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      return res.body.id as string;
    };
    const status = async (id: string) => (await api.deps.db.document.findUniqueOrThrow({ where: { id }, select: { embeddingStatus: true } })).embeddingStatus;
    // A heading starts a chunk: 3,000 small chunks, 250 batches of 12.
    const chunks = 3000;
    const large = await upload('large.md', Array.from({ length: chunks }, (_, i) => `# Part ${i}\n\nNote ${i}: the current slows and drops its sand.`).join('\n\n'));
    await eventually('the large document to be embedding', async () => ((await status(large)) === 'in_progress' ? true : null), 120_000);
    const small = await upload('small.md', '# Tides\n\nThe moon pulls the sea.');
    await eventually('the small document in the index', async () => ((await api.deps.index.listDocumentChunkIndexes(small)).length === 1 ? true : null), 120_000);
    const largeWritten = (await api.deps.index.listDocumentChunkIndexes(large)).length;
    assert.ok(largeWritten < chunks / 2, `the small document's chunk was written after ${largeWritten} of the large one's ${chunks}, not after all of them`);
    await eventually('both documents embedded', async () => ((await status(large)) === 'success' && (await status(small)) === 'success' ? true : null), 420_000);
  });
});
