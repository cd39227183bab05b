import assert from 'node:assert/strict';
import { client, eventually, isolatedSystemEnv, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newKnowledgeBase } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { startVectorStoreUpstream, type VectorStoreUpstream } from './vector-store-upstream.js';

/**
 * Vendor sync against a local server of the OpenAI vector-store files API: enabling sync on a
 * partner queues its rewritten documents, a new embedding re-syncs (replacing the vendor file),
 * failures are visible and retry-failed recovers them, and the 409 rules.
 */
describe('vendor sync to an external vector store', function () {
  this.timeout(240_000);
  let upstream: VectorStoreUpstream;
  let api: RunningApi;
  let worker: RunningWorker;
  let http: ReturnType<typeof client>;
  let isolated: Awaited<ReturnType<typeof isolatedSystemEnv>>;
  const admin = () => testStack().adminApiKey;
  /** The KB's sync status once `done` says so; until then the probe throws what it shows, for a timeout's report. */
  const syncedWhen = <T>(status: () => Promise<{ body: any }>, done: (s: any) => T | undefined) => async () => {
    const s = (await status()).body;
    const value = done(s);
    if (value) return value;
    throw new Error(`the status showed ${JSON.stringify(s.counts)}, documents ${JSON.stringify(s.documents?.map((d: any) => [d.status, d.error]))}`);
  };

  before(async () => {
    upstream = await startVectorStoreUpstream();
    // A database and task queue of its own: the worker sees no other test file's leftover work,
    // which on the lane's queue could keep it busy while these documents wait to be embedded.
    isolated = await isolatedSystemEnv('vendor_sync');
    const env = { ...isolated.env, VENDOR_SYNC_BASE_URL: upstream.baseUrl, VENDOR_SYNC_API_KEY: 'sk-test', VENDOR_SYNC_MAX_OUTAGE_SECONDS: '6' };
    api = await startApi(env);
    http = client(api.url);
    worker = await startWorker(env);
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
    await upstream?.close();
    await isolated?.drop();
  });

  it('mirrors rewritten documents once sync is enabled, replaces them when re-embedded, retries failures', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const status = () => http('GET', `/api/vendor-sync/${partner.name}/${kb}`, { key: admin() });
    const up = await http('POST', `/api/documents/${partner.name}/${kb}`, {
      key: partner.key,
      form: { type: 'file', folder, use_original_as_rewritten: 'true', file: { name: 'tides.md', content: '# Tides\n\nSpring tides follow the new and full moon.' } },
    });
    assert.equal(up.status, 201);
    const id = up.body.id as string;
    await eventually('embedded', async () => {
      const doc = (await http('GET', `/api/document/${partner.name}/${kb}/${id}`, { key: partner.key })).body;
      if (doc.embedding_status === 'success') return true;
      throw new Error(`the document showed ${JSON.stringify({ status: doc.status, embedding_status: doc.embedding_status, error: doc.error })}`);
    }, 120_000);
    assert.equal((await status()).body.counts.not_queued, 1, 'sync is off: nothing is mirrored');
    const kbData = async () => (await http('GET', `/api/kb-data/${partner.name}/${kb}`, { key: partner.key })).body;
    assert.ok(!('vendor_sync' in (await kbData())), 'kb-data has no vendor_sync summary while sync is off');
    assert.equal((await http('POST', `/api/vendor-sync/${partner.name}/${kb}/backfill`, { key: admin() })).status, 409, 'backfill while sync is disabled');
    assert.equal(upstream.files.size, 0);

    const enable = await http('PUT', `/api/partners/${partner.name}`, { key: admin(), form: { vendor_sync_enabled: 'true' } });
    assert.equal(enable.status, 200, JSON.stringify(enable.body));
    const synced = await eventually('synced after enabling', syncedWhen(status, (s) => (s.counts.synced === 1 ? s : undefined)));
    // The partner's own view, in kb-data: counts and the last mirroring, no vendor ids.
    assert.deepEqual((await kbData()).vendor_sync, { counts: { eligible: 1, pending: 0, synced: 1, failed: 0, not_queued: 0 }, last_synced_at: synced.documents[0].synced_at });
    const store = upstream.stores.get(synced.vector_store_id)!;
    assert.ok(store, 'the KB got its own vector store');
    const firstFile = synced.documents[0].vendor_file_id;
    assert.match(upstream.files.get(firstFile)!.content, /Spring tides/);
    assert.deepEqual([...store.files.keys()], [firstFile]);

    // New final content is embedded and then mirrored again; the old vendor file is removed.
    await http('PUT', `/api/documents/${partner.name}/${kb}/${id}/content/rewritten`, { key: partner.key, form: { content: '# Tides\n\nNeap tides follow the quarter moons.' } });
    const resynced = await eventually('re-synced', async () => {
      const s = (await status()).body;
      return s.counts.synced === 1 && s.documents[0].vendor_file_id !== firstFile ? s : undefined;
    }, 120_000);
    assert.deepEqual([...store.files.keys()], [resynced.documents[0].vendor_file_id]);
    assert.ok(!upstream.files.has(firstFile), 'the previous file is deleted');
    assert.match(upstream.files.get(resynced.documents[0].vendor_file_id)!.content, /Neap tides/);

    // A brief outage is waited out: the sync goes through once the API answers, never shown failed.
    upstream.failUploads = true;
    let calls = upstream.uploadCalls;
    assert.deepEqual((await http('POST', `/api/vendor-sync/${partner.name}/${kb}/backfill`, { key: admin() })).body, { status: 'queued', queued: 1 });
    await eventually('two attempts refused', async () => upstream.uploadCalls - calls >= 6, 30_000);
    assert.equal((await status()).body.counts.failed, 0, 'an outage is not a failure');
    upstream.failUploads = false;
    await eventually('synced after the outage', async () => ((await status()).body.documents[0].vendor_file_id !== resynced.documents[0].vendor_file_id ? true : undefined), 30_000);
    assert.equal((await status()).body.counts.synced, 1);

    // An outage longer than VENDOR_SYNC_MAX_OUTAGE_SECONDS (6): the sync fails visibly, retry-failed queues exactly the failed document.
    upstream.failUploads = true;
    calls = upstream.uploadCalls;
    const backfill = await http('POST', `/api/vendor-sync/${partner.name}/${kb}/backfill`, { key: admin() });
    assert.deepEqual(backfill.body, { status: 'queued', queued: 1 });
    const failed = await eventually('failed', async () => ((await status()).body.counts.failed === 1 ? (await status()).body : undefined), 60_000);
    assert.match(failed.documents[0].error, /^the vector-store API answered HTTP 500: upstream outage \(unavailable for (\d+) s\)$/);
    assert.ok(upstream.uploadCalls - calls > 3, 'tried again for the whole window');
    assert.deepEqual((await kbData()).vendor_sync.counts, { eligible: 1, pending: 0, synced: 0, failed: 1, not_queued: 0 });
    upstream.failUploads = false;
    const retry = await http('POST', `/api/vendor-sync/${partner.name}/${kb}/retry-failed`, { key: admin() });
    assert.deepEqual(retry.body, { status: 'queued', queued: 1 });
    await eventually('synced again', async () => ((await status()).body.counts.synced === 1 ? true : undefined));
  });

  it('deleting a mirrored document, or its partner, removes its vendor file', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    await http('PUT', `/api/partners/${partner.name}`, { key: admin(), form: { vendor_sync_enabled: 'true' } });
    const status = () => http('GET', `/api/vendor-sync/${partner.name}/${kb}`, { key: admin() });
    const up = await http('POST', `/api/documents/${partner.name}/${kb}`, {
      key: partner.key,
      form: { type: 'file', folder, use_original_as_rewritten: 'true', file: { name: 'currents.md', content: '# Currents\n\nRip currents run out to sea.' } },
    });
    const synced = await eventually('synced', syncedWhen(status, (s) => (s.counts.synced === 1 ? s : undefined)), 120_000);
    const fileId = synced.documents[0].vendor_file_id;
    const store = upstream.stores.get(synced.vector_store_id)!;
    assert.ok(upstream.files.has(fileId));

    const deleted = await http('DELETE', `/api/documents/${partner.name}/${kb}/${up.body.id}`, { key: partner.key });
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
    await eventually('the vendor file is removed', async () => !upstream.files.has(fileId) && !store.files.has(fileId), 60_000);
    await eventually('the document is gone', async () => (await http('GET', `/api/document/${partner.name}/${kb}/${up.body.id}`, { key: partner.key })).status === 404);

    // A second mirrored document goes with its partner.
    const second = await http('POST', `/api/documents/${partner.name}/${kb}`, {
      key: partner.key,
      form: { type: 'file', folder, use_original_as_rewritten: 'true', file: { name: 'tides.md', content: '# Tides\n\nThe moon pulls the sea.' } },
    });
    assert.equal(second.status, 201, JSON.stringify(second.body));
    const mirrored = await eventually('the second document synced', syncedWhen(status, (s) => (s.counts.synced === 1 ? (s.documents[0].vendor_file_id as string) : undefined)), 120_000);
    assert.ok(upstream.files.has(mirrored));
    const refused = await http('DELETE', `/api/partners/${partner.name}`, { key: admin() });
    assert.equal(refused.status, 409, 'a vendor-store copy remains (spec 4.5)');
    assert.equal(refused.body.blocking.vendor_synced_documents, 1);
    assert.equal((await http('DELETE', `/api/partners/${partner.name}?force=true`, { key: admin() })).status, 200);
    await eventually('the vendor file of the partner\'s document is removed', async () => !upstream.files.has(mirrored) && !store.files.has(mirrored), 60_000);
    await eventually('the partner is gone', async () => (await http('GET', `/api/partners/${partner.name}`, { key: admin() })).status === 404);
  });
});
