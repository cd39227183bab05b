import assert from 'node:assert/strict';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newKnowledgeBase } from '../support/fixtures.js';
import { rerankTokens, startRerankServer, type RerankServer } from '../support/rerank-server.js';
import { ConfigError, loadConfig } from '../../lib/platform/config.js';
import { systemEnv } from '../support/stack.js';

/**
 * Cross-encoder re-ranking through /api/rag-test/search, against a local server speaking the
 * Cohere-style /rerank protocol: what is sent, the final order and its diagnostics, the KB budget
 * admission of a priced re-ranker (settled with the reported tokens, skipped when the KB cannot
 * hold it, released when the server refuses), and a failing server never failing the search.
 */
describe('re-ranking through /api/rag-test/search', function () {
  this.timeout(240_000);
  let server: RerankServer;
  let priced: RunningApi;
  let free: RunningApi;
  let worker: RunningWorker;
  let kb: Awaited<ReturnType<typeof newKnowledgeBase>>;
  const docs: Record<string, string> = {
    kettle: '# Kettle\n\nDescale the kettle with citric acid once a month; rinse twice before boiling water again.',
    grinder: '# Coffee grinder\n\nClean the burrs of the grinder weekly with a brush; never wash them with water.',
    espresso: '# Espresso machine\n\nDescale the espresso machine every two months and backflush the group head with detergent.',
    fridge: '# Fridge\n\nDefrost the freezer compartment when the ice is thicker than five millimetres.',
  };
  const ids: Record<string, string> = {};

  before(async () => {
    server = await startRerankServer();
    const env = { RERANK_BASE_URL: server.baseUrl, RERANK_MODEL: 'test-cross-encoder', RERANK_API_KEY: 'rk-test', RERANK_CANDIDATES: '3' };
    priced = await startApi({ ...env, RERANK_PRICE_USD_PER_MILLION_TOKENS: '100' });
    free = await startApi(env);
    worker = await startWorker();
    const http = client(priced.url);
    kb = await newKnowledgeBase(http);
    for (const [name, content] of Object.entries(docs)) {
      const res = await http('POST', `/api/documents/${kb.partner.name}/${kb.kb}`, {
        key: kb.partner.key,
        form: { type: 'file', folder: kb.folder, use_original_as_rewritten: 'true', file: { name: `${name}.md`, content, type: 'text/markdown' } },
      });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      ids[name] = res.body.id;
    }
    for (const id of Object.values(ids)) {
      await eventually(`document ${id} embedded`, async () => ((await http('GET', `/api/document/${kb.partner.name}/${kb.kb}/${id}`, { key: kb.partner.key })).body.embedding_status === 'success' ? true : undefined), 120_000);
    }
  });
  after(async () => {
    await worker?.kill();
    await priced?.close();
    await free?.close();
    await server?.close();
  });

  const search = (api: RunningApi, body: Record<string, unknown> = {}) =>
    client(api.url)('POST', '/api/rag-test/search', { key: kb.partner.key, json: { partner: kb.partner.name, kb: kb.kb, user_message: 'how do I descale the espresso machine', ...body } });
  const limits = async () => (await client(priced.url)('GET', `/api/knowledgebases/${kb.partner.name}/${kb.kb}/limits`, { key: kb.partner.key })).body;

  it('sends the first RERANK_CANDIDATES fused results, orders them by the cross-encoder and reports the stage; a priced call is settled in the KB budget', async () => {
    // This server scores the candidates in reverse fused order, so re-ranking visibly reorders.
    server.respond((call) => ({
      json: { results: (call.body.documents ?? []).map((_, index) => ({ index, relevance_score: index / 10 })), usage: { total_tokens: rerankTokens(call.body.query!, call.body.documents!) } },
    }));
    const before = await limits();
    const calls = server.calls.length;
    const res = await search(priced);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(server.calls.length, calls + 1, 'one call per search');
    const call = server.calls.at(-1)!;
    assert.equal(call.body.model, 'test-cross-encoder');
    assert.equal(call.body.query, 'how do I descale the espresso machine');
    assert.equal(call.headers.authorization, 'Bearer rk-test');
    assert.equal(call.body.documents!.length, 3, 'RERANK_CANDIDATES');
    assert.equal(call.body.top_n, 3);

    const results = res.body.combined_results as Array<Record<string, any>>;
    // The fused order without re-ranking, for comparison.
    const fusedOnly = (await search(priced, { rerank: false })).body.combined_results as Array<Record<string, any>>;
    assert.deepEqual(call.body.documents, fusedOnly.slice(0, 3).map((r) => r.text), 'the fused top candidates, in fused order');
    assert.deepEqual(results.slice(0, 3).map((r) => r.fused_rank), [3, 2, 1], 'reordered by relevance_score');
    assert.deepEqual(results.slice(0, 3).map((r) => r.rerank_score), [0.2, 0.1, 0]);
    assert.deepEqual(results.slice(3).map((r) => r.fused_rank), fusedOnly.slice(3).map((_, i) => i + 4), 'results past the candidates keep their fused order');
    assert.ok(results.slice(3).every((r) => !('rerank_score' in r)));
    assert.deepEqual(results.map((r) => r.rank), results.map((_, i) => i + 1));
    assert.deepEqual(res.body.config.rerank, { model: 'test-cross-encoder', candidates: 3, priced: true });
    const tokens = rerankTokens(call.body.query!, call.body.documents!);
    assert.deepEqual(res.body.rerank, { model: 'test-cross-encoder', candidates: 3, tokens });
    assert.equal(typeof res.body.timings_ms.rerank, 'number');

    const after = await limits();
    assert.equal(after.tokens.consumed, before.tokens.consumed + tokens, 'the reported tokens are settled against the KB');
    assert.ok(after.dollars.consumed > before.dollars.consumed, 'priced at RERANK_PRICE_USD_PER_MILLION_TOKENS');
    assert.equal(after.tokens.reserved, 0, 'no hold is left behind');
  });

  it('with the default answer (word overlap) the document that answers the question comes first', async () => {
    server.respond(() => 'default');
    const res = await search(priced);
    assert.equal(res.body.combined_results[0].document_id, ids.espresso);
    assert.ok(res.body.combined_results[0].rerank_score > 0.5);
  });

  it('a KB whose budget cannot hold the call is answered in fused order, without calling the server', async () => {
    const { tokens } = await limits();
    await client(priced.url)('PATCH', `/api/knowledgebases/${kb.partner.name}/${kb.kb}/limits`, { key: kb.partner.key, json: { token_limit: tokens.consumed } });
    const calls = server.calls.length;
    const res = await search(priced);
    assert.equal(res.status, 200);
    assert.match(res.body.rerank_skipped, /^BUDGET_BLOCKED:token_limit_exhausted/);
    assert.equal(res.body.rerank, undefined);
    assert.equal(server.calls.length, calls, 'nothing was sent');
    assert.deepEqual(res.body.combined_results.map((r: { fused_rank: number }) => r.fused_rank), res.body.combined_results.map((_: unknown, i: number) => i + 1));
    await client(priced.url)('PATCH', `/api/knowledgebases/${kb.partner.name}/${kb.kb}/limits`, { key: kb.partner.key, json: { token_limit: null } });
  });

  it('a server that refuses the call leaves the search answering in fused order and releases the hold', async () => {
    server.respond(() => ({ status: 503, json: { error: 'model loading' } }));
    const before = await limits();
    const res = await search(priced);
    assert.equal(res.status, 200);
    assert.match(res.body.rerank_skipped, /^RERANK_FAILED: the re-ranker answered 503/);
    assert.equal(res.body.combined_results[0].fused_rank, 1);
    const after = await limits();
    assert.equal(after.tokens.consumed, before.tokens.consumed, 'nothing is charged');
    assert.equal(after.tokens.reserved, 0, 'the hold is released');
    server.respond(() => 'default');
  });

  it('an unpriced re-ranker (self-hosted) re-ranks without touching the budget; rerank: false turns it off per request', async () => {
    const before = await limits();
    const calls = server.calls.length;
    const res = await search(free);
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.config.rerank, { model: 'test-cross-encoder', candidates: 3, priced: false });
    assert.equal(res.body.combined_results[0].document_id, ids.espresso);
    assert.equal(server.calls.length, calls + 1);
    assert.deepEqual((await limits()).tokens, before.tokens, 'not admitted through the budget');
    const off = await search(free, { rerank: false });
    assert.equal(server.calls.length, calls + 1, 'rerank: false sends nothing');
    assert.equal(off.body.config.rerank, null);
  });

  it('configuration: RERANK_BASE_URL needs RERANK_MODEL; the model without a URL is an error; bad numbers are refused', () => {
    const base = systemEnv();
    assert.throws(() => loadConfig({ ...base, RERANK_BASE_URL: 'http://127.0.0.1:1' }), ConfigError);
    assert.throws(() => loadConfig({ ...base, RERANK_MODEL: 'm' }), ConfigError);
    assert.throws(() => loadConfig({ ...base, RERANK_BASE_URL: 'http://127.0.0.1:1', RERANK_MODEL: 'm', RERANK_CANDIDATES: '0' }), ConfigError);
    assert.throws(() => loadConfig({ ...base, RETRIEVAL_FUSION: 'borda' }), ConfigError);
    assert.throws(() => loadConfig({ ...base, RETRIEVAL_WEIGHT_DENSE: '-1' }), ConfigError);
    const ok = loadConfig({ ...base, RERANK_BASE_URL: 'http://127.0.0.1:1/', RERANK_MODEL: 'm', RETRIEVAL_FUSION: 'rrf', RETRIEVAL_WEIGHT_DENSE: '0.5' });
    assert.deepEqual(ok.retrieval.reranker, { baseUrl: 'http://127.0.0.1:1', apiKey: null, model: 'm', candidates: 30, timeoutMs: 10_000, priceUsdPerMillionTokens: null });
    assert.equal(ok.retrieval.fusion, 'rrf');
    assert.deepEqual(ok.retrieval.weights, { dense: 0.5, sparse: null, bm25: null });
  });
});
