import assert from 'node:assert/strict';
import { client, eventually, startWorker, useRunningSystem } from '../support/system.js';
import { newKnowledgeBase } from '../support/fixtures.js';
import { documentWorkflowId, progressQuery } from '../../lib/contracts/document-pipeline.js';

const article = `# Lighthouse keeping

The keeper of the Skerryvore lighthouse trimmed the lamp wicks every evening at dusk.

## Fog signals

When fog rolled in from the Atlantic, the keeper sounded a compressed-air horn every ninety seconds so that fishing boats could find the channel.
`;

/** A long document: enough chunks that embedding takes a few seconds. */
function longDocument(paragraphs: number): string {
  const out = ['# Field notes on coastal birds'];
  for (let i = 0; i < paragraphs; i++) {
    out.push(
      `Observation ${i}: a flock of ${10 + (i % 37)} oystercatchers foraged along tide line ${i} near marker ${i * 7}. ` +
        `The wind came from bearing ${(i * 13) % 360} degrees and the observer counted ${i % 5} juvenile birds among them. ` +
        `Notes for entry ${i} mention wet sand, kelp and a passing trawler registered as vessel number ${1000 + i}.`,
    );
  }
  return out.join('\n\n');
}

describe('document pipeline, end to end through Temporal', function () {
  const system = useRunningSystem();
  const http: ReturnType<typeof client> = (...args) => system.http(...args);

  const documentOf = (p: string, k: string, id: string, key: string) => http('GET', `/api/document/${p}/${k}/${id}`, { key });

  it('without a model API, auto_rewrite keeps the digitized text and fails the rewrite with a processing_error that says what to configure', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const created = await http('POST', `/api/documents/${partner.name}/${kb}`, { key: partner.key, form: { type: 'file', folder, auto_rewrite: 'true', file: { name: 'lighthouse.md', content: article } } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const failed = await eventually('the rewrite step to fail', async () => {
      const d = (await documentOf(partner.name, kb, created.body.id, partner.key)).body;
      return d.processing_error ? d : null;
    });
    assert.match(failed.processing_error, /OPENAI_BASE_URL/);
    assert.ok(failed.digitized_char_count > 0, 'the digitized text is kept');
    assert.equal(failed.file_rewritten, null);
    assert.deepEqual(failed.in_queues, []);
    // The run records the error on the document first and turns `failed` once that activity has
    // returned: wait on the workflow's own progress.
    const progress = await eventually('the run to wait for retry', async () => {
      const p = await system.api.deps.temporal.workflow.getHandle(documentWorkflowId(created.body.id)).query(progressQuery);
      return p.status === 'failed' ? p : null;
    });
    assert.deepEqual(progress, { status: 'failed', generation: 1, budgetRechecks: 0, currentStep: 'rewrite', completedSteps: ['digitize'], lastError: failed.processing_error }, 'the workflow waits for retry at the rewrite step');
  });

  it('uploads a Markdown file, processes it to an embedded document and finds it by search', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const created = await http('POST', `/api/documents/${partner.name}/${kb}`, {
      key: partner.key,
      form: { type: 'file', folder, use_original_as_rewritten: 'true', expert_name: 'R. Stevenson', file: { name: 'lighthouse.md', content: article, type: 'text/markdown' } },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.name, 'lighthouse.md');
    assert.deepEqual(created.body.in_queues, ['digitize']);
    const id = created.body.id as string;

    const done = await eventually('embedding to succeed', async () => {
      const d = await documentOf(partner.name, kb, id, partner.key);
      return d.body.embedding_status === 'success' ? d.body : null;
    });
    assert.equal(done.folder, folder);
    assert.equal(done.file_original, 'lighthouse.md');
    assert.ok(done.file_digitized);
    assert.ok(done.file_rewritten);
    assert.equal(done.digitized_char_count, [...article.replace(/\r\n?/g, '\n')].length);
    assert.equal(done.final_rewrite_char_count, done.digitized_char_count);
    assert.ok(done.embedding_chunk_count >= 1);
    assert.equal(done.embedding_dense_vector_count, done.embedding_chunk_count);
    assert.ok(Date.parse(done.embedded_at) > 0);
    assert.deepEqual(done.in_queues, []);
    assert.equal(done.processing_error, null);
    assert.ok(done.input_file_tokens > 0, 'use_original_as_rewritten computes input tokens locally');
    // No LLM rewrite happened, so the rewrite fields stay empty.
    for (const f of ['rewrite_model', 'rewrite_input_tokens_total', 'rewrite_output_tokens', 'rewrite_cost_usd', 'rewrite_completed_at']) {
      assert.equal(done[f], null, f);
    }
    assert.equal(done.embedding_bm25_language_counts.eng, done.embedding_chunk_count);

    // The KB's status is refreshed by the embedding activity just after it marks the document: wait on the KB itself.
    await eventually('the KB embedding status', async () => {
      const kbs = await http('GET', `/api/knowledgebases/${partner.name}`, { key: partner.key });
      return kbs.body.find((k: { name: string }) => k.name === kb).embedding_status === 'success';
    });

    const search = await http('POST', '/api/rag-test/search', { key: partner.key, json: { partner: partner.name, kb, user_message: 'how often was the fog horn sounded?' } });
    assert.equal(search.status, 200, JSON.stringify(search.body));
    assert.ok(search.body.combined_results.length > 0);
    const top = search.body.combined_results[0];
    assert.equal(top.document_id, id);
    assert.match(top.text, /ninety seconds/);
    assert.ok(top.score > 0);
    assert.equal(search.body.total_results, search.body.combined_results.length);
    assert.equal(top.chunk_id, undefined, 'partner keys see no internal identifiers');
  });

  it('a document that is one unbroken string (60,000 characters, no space) is embedded, its tokens counted', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const created = await http('POST', `/api/documents/${partner.name}/${kb}`, {
      key: partner.key,
      form: { type: 'file', folder, use_original_as_rewritten: 'true', file: { name: 'row.txt', content: 'x'.repeat(60_000) } },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const done = await eventually('the document to be embedded', async () => {
      const d = (await documentOf(partner.name, kb, created.body.id, partner.key)).body;
      return d.embedding_status === 'success' ? d : null;
    }, 120_000);
    // o200k writes eight x as one token.
    assert.equal(done.input_file_tokens, 7_500);
    assert.equal(done.processing_error, null);
  });

  it('search in one knowledge base never returns another knowledge base\'s chunks', async () => {
    const a = await newKnowledgeBase(http);
    const b = await newKnowledgeBase(http);
    const created = await http('POST', `/api/documents/${a.partner.name}/${a.kb}`, {
      key: a.partner.key,
      form: { type: 'file', folder: a.folder, use_original_as_rewritten: 'true', file: { name: 'a.txt', content: 'Zanzibar spice markets sell cloves and cardamom.' } },
    });
    assert.equal(created.status, 201);
    await eventually('embedding', async () => (await documentOf(a.partner.name, a.kb, created.body.id, a.partner.key)).body.embedding_status === 'success');
    const search = await http('POST', '/api/rag-test/search', { key: b.partner.key, json: { partner: b.partner.name, kb: b.kb, user_message: 'Zanzibar cloves' } });
    assert.equal(search.status, 200);
    assert.deepEqual(search.body.combined_results, []);
  });

  it('a worker killed mid-embedding is replaced and the document finishes with every chunk written once', async function () {
    this.timeout(180_000);
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const text = longDocument(700);
    const created = await http('POST', `/api/documents/${partner.name}/${kb}`, {
      key: partner.key,
      form: { type: 'file', folder, use_original_as_rewritten: 'true', file: { name: 'birds.md', content: text } },
    });
    assert.equal(created.status, 201);
    const id = created.body.id as string;

    // Wait until embedding runs and some chunks are in the index, then kill the worker outright.
    await eventually('embedding to be under way', async () => {
      const d = await documentOf(partner.name, kb, id, partner.key);
      return d.body.embedding_status === 'in_progress' && (await system.api.deps.index.countDocumentChunks(id)) > 0;
    });
    await system.worker.kill('SIGKILL');
    const described = await system.api.deps.temporal.workflow.getHandle(documentWorkflowId(id)).describe();
    assert.equal(described.status.name, 'RUNNING');
    assert.notEqual((await documentOf(partner.name, kb, id, partner.key)).body.embedding_status, 'success');

    system.worker = await startWorker();
    const done = await eventually(
      'embedding to succeed on the new worker',
      async () => {
        const d = await documentOf(partner.name, kb, id, partner.key);
        return d.body.embedding_status === 'success' ? d.body : null;
      },
      150_000,
    );
    const indexes = await system.api.deps.index.listDocumentChunkIndexes(id);
    assert.equal(indexes.length, done.embedding_chunk_count, 'no chunk is written twice');
    assert.deepEqual([...indexes].sort((x, y) => x - y), Array.from({ length: done.embedding_chunk_count }, (_, i) => i));
    const result = await system.api.deps.temporal.workflow.getHandle(documentWorkflowId(id)).result();
    assert.equal(result.status, 'completed');
  });
});
