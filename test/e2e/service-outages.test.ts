import assert from 'node:assert/strict';
import { client, eventually, isolatedSystemEnv, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newKnowledgeBase } from '../support/fixtures.js';
import { embeddingsAnswer, fakeTokenCount, startOpenAiUpstream, type OpenAiUpstream, type UpstreamCall } from '../support/openai-upstream.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { testStack } from '../support/stack.js';
import { VectorIndex } from '../../lib/providers/vector-index.js';
import { documentWorkflowId, progressQuery, retrySignal } from '../../lib/contracts/document-pipeline.js';

/**
 * Outages of the services a document's embedding needs: an OpenAI-compatible embeddings API (a
 * local server of that protocol, told to fail) and the vector index (the suite's Weaviate behind a
 * proxy the test takes down, for the API and the worker). An outage delays the document, shown in
 * the workflow's progress, for up to EMBEDDING_MAX_OUTAGE_SECONDS; a request the provider refuses
 * fails the step at once.
 */
type Kb = Awaited<ReturnType<typeof newKnowledgeBase>>;

describe('service outages while embedding', function () {
  this.timeout(180_000);
  const MAX_OUTAGE_SECONDS = 15;
  const WEAVIATE_TIMEOUT_SECONDS = 3;
  let upstream: OpenAiUpstream;
  let weaviate: TcpProxy;
  let api: RunningApi;
  let worker: RunningWorker;
  let dropIsolated: (() => Promise<void>) | undefined;
  /** How the embeddings API answers now. */
  let mode: 'ok' | 'unavailable' | 'unauthorized' = 'ok';
  /** Runs before the embeddings API answers a call. */
  let beforeAnswer: ((call: UpstreamCall) => void) | null = null;

  before(async () => {
    upstream = await startOpenAiUpstream((call) => {
      if (mode === 'unavailable') return { status: 503, json: { error: { message: 'The server is overloaded', type: 'server_error' } } };
      if (mode === 'unauthorized') return { status: 401, json: { error: { message: 'Incorrect API key provided', type: 'invalid_request_error', code: 'invalid_api_key' } } };
      beforeAnswer?.(call);
      return { json: embeddingsAnswer(call) };
    });
    weaviate = await startTcpProxy(testStack().weaviateUrl);
    const isolated = await isolatedSystemEnv('outages');
    dropIsolated = isolated.drop;
    const env = {
      ...isolated.env,
      OPENAI_BASE_URL: upstream.baseUrl,
      OPENAI_API_KEY: 'sk-test',
      EMBEDDING_MODEL: 'fake-embed-outages',
      EMBEDDING_PRICE_USD_PER_MILLION_TOKENS: '100',
      EMBEDDING_MAX_OUTAGE_SECONDS: String(MAX_OUTAGE_SECONDS),
      WEAVIATE_TIMEOUT_SECONDS: String(WEAVIATE_TIMEOUT_SECONDS),
    };
    api = await startApi({ ...env, WEAVIATE_URL: weaviate.url });
    worker = await startWorker({ ...env, WEAVIATE_URL: weaviate.url });
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
    await upstream?.close();
    await weaviate?.close();
    await dropIsolated?.();
  });
  afterEach(() => {
    mode = 'ok';
    beforeAnswer = null;
    weaviate.setDown(false);
    weaviate.setHung(false);
  });

  const upload = async (k: Kb, content: string) => {
    const res = await client(api.url)('POST', `/api/documents/${k.partner.name}/${k.kb}`, {
      key: k.partner.key,
      form: { type: 'file', folder: k.folder, use_original_as_rewritten: 'true', file: { name: 'birds.md', content } },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.id as string;
  };
  const read = async (k: Kb, id: string) => (await client(api.url)('GET', `/api/document/${k.partner.name}/${k.kb}/${id}`, { key: k.partner.key })).body;
  const limits = async (k: Kb) => (await client(api.url)('GET', `/api/knowledgebases/${k.partner.name}/${k.kb}/limits`, { key: k.partner.key })).body;
  const embeddingCalls = (word: string) => upstream.callsTo('/v1/embeddings').filter((c) => JSON.stringify(c.body?.input ?? '').includes(word));
  const tokensOf = (calls: UpstreamCall[]) => calls.reduce((sum, c) => sum + (c.body.input as string[]).reduce((a, t) => a + fakeTokenCount(t), 0), 0);
  const progress = (id: string) => api.deps.temporal.workflow.getHandle(documentWorkflowId(id)).query(progressQuery);
  /** The workflow's progress while it waits out an outage: its message says what is down and when the step runs again. */
  const waitingProgress = (id: string, message: RegExp) =>
    eventually(`document ${id} waiting out the outage`, async () => {
      const p = await progress(id);
      return message.test(p.lastError ?? '') && /trying again in \d+ s$/.test(p.lastError ?? '') ? p : undefined;
    }, 30_000);
  const embedded = (k: Kb, id: string, timeoutMs = 60_000) =>
    eventually(`document ${id} embedded`, async () => {
      const d = await read(k, id);
      if (d.embedding_status === 'failed') throw new Error(`embedding failed: ${d.embedding_error}`);
      return d.embedding_status === 'success' ? d : undefined;
    }, timeoutMs);
  const embedFailed = (k: Kb, id: string, timeoutMs: number) =>
    eventually(`the embed step of ${id} failed`, async () => {
      const d = await read(k, id);
      return d.embedding_status === 'failed' ? d : undefined;
    }, timeoutMs);

  it('an embeddings API answering 503 delays the document instead of failing it; once it answers the document is embedded, charged for the answered call only', async () => {
    const k = await newKnowledgeBase(client(api.url));
    mode = 'unavailable';
    const id = await upload(k, '# Kingfishers\n\nKingfishers dive for small fish from low perches over streams.');
    // The client's own quick retries make three calls an attempt: six are two rounds of the workflow.
    await eventually('two rounds of refused calls', async () => embeddingCalls('Kingfishers').length >= 6, 30_000);
    const waiting = await waitingProgress(id, /^the embeddings API answered HTTP 503: The server is overloaded; trying again in \d+ s$/);
    assert.equal(waiting.status, 'running');
    const during = await read(k, id);
    assert.equal(during.processing_error, null, 'an outage is not a failure of the document');
    assert.notEqual(during.embedding_status, 'failed');
    const search = await client(api.url)('POST', '/api/rag-test/search', { key: k.partner.key, json: { partner: k.partner.name, kb: k.kb, user_message: 'diving birds' } });
    assert.equal(search.status, 503, 'a search whose query cannot be embedded now is told to come back');
    assert.match(search.body.detail, /^the embeddings API answered HTTP 503: .*; try again shortly$/);

    mode = 'ok';
    const done = await embedded(k, id);
    assert.equal(done.processing_error, null);
    const answered = embeddingCalls('Kingfishers').filter((c) => c.body.input.length > 0).slice(-1);
    const usage = await limits(k);
    assert.equal(usage.tokens.consumed, tokensOf(answered), 'the refused calls cost nothing');
    assert.equal(usage.tokens.reserved, 0, 'no hold is left behind');
  });

  it(`an outage longer than EMBEDDING_MAX_OUTAGE_SECONDS (${MAX_OUTAGE_SECONDS}) fails the embed step with the API's message; a retry embeds the document`, async () => {
    const k = await newKnowledgeBase(client(api.url));
    mode = 'unavailable';
    const id = await upload(k, '# Ospreys\n\nOspreys plunge feet first to catch fish near the surface.');
    const failed = await embedFailed(k, id, (MAX_OUTAGE_SECONDS + 30) * 1000);
    assert.match(failed.embedding_error, /the embeddings API answered HTTP 503: .*overloaded.* \(unavailable for (\d+) s\)$/);
    assert.equal(failed.processing_error, null, 'processing_error is for digitization and rewriting (spec 2.5)');
    const lasted = Number(/unavailable for (\d+) s/.exec(failed.embedding_error)![1]);
    assert.ok(lasted >= MAX_OUTAGE_SECONDS && lasted < MAX_OUTAGE_SECONDS + 10, `failed after ${lasted} s`);
    assert.equal((await limits(k)).tokens.reserved, 0, 'the failed step holds nothing');

    mode = 'ok';
    await api.deps.temporal.workflow.getHandle(documentWorkflowId(id)).signal(retrySignal);
    const done = await embedded(k, id);
    assert.equal(done.processing_error, null);
    assert.equal(done.embedding_error, null);
  });

  it('a request the embeddings API refuses (401) fails the step at once, without retries', async () => {
    const k = await newKnowledgeBase(client(api.url));
    mode = 'unauthorized';
    const id = await upload(k, '# Dippers\n\nDippers walk underwater along the beds of fast streams.');
    const failed = await embedFailed(k, id, 30_000);
    assert.match(failed.embedding_error, /^the embeddings API answered HTTP 401: Incorrect API key provided$/);
    assert.equal(failed.processing_error, null);
    assert.equal(embeddingCalls('Dippers').length, 1, 'the refused request was sent once');

    // retry-failed: the KB is in_progress again while the retried embedding runs (here it waits out
    // an outage), not `fail` until it ends.
    const kbStatus = async () => (await client(api.url)('GET', `/api/embedding/${k.partner.name}/${k.kb}`, { key: k.partner.key })).body.embedding_status;
    assert.equal(await kbStatus(), 'fail');
    mode = 'unavailable';
    const retry = await client(api.url)('POST', `/api/embedding/${k.partner.name}/${k.kb}/retry-failed`, { key: k.partner.key });
    assert.equal(retry.body.queued, 1, JSON.stringify(retry.body));
    await eventually('the KB in_progress during the retry', async () => ((await kbStatus()) === 'in_progress' ? true : undefined), 20_000);
    await waitingProgress(id, /^the embeddings API answered HTTP 503/);
    assert.equal(await kbStatus(), 'in_progress');
    mode = 'ok';
    await embedded(k, id, 120_000);
    await eventually('the KB embedded', async () => ((await kbStatus()) === 'success' ? true : undefined), 20_000);
  });

  it('a document whose embedding failed and waits for retry is embedded again by POST /api/embedding/.../documents/{id}: the waiting run stands down', async () => {
    const k = await newKnowledgeBase(client(api.url));
    mode = 'unauthorized';
    const id = await upload(k, '# Larks\n\nLarks sing high above open fields in spring.');
    await embedFailed(k, id, 30_000);
    const before = await api.deps.temporal.workflow.getHandle(documentWorkflowId(id)).describe();
    assert.equal(before.status.name, 'RUNNING', 'the failed run waits for retry');
    mode = 'ok';
    const res = await client(api.url)('POST', `/api/embedding/${k.partner.name}/${k.kb}/documents/${id}?force=true`, { key: k.partner.key });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.queued, true);
    const done = await embedded(k, id);
    assert.equal(done.embedding_error, null);
    const old = await api.deps.temporal.workflow.getHandle(documentWorkflowId(id), before.runId).describe();
    assert.notEqual(old.status.name, 'RUNNING', 'the waiting run stood down');
  });

  it('the vector index unreachable delays the document instead of failing it, without paying for embeddings it could not store, and answers searches 503; once it is back the document is embedded once and found', async () => {
    const k = await newKnowledgeBase(client(api.url));
    weaviate.setDown(true);
    const id = await upload(k, '# Wrens\n\nWrens sing loudly from dense hedges in early spring.');
    const waiting = await waitingProgress(id, /^the vector index \(Weaviate\) is unavailable: /);
    assert.equal(waiting.status, 'running');
    const droppedAfterFirstRound = weaviate.dropped;
    assert.ok(droppedAfterFirstRound > 0);
    await eventually('a second round', async () => weaviate.dropped > droppedAfterFirstRound, 30_000);
    assert.equal(embeddingCalls('Wrens').length, 0, 'no round paid the embeddings API while the index could not take the vectors');
    assert.equal((await read(k, id)).processing_error, null, 'an outage is not a failure of the document');
    const search = () => client(api.url)('POST', '/api/rag-test/search', { key: k.partner.key, json: { partner: k.partner.name, kb: k.kb, user_message: 'wrens singing in hedges' } });
    const refused = await search();
    assert.equal(refused.status, 503, 'a search meanwhile is told to come back, not that the server failed');
    assert.match(refused.body.detail, /^the vector index \(Weaviate\) is unavailable: .*; try again shortly$/);
    assert.equal(refused.headers.get('retry-after'), '5');

    weaviate.setDown(false);
    await embedded(k, id);
    assert.equal(embeddingCalls('Wrens').length, 1, 'the document was embedded once, when the index was back');
    const usage = await limits(k);
    // The refused search's query embedding was answered by the API before the index failed: it counts too.
    assert.equal(usage.tokens.consumed, tokensOf(embeddingCalls('Wrens')) + tokensOf(embeddingCalls('wrens singing')), 'every answered embedding call is charged, once');
    assert.equal(usage.tokens.reserved, 0);
    const found = await search();
    assert.equal(found.status, 200);
    assert.equal(found.body.streams.dense[0].document_id, id);
  });

  it(`a vector index that takes connections but never answers counts as unavailable after WEAVIATE_TIMEOUT_SECONDS (${WEAVIATE_TIMEOUT_SECONDS}): searches answer 503, the document waits; once it answers the document is embedded and found`, async () => {
    const k = await newKnowledgeBase(client(api.url));
    weaviate.setHung(true);
    const id = await upload(k, '# Nuthatches\n\nNuthatches climb head first down the trunks of old oaks.');
    const waiting = await waitingProgress(id, new RegExp(`^the vector index \\(Weaviate\\) did not answer within ${WEAVIATE_TIMEOUT_SECONDS} s; `));
    assert.equal(waiting.status, 'running');
    assert.ok(weaviate.held > 0, 'the requests reached the hung server');
    assert.equal((await read(k, id)).processing_error, null, 'a hung index is an outage, not a failure of the document');
    assert.equal(embeddingCalls('Nuthatches').length, 0, 'nothing was paid for while the index could not take it');
    const search = () => client(api.url)('POST', '/api/rag-test/search', { key: k.partner.key, json: { partner: k.partner.name, kb: k.kb, user_message: 'birds climbing down oak trunks' } });
    const refused = await search();
    assert.equal(refused.status, 503, 'a search is answered, told to come back, instead of waiting on the hung index');
    assert.match(refused.body.detail, new RegExp(`^the vector index \\(Weaviate\\) did not answer within ${WEAVIATE_TIMEOUT_SECONDS} s; try again shortly$`));
    assert.equal(refused.headers.get('retry-after'), '5');

    weaviate.setHung(false);
    await embedded(k, id);
    const found = await search();
    assert.equal(found.status, 200);
    assert.equal(found.body.streams.dense[0].document_id, id);
  });

  it('an index outage in the middle of a long document: once the index is back the document continues from the last chunks written, embedding (and paying for) only those that were not stored', async () => {
    const k = await newKnowledgeBase(client(api.url));
    // About a hundred chunks: two calls of the step's batches (64 chunks each).
    const sections = Array.from({ length: 100 }, (_, i) => `## Albatross colony ${i}\n\n${`Colony ${i} of albatrosses nests on a windy cliff and glides for days over open water without a beat of its wings. `.repeat(9)}`);
    let calls = 0;
    beforeAnswer = (call) => {
      if (JSON.stringify(call.body?.input ?? '').includes('Albatross') && ++calls === 2) weaviate.setDown(true);
    };
    const id = await upload(k, sections.join('\n\n'));
    await waitingProgress(id, /^the vector index \(Weaviate\) is unavailable: /);
    assert.equal(embeddingCalls('Albatross').length, 2, 'the second batch was paid for, then could not be stored');

    weaviate.setDown(false);
    const done = await embedded(k, id);
    const [first, second, third, ...more] = embeddingCalls('Albatross').map((c) => c.body.input as string[]);
    assert.equal(more.length, 0, `the document took ${3 + more.length} calls`);
    assert.ok(first!.length === 64 && second!.length > 0, `batches of ${first!.length} and ${second!.length} chunks`);
    assert.deepEqual(third, second, 'after the outage only the batch that was not stored was embedded again');
    assert.equal(done.embedding_chunk_count, first!.length + second!.length);
    assert.equal(await new VectorIndex(testStack().weaviateUrl).countDocumentChunks(id), done.embedding_chunk_count, 'the index holds every chunk, once');
    const usage = await limits(k);
    assert.equal(usage.tokens.consumed, tokensOf(embeddingCalls('Albatross')), 'each answered call is charged once');
    assert.equal(usage.tokens.reserved, 0);
  });
});
