import assert from 'node:assert/strict';
import { client, eventually, isolatedSystemEnv, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newKnowledgeBase } from '../support/fixtures.js';
import { embeddingsAnswer, startOpenAiUpstream, fakeTokenCount, type OpenAiUpstream } from '../support/openai-upstream.js';

/**
 * Embedding profiles and the budget path of paid embeddings: switching the worker to an
 * OpenAI-compatible embeddings API (a local server of that protocol) re-embeds the knowledge base
 * into the new profile instead of mixing two models' vectors, and the API's reported tokens are
 * recorded against the KB's budget (dollars at the configured price).
 */
describe('embedding profiles and paid embeddings', function () {
  this.timeout(240_000);
  let upstream: OpenAiUpstream;
  let localApi: RunningApi;
  let localWorker: RunningWorker;
  let paidApi: RunningApi | undefined;
  let paidWorker: RunningWorker | undefined;
  // A profile change re-embeds every KB of the system: this test gets a system of its own (its
  // own database and task queue), so the suite's other knowledge bases are left alone.
  let isolated: Record<string, string>;
  let dropIsolated: (() => Promise<void>) | undefined;

  before(async () => {
    upstream = await startOpenAiUpstream((call) => ({ json: embeddingsAnswer(call) }));
    ({ env: isolated, drop: dropIsolated } = await isolatedSystemEnv('profiles'));
    localApi = await startApi(isolated);
    localWorker = await startWorker(isolated);
  });
  after(async () => {
    await paidWorker?.kill();
    await localWorker?.kill();
    await paidApi?.close();
    await localApi?.close();
    await upstream?.close();
    await dropIsolated?.();
  });

  it('a new embedding model re-embeds the KB into its own profile and records tokens and dollars', async () => {
    const http = client(localApi.url);
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const up = await http('POST', `/api/documents/${partner.name}/${kb}`, {
      key: partner.key,
      form: { type: 'file', folder, use_original_as_rewritten: 'true', file: { name: 'owls.md', content: '# Owls\n\nBarn owls hunt voles at night over meadows.' } },
    });
    const id = up.body.id as string;
    const statusOf = (h = http) => h('GET', `/api/embedding/${partner.name}/${kb}`, { key: partner.key });
    await eventually('embedded locally', async () => ((await statusOf()).body.embedded_document_count === 1 ? true : undefined), 120_000);
    const local = (await statusOf()).body;
    assert.equal(local.embedding_profile_name, 'local-use-lite-512');
    const before = await http('GET', `/api/knowledgebases/${partner.name}/${kb}/limits`, { key: partner.key });
    assert.equal(before.body.tokens.consumed, 0, 'the local engine is not paid');

    // The operator switches the model: workers and API restart with EMBEDDING_MODEL.
    await localWorker.kill();
    const env = { ...isolated, OPENAI_BASE_URL: upstream.baseUrl, OPENAI_API_KEY: 'sk-test', EMBEDDING_MODEL: 'fake-embed-64', EMBEDDING_PRICE_USD_PER_MILLION_TOKENS: '100' };
    paidWorker = await startWorker(env);
    paidApi = await startApi(env);
    const paid = client(paidApi.url);
    const switched = await eventually('re-embedded with the new profile', async () => {
      const s = (await statusOf(paid)).body;
      return s.embedding_profile_name === 'openai:fake-embed-64:native' && s.embedded_document_count === 1 && s.pending_document_count === 0 ? s : undefined;
    }, 120_000);
    assert.notEqual(switched.embedding_profile_id, local.embedding_profile_id);
    assert.deepEqual(await paidApi.deps.index.listDocumentChunkIndexes(id), [0], 'the old profile\'s vectors are gone: one chunk in one class');
    assert.ok(upstream.callsTo('/v1/embeddings').length >= 1);

    const calls = upstream.callsTo('/v1/embeddings').filter((c) => Array.isArray(c.body?.input) && c.body.input.length > 0 && c.body.input.some((t: string) => /owls/i.test(t)));
    const tokens = calls.reduce((s, c) => s + (c.body.input as string[]).reduce((a, t) => a + fakeTokenCount(t), 0), 0);
    const limits = await paid('GET', `/api/knowledgebases/${partner.name}/${kb}/limits`, { key: partner.key });
    assert.equal(limits.body.tokens.consumed, tokens, 'the provider-reported tokens are settled');
    assert.ok(limits.body.dollars.consumed > 0, 'priced at EMBEDDING_PRICE_USD_PER_MILLION_TOKENS');
    assert.equal(limits.body.tokens.reserved, 0, 'no hold is left behind');

    const found = await paid('POST', '/api/rag-test/search', { key: partner.key, json: { partner: partner.name, kb, user_message: 'barn owls hunting voles' } });
    assert.equal(found.status, 200);
    assert.equal(found.body.streams.dense[0].document_id, id, 'search embeds the query with the new model and reads the new profile');
  });

  // Runs on the paid system the test above switched to.
  it('a paid embedding the token limit cannot hold waits BUDGET_BLOCKED without calling the API, and resumes when the limit is raised', async () => {
    const paid = client(paidApi!.url);
    const { partner, kb, folder } = await newKnowledgeBase(paid);
    await paid('PATCH', `/api/knowledgebases/${partner.name}/${kb}/limits`, { key: partner.key, json: { token_limit: 5 } });
    const up = await paid('POST', `/api/documents/${partner.name}/${kb}`, {
      key: partner.key,
      form: { type: 'file', folder, use_original_as_rewritten: 'true', file: { name: 'herons.md', content: '# Herons\n\nGrey herons stand still in shallow water.' } },
    });
    const id = up.body.id as string;
    const doc = () => paid('GET', `/api/document/${partner.name}/${kb}/${id}`, { key: partner.key });
    const blocked = await eventually('blocked on tokens', async () => ((await doc()).body.processing_error?.startsWith('BUDGET_BLOCKED:token_limit_exhausted') ? (await doc()).body : undefined), 60_000);
    assert.ok(blocked.in_queues.includes('embedding'));
    const herons = () => upstream.callsTo('/v1/embeddings').filter((c) => JSON.stringify(c.body.input).includes('Grey herons'));
    assert.equal(herons().length, 0, 'nothing was sent to the paid API');
    await paid('PATCH', `/api/knowledgebases/${partner.name}/${kb}/limits`, { key: partner.key, json: { token_limit: 100_000 } });
    const done = await eventually('embedded after the raise', async () => ((await doc()).body.embedding_status === 'success' ? (await doc()).body : undefined), 60_000);
    assert.equal(done.processing_error, null);
    assert.equal(herons().length, 1);
    const limits = (await paid('GET', `/api/knowledgebases/${partner.name}/${kb}/limits`, { key: partner.key })).body;
    assert.equal(limits.tokens.consumed, (herons()[0]!.body.input as string[]).reduce((a, t) => a + fakeTokenCount(t), 0));
    assert.equal(limits.tokens.reserved, 0);

    // Query embeddings are embedding usage too: recorded when they fit, skipped (not failed) when not.
    const search = () => paid('POST', '/api/rag-test/search', { key: partner.key, json: { partner: partner.name, kb, user_message: 'grey herons' } });
    const searched = await search();
    assert.equal(searched.status, 200);
    assert.equal(searched.body.dense_skipped, undefined);
    assert.equal(searched.body.streams.dense[0].document_id, id);
    const afterSearch = (await paid('GET', `/api/knowledgebases/${partner.name}/${kb}/limits`, { key: partner.key })).body;
    assert.equal(afterSearch.tokens.consumed, limits.tokens.consumed + fakeTokenCount('grey herons'), 'the query embedding was settled');
    await paid('PATCH', `/api/knowledgebases/${partner.name}/${kb}/limits`, { key: partner.key, json: { token_limit: afterSearch.tokens.consumed } });
    const exhausted = await search();
    assert.equal(exhausted.status, 200, 'a search of an exhausted KB still answers');
    assert.match(exhausted.body.dense_skipped, /^BUDGET_BLOCKED:token_limit_exhausted/);
    assert.deepEqual(exhausted.body.streams.dense, []);
    assert.equal(exhausted.body.streams.bm25[0].document_id, id, 'BM25 still finds it');
  });
});
