import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { client, eventually, isolatedSystemEnv, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newKnowledgeBase } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { libraryPassage, speak } from '../support/audio.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { recording, settled, voicePath } from '../voices/support.js';
import { freePort, startObjectStore, type ObjectStoreOptions, type ObjectStoreProcess } from '../../scripts/stack.js';
import { documentWorkflowId, progressQuery } from '../../lib/contracts/document-pipeline.js';
import { uploadFolder } from '../../api/http/upload-folder.js';

/**
 * The object store goes down while a document is being processed, and comes back: the document's
 * workflow waits the outage out (its progress says so) and completes, nothing failed. Uploads sent
 * meanwhile answer 503 in their interface's error shape and create nothing: no row, no staged file.
 * The API and the worker run on an object store of this test's own, which it stops and starts
 * again on the same port and data; the worker reaches it through a proxy, so that a test can take
 * the store away from the worker alone.
 */
describe('an object store outage while work is in flight', function () {
  this.timeout(300_000);
  let store: ObjectStoreProcess;
  let workersStore: TcpProxy;
  let storeOptions: ObjectStoreOptions;
  let api: RunningApi;
  let worker: RunningWorker;
  let call: ReturnType<typeof client>;
  let dropIsolated: (() => Promise<void>) | undefined;
  let pages: http.Server;
  let pageBase: string;
  let pageRequests = 0;
  /** The page's answer waits until this is called: the store is stopped while its fetch is in flight. */
  let releasePage: () => void = () => undefined;
  const held = new Promise<void>((r) => (releasePage = r));
  const article = 'Lighthouse keepers trimmed the wicks every night, and polished the great lens each morning so that the beam carried far out to sea.';

  before(async () => {
    const { objectStore, workDir } = testStack();
    const dir = fs.mkdtempSync(path.join(workDir, 'outage-store-'));
    storeOptions = { dataDir: path.join(dir, 'data'), logFile: path.join(dir, 'store.log'), port: await freePort(), accessKey: objectStore.accessKey, secretKey: objectStore.secretKey, bucket: 'outage-bucket' };
    store = await startObjectStore(storeOptions);
    pages = http.createServer((req, res) => {
      pageRequests++;
      void held.then(() => {
        res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
        res.end(`<!doctype html><html><head><title>Keeping the light</title></head><body><article><h1>Keeping the light</h1><p>${article}</p></article></body></html>`);
      });
    });
    await new Promise<void>((r) => pages.listen(0, '127.0.0.1', r));
    pageBase = `http://127.0.0.1:${(pages.address() as AddressInfo).port}`;
    const isolated = await isolatedSystemEnv('storage_outage');
    dropIsolated = isolated.drop;
    const env = { ...isolated.env, STORAGE_URL: 's3://outage-bucket/files', S3_ENDPOINT: store.endpoint, TRANSCRIPTION_RATE_LIMIT_PER_MINUTE: '0' };
    workersStore = await startTcpProxy(store.endpoint);
    api = await startApi(env);
    worker = await startWorker({ ...env, S3_ENDPOINT: workersStore.url });
    call = client(api.url);
  });
  after(async () => {
    releasePage();
    await worker?.kill();
    await api?.close();
    await store?.stop();
    await workersStore?.close();
    await new Promise((r) => pages?.close(r));
    await dropIsolated?.();
  });

  it('a document waits the outage out and completes; uploads meanwhile answer 503 and leave nothing', async () => {
    const f = await newKnowledgeBase(call);
    const created = await call('POST', `/api/documents/${f.partner.name}/${f.kb}`, { key: f.partner.key, form: { type: 'url', folder: f.folder, url: `${pageBase}/light`, use_original_as_rewritten: 'true' } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.id as string;

    // The worker is fetching the page: the store goes down, then the page arrives and cannot be stored.
    await eventually('the page to be requested', async () => pageRequests > 0);
    await store.stop();
    releasePage();
    const pipeline = api.deps.temporal.workflow.getHandle(documentWorkflowId(id));
    const waiting = await eventually('the outage to show in the workflow', async () => {
      const p = await pipeline.query(progressQuery);
      return /file storage \(the object store\) is unavailable/.test(p.lastError ?? '') ? p : null;
    });
    assert.equal(waiting.status, 'running', 'waiting, not failed');
    assert.equal((await read(f, id)).processing_error, null, 'the document shows no error');

    // A monitor sees which dependency is down.
    const health = await call('GET', '/health/deep');
    assert.equal(health.status, 503);
    assert.deepEqual(health.body.checks, { postgres: { ok: true }, temporal: { ok: true }, weaviate: { ok: true }, storage: { ok: false } });

    // Meanwhile every upload answers 503 in its interface's shape and creates nothing.
    const documentsBefore = await documentCount(f);
    const upload = await call('POST', `/api/documents/${f.partner.name}/${f.kb}`, { key: f.partner.key, form: { type: 'file', folder: f.folder, file: { name: 'kept.txt', content: 'Not one byte of this may stay.' } } });
    assert.equal(upload.status, 503, JSON.stringify(upload.body));
    assert.match(upload.body.detail, /file storage \(the object store\) is unavailable/);
    assert.ok(upload.headers.get('retry-after'), 'with Retry-After');
    assert.equal(await documentCount(f), documentsBefore, 'no document row');

    const audio = fs.readFileSync(await speak(libraryPassage.slice(0, 3).join(' '), 'flite-kal'));
    const transcriptsBefore = await api.deps.db.transcript.count();
    const transcript = await call('POST', '/v2/transcript', { key: f.partner.key, form: { audio: { name: 'call.wav', content: audio } } });
    assert.equal(transcript.status, 503, JSON.stringify(transcript.body));
    assert.match(transcript.body.error, /nothing was kept/);
    assert.equal(await api.deps.db.transcript.count(), transcriptsBefore, 'no transcript row');

    const uploadsBefore = await api.deps.db.audioUpload.count();
    const audioUpload = await call('POST', '/v2/upload', { key: f.partner.key, rawBody: { contentType: 'application/octet-stream', body: audio } });
    assert.equal(audioUpload.status, 503, JSON.stringify(audioUpload.body));
    assert.equal(typeof audioUpload.body.error, 'string');
    assert.equal(await api.deps.db.audioUpload.count(), uploadsBefore, 'no upload row');

    const voice = await call('POST', `/api/voices/${f.partner.name}`, { key: f.partner.key, form: { name: 'Outage voice', file: { name: 'voice.wav', content: audio } } });
    assert.equal(voice.status, 503, JSON.stringify(voice.body));
    assert.match(voice.body.detail, /file storage \(the object store\) is unavailable/);
    assert.equal(await api.deps.db.voice.count({ where: { partner: { name: f.partner.name } } }), 0, 'no voice row');
    await eventually('no staged upload left', async () => fs.readdirSync(uploadFolder(api.deps.config.storageDir)).length === 0, 10_000);

    // The store comes back on its port and data: the document completes, nothing failed.
    store = await startObjectStore(storeOptions);
    const done = await eventually(
      'the document to complete',
      async () => {
        const d = await read(f, id);
        if (d.processing_error) throw new Error(d.processing_error);
        return d.embedding_status === 'success' ? d : null;
      },
      180_000,
    );
    assert.equal(done.name, 'Keeping the light');
    const content = await call('GET', `/api/documents/${f.partner.name}/${f.kb}/${id}/content/rewritten`, { key: f.partner.key });
    assert.equal(content.status, 200, JSON.stringify(content.body));
    assert.match(content.body.content, /Lighthouse keepers trimmed the wicks/);
    const history = await pipeline.fetchHistory();
    const failedTries = (history.events ?? []).filter((e) => e.activityTaskFailedEventAttributes?.failure?.message?.includes('file storage (the object store) is unavailable'));
    assert.ok(failedTries.length >= 1, 'the outage was met by the worker and waited out');
  });

  it('a voice whose split finds the file storage down for longer than its retries waits the outage out and completes (not failed)', async () => {
    const f = await newKnowledgeBase(call);
    const original = fs.readFileSync(await recording('flite-kal', libraryPassage.slice(0, 3)));
    // Down for the worker only: the API stores the original, the worker's split cannot read it.
    workersStore.setDown(true);
    try {
      const created = await call('POST', `/api/voices/${f.partner.name}`, { key: f.partner.key, form: { name: 'Patient voice', file: { name: 'voice.wav', content: original } } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const job = api.deps.temporal.workflow.getHandle(created.body.workflow_id);
      // The split's attempts (about 30 s of them) have run out on the outage: without waiting it
      // out the voice would now be failed.
      await eventually(
        'the split to fail on the outage',
        async () => (await job.fetchHistory()).events?.some((e) => e.activityTaskFailedEventAttributes?.failure?.message?.includes('file storage (the object store) is unavailable')),
        120_000,
      );
      const meanwhile = (await call('GET', voicePath(f.partner.name, 'Patient voice'), { key: f.partner.key })).body;
      assert.equal(meanwhile.status.splitting, 'in_progress', 'still in progress, not failed');
    } finally {
      workersStore.setDown(false);
    }
    const done = await settled(call, f.partner.key, f.partner.name, 'Patient voice');
    assert.equal(done.status.splitting, 'completed', JSON.stringify(done.status));
    assert.equal(done.status.embedding, 'completed', JSON.stringify(done.status));
    assert.ok(done.samples.length > 0);
  });

  const read = async (f: { partner: { name: string; key: string }; kb: string }, id: string) => (await call('GET', `/api/document/${f.partner.name}/${f.kb}/${id}`, { key: f.partner.key })).body;
  const documentCount = async (f: { partner: { name: string }; kb: string }) => api.deps.db.document.count({ where: { knowledgeBase: { name: f.kb, partner: { name: f.partner.name } } } });
});
