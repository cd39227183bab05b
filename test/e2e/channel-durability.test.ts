import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import type { WorkflowExecutionInfo } from '@temporalio/client';
import { startWorker } from '../support/system.js';
import { eventually, holdsFor } from '../support/wait.js';
import { unique } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { binaries } from '../../scripts/stack.js';
import { channelClient, useChannelSystem, UNIT_PRICE } from '../support/channels.js';
import { channelSourceWorkflowId, progressQuery } from '../../lib/contracts/channel-source.js';
import { documentWorkflowId } from '../../lib/contracts/document-pipeline.js';
import { isWorkflowRunning } from '../../lib/platform/temporal.js';

const run = promisify(execFile);
/** The exact operator commands docs/operations.md documents, run with the Temporal CLI against the test server. */
const temporalCli = (...args: string[]) => run(binaries.temporal, [...args, '--address', testStack().temporalAddress]);

/**
 * Channel sources are durable: a worker killed in the middle of a scan loses nothing and
 * duplicates nothing, deleting a folder (or KB) stops discovery before the cleanup, operators
 * find and steer sources with the Temporal CLI, and the workflow's history stays bounded
 * (continue-as-new) and replays deterministically.
 */
describe('channel sources: durability and operations', function () {
  this.timeout(300_000);
  // Scans only when asked for, so every scan in these tests is one the test started.
  const system = useChannelSystem({ CHANNEL_SCAN_INTERVAL_SECONDS: '3600' });
  const c = channelClient(system);
  afterEach(async () => {
    system.fake.delayMs = 0;
    await c.cleanup();
  });

  const pagesServed = (channel: Parameters<typeof c.requestsFor>[0]) => c.requestsFor(channel).filter((r) => r.resource === 'playlistItems').length;
  const sourceIdOf = async (k: Awaited<ReturnType<typeof c.newKb>>, name: string) => (await c.entry(k, name)).id as string;
  const kbId = async (k: Awaited<ReturnType<typeof c.newKb>>) => (await system.api.deps.db.knowledgeBase.findFirstOrThrow({ where: { name: k.kb } })).id;

  it('a worker killed mid-scan: a new worker finishes it, every video is imported once, every request is charged once', async () => {
    const channel = system.fake.addChannel({ handle: `crash${Date.now()}`, videos: Array.from({ length: 10 }, (_, i) => ({ title: `Episode ${i + 1}` })) });
    system.fake.delayMs = 700;
    const k = await c.newKb();
    const name = unique('channel');
    assert.equal((await c.createFolder(k, `@${channel.handle}`, {}, name)).status, 201);
    const id = await sourceIdOf(k, name);
    await eventually('the second page to be served', async () => pagesServed(channel) >= 2);
    await system.worker.kill('SIGKILL');
    system.worker = await startWorker(system.env);

    const synced = await c.waitFor(k, name, 'the scan to finish on the new worker', (e) => e.status === 'synced' && e.counts.imported === 10, 180_000);
    assert.equal(synced.counts.pending, 0);
    const docs = await c.documents(k);
    assert.equal(docs.length, 10);
    assert.equal(new Set(docs.map((d) => d.url)).size, 10, 'no video has two documents');
    const described = await system.api.deps.temporal.workflow.getHandle(channelSourceWorkflowId(id)).describe();
    assert.equal(described.status.name, 'RUNNING', 'still the one workflow of the source');

    await c.http('PATCH', `/api/folders/${k.partner.name}/${k.kb}/${name}/channel`, { key: k.partner.key, json: { enabled: false } });
    // A step is marked done only after its requests are settled (lib/channels/discovery.ts).
    await eventually('every scan step to be settled', async () => (await system.api.deps.db.channelScanStep.count({ where: { sourceId: id, done: false } })) === 0);
    const kbs = await c.http('GET', `/api/knowledgebases/${k.partner.name}`, { key: k.partner.key });
    const charged = Math.round(kbs.body.find((x: { name: string }) => x.name === k.kb).lifetime_usage.cost_usd_total / UNIT_PRICE);
    const sent = c.requestsFor(channel).length;
    // A request counted just before the kill may never have been sent: at most one more.
    assert.ok(charged - sent === 0 || charged - sent === 1, `charged ${charged} units for ${sent} requests`);
  });

  it('deleting a folder while its scan imports stops discovery first, then removes every document; nothing runs afterwards', async () => {
    const channel = system.fake.addChannel({ handle: `del${Date.now()}`, videos: Array.from({ length: 12 }, (_, i) => ({ title: `Clip ${i + 1}` })) });
    const k = await c.newKb();
    const name = unique('channel');
    assert.equal((await c.createFolder(k, `@${channel.handle}`, {}, name)).status, 201);
    const id = await sourceIdOf(k, name);
    await eventually('imports to be under way', async () => (await c.documents(k)).length >= 2);
    system.fake.delayMs = 300;

    const res = await c.http('DELETE', `/api/folders/${k.partner.name}/${k.kb}/${name}`, { key: k.partner.key });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.ok(['deleted', 'delete_pending'].includes(res.body.status));
    if (res.body.status === 'delete_pending') assert.equal(res.body.pending_cleanup.channel_sources, 1);
    assert.deepEqual(await c.entries(k), [], 'the source leaves folder_details at once');
    const seen = (await system.api.deps.db.document.findMany({ where: { folder: { name }, knowledgeBase: { name: k.kb } }, select: { id: true } })).map((d) => d.id);

    await eventually('the folder and its documents to be gone', async () => (await c.documents(k)).length === 0 && !(await c.folders(k)).includes(name) && (await c.http('GET', `/api/kb-data/${k.partner.name}/${k.kb}`, { key: k.partner.key })).body.pending_folder_deletions.length === 0, 120_000);
    assert.equal(await system.api.deps.db.channelSource.count({ where: { id } }), 0);
    assert.equal(await isWorkflowRunning(system.api.deps.temporal, channelSourceWorkflowId(id)), false);
    for (const docId of seen) {
      assert.equal(await isWorkflowRunning(system.api.deps.temporal, documentWorkflowId(docId)), false, `document-${docId} runs no more`);
      assert.deepEqual(await system.api.deps.index.listDocumentChunkIndexes(docId), [], 'no vectors left');
    }
    const after = c.requestsFor(channel).length;
    await holdsFor('no Data API request after the deletion', {
      ms: 3000,
      why: 'the source and document workflows are closed (checked above), and a scan still alive would send a request every ~300 ms (the fake delay): about 10 in this time',
    }, () => c.requestsFor(channel).length === after);
  });

  it('deleting a knowledge base with a channel folder stops its source too', async () => {
    const channel = system.fake.addChannel({ handle: `kbdel${Date.now()}`, videos: [{}, {}] });
    const k = await c.newKb();
    const name = unique('channel');
    assert.equal((await c.createFolder(k, `@${channel.handle}`, {}, name)).status, 201);
    const id = await sourceIdOf(k, name);
    await c.waitFor(k, name, 'synced', (e) => e.status === 'synced');
    const res = await c.http('DELETE', `/api/knowledgebases/${k.partner.name}/${k.kb}`, { key: k.partner.key });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    await eventually('the KB to be gone', async () => (await system.api.deps.db.knowledgeBase.count({ where: { name: k.kb } })) === 0, 120_000);
    assert.equal(await isWorkflowRunning(system.api.deps.temporal, channelSourceWorkflowId(id)), false);
    const admin = testStack().adminApiKey;
    assert.equal((await c.http('DELETE', `/api/partners/${k.partner.name}`, { key: admin })).status, 200);
  });

  it('deleting a partner stops its channel sources first, then removes their folders with everything else', async () => {
    const channel = system.fake.addChannel({ handle: `partner${Date.now()}`, videos: [] });
    const k = await c.newKb();
    const name = unique('channel');
    assert.equal((await c.createFolder(k, `@${channel.handle}`, {}, name)).status, 201);
    const source = await system.api.deps.db.channelSource.findFirstOrThrow({ where: { folder: { name }, knowledgeBase: { partner: { name: k.partner.name } } } });
    const admin = testStack().adminApiKey;
    // The source's first scan may still hold its budget reservation: without force that is a 409.
    const res = await c.http('DELETE', `/api/partners/${k.partner.name}?force=true`, { key: admin });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    await eventually('the partner to be gone', async () => (await c.http('GET', `/api/partners/${k.partner.name}`, { key: admin })).status === 404);
    assert.equal(await isWorkflowRunning(system.api.deps.temporal, channelSourceWorkflowId(source.id)), false);
    assert.equal(await system.api.deps.db.channelSource.count({ where: { id: source.id } }), 0);
  });


  it('operators find sources by search attribute and steer them with the documented temporal commands', async () => {
    const channel = system.fake.addChannel({ handle: `ops${Date.now()}`, videos: [{ title: 'First' }] });
    const k = await c.newKb();
    const name = unique('channel');
    assert.equal((await c.createFolder(k, `@${channel.handle}`, {}, name)).status, 201);
    const first = await c.waitFor(k, name, 'synced', (e) => e.status === 'synced');
    const workflowId = channelSourceWorkflowId(first.id);

    const listed = await eventually('the source listed as synced', async () => {
      const { stdout } = await temporalCli('workflow', 'list', '--query', `WorkflowType="channelSource" AND JobStatus="synced" AND Partner="${k.partner.name}"`);
      return stdout.includes(workflowId) ? stdout : null;
    });
    assert.match(listed, /channelSource/);

    const { stdout: progress } = await temporalCli('workflow', 'query', '--workflow-id', workflowId, '--type', 'progress');
    assert.match(progress, /"status":\s*"synced"/);

    system.fake.addVideo(channel, { title: 'Second' });
    const before = c.requestsFor(channel).length;
    await temporalCli('workflow', 'signal', '--workflow-id', workflowId, '--name', 'syncNow');
    const again = await c.waitFor(k, name, 'a new scan', (e) => e.counts.imported === 2 && e.status === 'synced' && Date.parse(e.last_sync_at) > Date.parse(first.last_sync_at));
    assert.ok(c.requestsFor(channel).length > before);

    await temporalCli('workflow', 'signal', '--workflow-id', workflowId, '--name', 'pause');
    const paused = await c.waitFor(k, name, 'paused by the CLI', (e) => e.status === 'paused');
    assert.equal(paused.enabled, false);
    await temporalCli('workflow', 'signal', '--workflow-id', workflowId, '--name', 'resume');
    const resumed = await c.waitFor(k, name, 'resumed by the CLI', (e) => e.enabled === true && e.status === 'synced');
    assert.equal(resumed.last_sync_at, again.last_sync_at, 'no scan was due: back to its last outcome');

    // A budget-blocked source of one KB, as the operator guide finds it.
    const blocked = await c.newKb({ character_limit: '0' });
    const blockedChannel = system.fake.addChannel({ handle: `opsblocked${Date.now()}`, videos: [{}] });
    const created = await c.createFolder(blocked, `@${blockedChannel.handle}`);
    assert.equal(created.body.channel_source.status, 'budget_blocked');
    const blockedId = channelSourceWorkflowId(created.body.channel_source.id);
    await eventually('the blocked source listed', async () => {
      const { stdout } = await temporalCli('workflow', 'list', '--query', `BudgetBlocked=true AND KnowledgeBaseId="${await kbId(blocked)}"`);
      return stdout.includes(blockedId);
    });
    await temporalCli('workflow', 'signal', '--workflow-id', blockedId, '--name', 'budgetChanged');
    assert.equal((await system.api.deps.temporal.workflow.getHandle(blockedId).query(progressQuery)).status, 'budget_blocked');
  });

  it('continues as new after every scan, and a finished run replays deterministically from its history', async () => {
    const channel = system.fake.addChannel({ handle: `replay${Date.now()}`, videos: [{ title: 'A' }, { title: 'B', kind: 'live' }] });
    const k = await c.newKb();
    const name = unique('channel');
    assert.equal((await c.createFolder(k, `@${channel.handle}`, {}, name)).status, 201);
    const first = await c.waitFor(k, name, 'the first scan', (e) => e.status === 'synced');
    assert.equal((await c.http('POST', `/api/folders/${k.partner.name}/${k.kb}/${name}/sync`, { key: k.partner.key })).status, 202);
    await c.waitFor(k, name, 'a second scan', (e) => e.status === 'synced' && Date.parse(e.last_sync_at) > Date.parse(first.last_sync_at));

    const workflowId = channelSourceWorkflowId(first.id);
    // The source row says `synced` before its run continues as new, and visibility lists the closed
    // run a moment later still: wait on the list of runs itself.
    let runs: WorkflowExecutionInfo[] = [];
    await eventually('two continued runs and one running', async () => {
      runs = [];
      for await (const wf of system.api.deps.temporal.workflow.list({ query: `WorkflowId="${workflowId}"` })) runs.push(wf);
      return runs.filter((r) => r.status.name === 'CONTINUED_AS_NEW').length >= 2 && runs.filter((r) => r.status.name === 'RUNNING').length === 1;
    });
    const continued = runs.filter((r) => r.status.name === 'CONTINUED_AS_NEW');
    try {
      Runtime.install({ logger: new DefaultLogger('WARN') });
    } catch {
      // Another test of this process installed the runtime already.
    }
    for (const r of continued) {
      const history = await system.api.deps.temporal.workflow.getHandle(workflowId, r.runId).fetchHistory();
      await Worker.runReplayHistory({ workflowBundle: { codePath: testStack().workflowBundlePath } }, history, workflowId);
    }
  });
});
