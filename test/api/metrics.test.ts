import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newKnowledgeBase, unique } from '../support/fixtures.js';
import { systemEnv, testStack } from '../support/stack.js';
import { createApp } from '../../api/app.js';
import { loadConfig } from '../../lib/platform/config.js';
import { createServices } from '../../lib/services.js';
import { lazyTemporalClient } from '../../lib/platform/temporal.js';
import { freePort } from '../../scripts/stack.js';
import { reserve, settle } from '../../lib/budget/ledger.js';

/**
 * Prometheus metrics at /metrics (docs/operations.md, "Metrics"): who may read them, requests
 * counted under their route template, and the gauges from Postgres and Temporal following what
 * happens to documents, budget operations and workflows.
 */

type Samples = Map<string, number>;

/** `name{a="x",b="y"}` with the labels sorted: the key of one sample. */
const sampleKey = (name: string, labels: Record<string, string> = {}) => {
  const pairs = Object.entries(labels).sort(([a], [b]) => a.localeCompare(b));
  return pairs.length ? `${name}{${pairs.map(([k, v]) => `${k}="${v}"`).join(',')}}` : name;
};

/** The samples of a text exposition (label values here never hold quotes, commas or braces). */
function parseExposition(text: string): Samples {
  const samples: Samples = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const valueAt = line.lastIndexOf(' ');
    const series = line.slice(0, valueAt);
    const brace = series.indexOf('{');
    const name = brace < 0 ? series : series.slice(0, brace);
    const labels: Record<string, string> = {};
    if (brace >= 0) {
      for (const pair of series.slice(brace + 1, -1).split(',')) {
        const eq = pair.indexOf('=');
        labels[pair.slice(0, eq)] = pair.slice(eq + 2, -1);
      }
    }
    samples.set(sampleKey(name, labels), Number(line.slice(valueAt + 1)));
  }
  return samples;
}

const valueOf = (samples: Samples, name: string, labels: Record<string, string> = {}) => samples.get(sampleKey(name, labels)) ?? 0;

describe('Prometheus metrics at /metrics', function () {
  this.timeout(240_000);
  const metricsKey = `mk_${crypto.randomBytes(24).toString('base64url')}`;
  let api: RunningApi;
  let http: ReturnType<typeof client>;
  let worker: RunningWorker | null = null;
  const admin = () => testStack().adminApiKey;

  before(async () => {
    // No cache: every scrape reads Postgres and Temporal afresh, so the test sees each change.
    api = await startApi({ METRICS_API_KEY: metricsKey, METRICS_CACHE_SECONDS: '0' });
    http = client(api.url);
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
  });

  const get = (url: string, headers: Record<string, string> = {}) => fetch(url + '/metrics', { headers });
  const scrape = async (url = api.url): Promise<Samples> => {
    const res = await get(url, { Authorization: `Bearer ${metricsKey}` });
    assert.equal(res.status, 200, await res.clone().text());
    return parseExposition(await res.text());
  };
  /** A scrape once two in a row agree on the given series (visibility settles a moment after a change). */
  const settledScrape = async (name: string, labels: Record<string, string>) => {
    let last = await scrape();
    return eventually(`${name} to settle`, async () => {
      await new Promise((r) => setTimeout(r, 500));
      const next = await scrape();
      const same = valueOf(next, name, labels) === valueOf(last, name, labels);
      last = next;
      return same ? next : null;
    });
  };

  it('is read with the administrator key or METRICS_API_KEY (Bearer or X-API-Key); no key or an unknown one is 401, a partner key 403', async () => {
    const { partner } = await newKnowledgeBase(http);
    const none = await get(api.url);
    assert.equal(none.status, 401);
    assert.match((await none.json()).detail, /administrator key or METRICS_API_KEY/);
    assert.equal((await get(api.url, { Authorization: `Bearer pk_${crypto.randomBytes(32).toString('base64url')}` })).status, 401);
    assert.equal((await get(api.url, { Authorization: `Bearer ${partner.key}` })).status, 403);
    assert.equal((await get(api.url, { 'X-API-Key': partner.key })).status, 403);

    const accepted: Array<Record<string, string>> = [{ Authorization: `Bearer ${admin()}` }, { Authorization: `Bearer ${metricsKey}` }, { 'X-API-Key': metricsKey }];
    for (const headers of accepted) {
      const res = await get(api.url, headers);
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type')!, /^text\/plain; version=0\.0\.4/);
      const text = await res.text();
      assert.match(text, /^# HELP dwb_http_requests_total /m);
      assert.match(text, /^process_resident_memory_bytes \d+/m, "the process's own metrics");
    }
    // The metrics key reads metrics and nothing else.
    assert.equal((await http('GET', '/api/partners', { key: metricsKey })).status, 401);
    assert.equal((await http('GET', '/api/queue', { key: metricsKey })).status, 401);
  });

  it('counts and times requests under their route template, method and status, never under the raw path', async () => {
    const { partner, kb } = await newKnowledgeBase(http);
    const missing = crypto.randomUUID();
    const template = '/api/document/{partner}/{kb}/{doc_id}';
    const before = await scrape();
    assert.equal((await http('GET', `/api/document/${partner.name}/${kb}/${missing}`, { key: partner.key })).status, 404);
    assert.equal((await http('GET', `/api/document/${partner.name}/${kb}/${missing}`, { key: partner.key })).status, 404);
    assert.equal((await http('GET', `/api/document/${partner.name}/${kb}/${missing}`)).status, 401);
    const stray = `/no-such-${crypto.randomUUID()}`;
    assert.equal((await http('POST', stray, { json: {} })).status, 404);
    assert.equal((await http('GET', '/health')).status, 200);
    // Refused by the quota gate before any route ran: still counted under the route it was for.
    assert.equal((await http('POST', '/v3/chat/completions', { json: { model: 'm', messages: [] } })).status, 401);

    const after = await scrape();
    const delta = (name: string, labels: Record<string, string>) => valueOf(after, name, labels) - valueOf(before, name, labels);
    assert.equal(delta('dwb_http_requests_total', { method: 'GET', route: template, status: '404' }), 2);
    assert.equal(delta('dwb_http_requests_total', { method: 'GET', route: template, status: '401' }), 1);
    assert.equal(delta('dwb_http_request_duration_seconds_count', { method: 'GET', route: template, status: '404' }), 2, 'the latency histogram');
    assert.equal(delta('dwb_http_request_duration_seconds_bucket', { method: 'GET', route: template, status: '404', le: '+Inf' }), 2);
    assert.ok(valueOf(after, 'dwb_http_request_duration_seconds_sum', { method: 'GET', route: template, status: '404' }) > 0);
    assert.equal(delta('dwb_http_requests_total', { method: 'POST', route: 'unmatched', status: '404' }), 1, 'a path no route has');
    assert.equal(delta('dwb_http_requests_total', { method: 'GET', route: '/health', status: '200' }), 1);
    assert.equal(delta('dwb_http_requests_total', { method: 'POST', route: '/v3/chat/completions', status: '401' }), 1);
    assert.equal(delta('dwb_http_requests_total', { method: 'GET', route: '/metrics', status: '200' }), 1, 'the scrape before is counted too');
    const text = [...after.keys()].join('\n');
    for (const raw of [missing, partner.name, stray]) assert.ok(!text.includes(raw), `no label holds ${raw}`);
  });

  it('gauges follow queued and budget-blocked documents, uncertain operations and workflows', async () => {
    const running = { type: 'documentPipeline', status: 'Running' };
    // No worker yet: nothing moves but what this test does.
    const s0 = await settledScrape('dwb_workflow_executions', running);
    assert.equal(valueOf(s0, 'dwb_metrics_source_up', { source: 'postgres' }), 1);
    assert.equal(valueOf(s0, 'dwb_metrics_source_up', { source: 'temporal' }), 1);
    for (const queue of ['digitize', 'rewrite', 'embedding']) assert.ok(s0.has(sampleKey('dwb_queue_documents', { queue })), `queue ${queue} is always reported`);

    // A document over its KB's character limit: queued for digitization, then BUDGET_BLOCKED.
    const { partner, kb, folder } = await newKnowledgeBase(http);
    await http('PATCH', `/api/knowledgebases/${partner.name}/${kb}/limits`, { key: partner.key, json: { character_limit: 0 } });
    const created = await http('POST', `/api/documents/${partner.name}/${kb}`, {
      key: partner.key,
      form: { type: 'file', folder, use_original_as_rewritten: 'true', file: { name: `${unique('doc')}.txt`, content: 'A tide table for the harbour.\n' } },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.deepEqual(created.body.in_queues, ['digitize']);
    const s1 = await scrape();
    assert.equal(valueOf(s1, 'dwb_queue_documents', { queue: 'digitize' }), valueOf(s0, 'dwb_queue_documents', { queue: 'digitize' }) + 1);
    // Temporal's visibility lists the new run a moment after it starts: wait on the metric itself.
    await eventually('the new pipeline counted as running', async () => valueOf(await scrape(), 'dwb_workflow_executions', running) === valueOf(s0, 'dwb_workflow_executions', running) + 1);

    // An uncertain provider outcome counts until an operator resolves it.
    const kbRow = await api.deps.db.knowledgeBase.findFirstOrThrow({ where: { name: kb, partner: { name: partner.name } } });
    const operationKey = `rewrite-${crypto.randomUUID()}`;
    assert.equal((await reserve(api.deps.db, { knowledgeBaseId: kbRow.id, operationKey, workflowId: 'metrics-test', category: 'rewrite', bound: { tokens: 100 } })).admitted, true);
    assert.equal(await settle(api.deps.db, operationKey, { inputTokens: null, outputTokens: null }), 'uncertain');
    const uncertain = { category: 'rewrite' };
    assert.equal(valueOf(await scrape(), 'dwb_budget_uncertain_operations', uncertain), valueOf(s0, 'dwb_budget_uncertain_operations', uncertain) + 1);
    const resolved = await http('POST', `/api/knowledgebases/${partner.name}/${kb}/uncertain-operations/resolve`, { key: admin(), json: { operation_key: operationKey, used: false } });
    assert.equal(resolved.status, 200, JSON.stringify(resolved.body));
    assert.equal(valueOf(await scrape(), 'dwb_budget_uncertain_operations', uncertain), valueOf(s0, 'dwb_budget_uncertain_operations', uncertain));

    // A worker takes the document to BUDGET_BLOCKED: counted as soon as the document shows it.
    worker = await startWorker();
    const read = async () => (await http('GET', `/api/document/${partner.name}/${kb}/${created.body.id}`, { key: partner.key })).body;
    await eventually('the block', async () => (await read()).processing_error?.startsWith('BUDGET_BLOCKED:'));
    const blocked = valueOf(await scrape(), 'dwb_budget_blocked_documents');
    assert.ok(blocked >= valueOf(s0, 'dwb_budget_blocked_documents') + 1, `blocked: ${blocked}`);
    const directly = await api.deps.db.document.count({ where: { processingState: 'budget_blocked', deletionRequestedAt: null } });
    assert.ok(blocked <= directly + 1 && blocked >= directly - 1, `the gauge is what Postgres holds (${blocked} vs ${directly})`);

    // Raising the limit resumes it: the block is no longer counted, and the run completes.
    await http('PATCH', `/api/knowledgebases/${partner.name}/${kb}/limits`, { key: partner.key, json: { character_limit: null } });
    await eventually('the document embedded', async () => (await read()).embedding_status === 'success', 120_000);
    assert.ok(valueOf(await scrape(), 'dwb_budget_blocked_documents') <= blocked - 1);
    const completed = { type: 'documentPipeline', status: 'Completed' };
    await eventually('the run counted as completed', async () => valueOf(await scrape(), 'dwb_workflow_executions', completed) >= valueOf(s0, 'dwb_workflow_executions', completed) + 1);
  });

  it('counts open executions always and closed ones for METRICS_CLOSED_WINDOW_SECONDS; a type of no service of ours counts as other', async () => {
    const windowed = await startApi({ METRICS_API_KEY: metricsKey, METRICS_CACHE_SECONDS: '0', METRICS_CLOSED_WINDOW_SECONDS: '3' });
    try {
      const running = { type: 'other', status: 'Running' };
      const terminated = { type: 'other', status: 'Terminated' };
      const s0 = await settledScrape('dwb_workflow_executions', running);
      // A workflow type none of our workers has, on a task queue no worker polls: it stays open until terminated.
      const probe = await api.deps.temporal.workflow.start('metricsWindowProbe', { taskQueue: `metrics-probe-${crypto.randomUUID()}`, workflowId: unique('metrics-probe'), args: [] });
      await eventually('the probe counted as running', async () => valueOf(await scrape(windowed.url), 'dwb_workflow_executions', running) === valueOf(s0, 'dwb_workflow_executions', running) + 1);
      await probe.terminate('metrics test');
      const closed = await eventually('the probe counted as terminated, no longer running', async () => {
        const s = await scrape(windowed.url);
        const moved = valueOf(s, 'dwb_workflow_executions', running) === valueOf(s0, 'dwb_workflow_executions', running) && valueOf(s, 'dwb_workflow_executions', terminated) >= 1;
        return moved ? valueOf(s, 'dwb_workflow_executions', terminated) : null;
      });
      // The API with the default window (one hour) still counts it.
      assert.ok(valueOf(await scrape(), 'dwb_workflow_executions', terminated) >= closed);
      await eventually('the probe out of the 3 s window', async () => valueOf(await scrape(windowed.url), 'dwb_workflow_executions', terminated) < closed, 30_000);
      assert.ok(valueOf(await scrape(), 'dwb_workflow_executions', terminated) >= 1, 'still counted with the default window');
    } finally {
      await windowed.close();
    }
  });

  it('within METRICS_CACHE_SECONDS a scrape storm is answered from one reading', async () => {
    const cached = await startApi({ METRICS_API_KEY: metricsKey, METRICS_CACHE_SECONDS: '3600' });
    try {
      const { partner, kb } = await newKnowledgeBase(http);
      const uncertain = { category: 'rewrite' };
      const first = await scrape(cached.url);
      const uncached = valueOf(await scrape(), 'dwb_budget_uncertain_operations', uncertain);
      const kbRow = await api.deps.db.knowledgeBase.findFirstOrThrow({ where: { name: kb, partner: { name: partner.name } } });
      const operationKey = `rewrite-${crypto.randomUUID()}`;
      await reserve(api.deps.db, { knowledgeBaseId: kbRow.id, operationKey, workflowId: 'metrics-test', category: 'rewrite', bound: { tokens: 1 } });
      await settle(api.deps.db, operationKey, { inputTokens: null, outputTokens: null });
      const storm = await Promise.all(Array.from({ length: 25 }, () => scrape(cached.url)));
      for (const s of storm) assert.equal(valueOf(s, 'dwb_budget_uncertain_operations', uncertain), valueOf(first, 'dwb_budget_uncertain_operations', uncertain), 'the cached reading');
      assert.equal(valueOf(await scrape(), 'dwb_budget_uncertain_operations', uncertain), uncached + 1, 'a process without the cache sees the change');
      await http('POST', `/api/knowledgebases/${partner.name}/${kb}/uncertain-operations/resolve`, { key: admin(), json: { operation_key: operationKey, used: false } });
    } finally {
      await cached.close();
    }
  });

  it('METRICS_API_KEY is checked at start-up', () => {
    const env = systemEnv();
    assert.throws(() => loadConfig({ ...env, METRICS_API_KEY: 'short' }), /METRICS_API_KEY must be at least 16 characters/);
    assert.throws(() => loadConfig({ ...env, METRICS_API_KEY: env.ADMIN_API_KEY! }), /METRICS_API_KEY must differ from ADMIN_API_KEY/);
    assert.throws(() => loadConfig({ ...env, METRICS_CACHE_SECONDS: '-1' }), /METRICS_CACHE_SECONDS/);
    assert.throws(() => loadConfig({ ...env, METRICS_CLOSED_WINDOW_SECONDS: '0' }), /METRICS_CLOSED_WINDOW_SECONDS/);
    assert.equal(loadConfig(env).metrics.apiKey, null, 'unset: the administrator key only');
  });

  it('with Temporal unreachable it still answers: the workflow gauge is left out and its source shows down', async () => {
    const config = loadConfig(systemEnv({ METRICS_API_KEY: metricsKey, LOG_LEVEL: 'error' }));
    fs.mkdirSync(path.join(config.storageDir, 'uploads'), { recursive: true });
    const services = createServices(config, 'api');
    const nowhere = lazyTemporalClient(`127.0.0.1:${await freePort()}`, 'default');
    const server = createApp({ ...services, temporal: nowhere }).listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const started = Date.now();
      const s = await scrape(url);
      assert.ok(Date.now() - started < 9000, 'within a default Prometheus scrape timeout (10 s)');
      assert.equal(valueOf(s, 'dwb_metrics_source_up', { source: 'temporal' }), 0);
      assert.equal(valueOf(s, 'dwb_metrics_source_up', { source: 'postgres' }), 1);
      assert.ok(![...s.keys()].some((k) => k.startsWith('dwb_workflow_executions')));
      assert.ok(s.has('dwb_budget_blocked_documents'));
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await services.db.$disconnect();
      // `nowhere` stays open: its client still retries the abandoned count with backoff, and a
      // closed connection would make that retry throw. It never connected, so it holds nothing.
    }
  });
});
