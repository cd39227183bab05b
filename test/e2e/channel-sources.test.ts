import crypto from 'node:crypto';
import assert from 'node:assert/strict';
import { eventually, holdsFor } from '../support/wait.js';
import { unique } from '../support/fixtures.js';
import { channelClient, useChannelSystem, UNIT_PRICE } from '../support/channels.js';
import { channelIdFor } from '../support/youtube-fake.js';
import { channelSourceWorkflowId, progressQuery } from '../../lib/contracts/channel-source.js';

/**
 * Video-channel folders end to end, as a client sees them through the API, against a local video
 * platform that speaks the YouTube Data API's wire protocol: alias forms, pagination, what is
 * imported, deferred, suppressed or counted duplicate, duplicate aliases, bad input, budget
 * blocks, pause and resume, provider failures.
 */
describe('video-channel folders', function () {
  this.timeout(240_000);
  const system = useChannelSystem();
  const c = channelClient(system);
  afterEach(() => c.cleanup());

  const createAndWait = async (k: Awaited<ReturnType<typeof c.newKb>>, url: string, extra: Record<string, string> = {}) => {
    const name = unique('channel');
    const res = await c.createFolder(k, url, extra, name);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return { name, created: res.body };
  };

  it('accepts every alias form: @handle, /@handle URL, /channel/, /user/ (API and channel page), /c/ (channel page)', async () => {
    const { fake } = system;
    const handle = fake.addChannel({ handle: `river${Date.now()}`, videos: [{ title: 'Handle video' }] });
    const handleUrl = fake.addChannel({ handle: `delta${Date.now()}`, videos: [{ title: 'Handle URL video' }] });
    const byId = fake.addChannel({ videos: [{ title: 'Channel ID video' }] });
    const legacy = fake.addChannel({ username: `legacy${Date.now()}`, videos: [{ title: 'Legacy user video' }] });
    const pageUser = fake.addChannel({ pageUser: `pageonly${Date.now()}`, videos: [{ title: 'Page user video' }] });
    const custom = fake.addChannel({ custom: `Custom${Date.now()}`, videos: [{ title: 'Custom name video' }] });
    const cases: Array<[string, typeof handle]> = [
      [`@${handle.handle}`, handle],
      [`https://www.youtube.com/@${handleUrl.handle}/videos`, handleUrl],
      [`https://www.youtube.com/channel/${byId.id}`, byId],
      [`https://www.youtube.com/user/${legacy.username}`, legacy],
      [`https://www.youtube.com/user/${pageUser.pageUser}`, pageUser],
      [`https://www.youtube.com/c/${custom.custom}`, custom],
    ];
    const k = await c.newKb();
    const created = [];
    for (const [url, channel] of cases) {
      const { name, created: body } = await createAndWait(k, url);
      assert.equal(body.type, 'video_channel');
      assert.equal(body.channel_source.channel_url, url);
      assert.equal(body.channel_source.channel_id, channel.id, `${url} resolves to the channel's ID`);
      created.push({ name, channel });
    }
    for (const { name, channel } of created) {
      const e = await c.waitFor(k, name, `${name} synced`, (x) => x.status === 'synced' && x.counts.imported === 1);
      assert.equal(e.channel_id, channel.id);
    }
    const docs = await c.documents(k);
    assert.deepEqual(docs.map((d) => d.url).sort(), created.map(({ channel }) => `https://www.youtube.com/watch?v=${channel.videos[0]!.id}`).sort());
    // /c/ names and page-only /user/ names were read from the channel pages.
    assert.ok(fake.pageRequests.some((p) => p === `/c/${custom.custom}`));
    assert.ok(fake.pageRequests.some((p) => p === `/user/${pageUser.pageUser}`));
  });

  it('pages through the uploads, imports regular videos, shorts and completed streams newest first, and defers a live stream until it ends', async () => {
    const channel = system.fake.addChannel({
      handle: `pages${Date.now()}`,
      videos: [
        { title: 'One' },
        { title: 'Two', kind: 'short', captions: ['A short about river mouths.'] },
        { title: 'Three' },
        { title: 'Four', kind: 'completed', captions: ['The livestream of the flood, now over.'] },
        { title: 'Five' },
        { title: 'Six', kind: 'live' },
        { title: 'Seven' },
      ],
    });
    const k = await c.newKb();
    const { name } = await createAndWait(k, `@${channel.handle}`);
    const synced = await c.waitFor(k, name, 'the first scan', (e) => e.status === 'synced');
    assert.deepEqual(synced.counts, { pending: 0, deferred: 1, imported: 6, duplicate: 0, suppressed: 0 });
    assert.ok(synced.last_sync_at && synced.next_sync_at && Date.parse(synced.next_sync_at) > Date.parse(synced.last_sync_at));
    assert.equal(synced.last_error, null);
    const pages = c.requestsFor(channel).filter((r) => r.resource === 'playlistItems');
    assert.ok(pages.filter((r) => r.params.pageToken).length >= 3, 'every page after the first was asked for by its token');

    const docs = await c.documents(k);
    assert.deepEqual(docs.map((d) => d.name), ['Seven', 'Five', 'Four', 'Three', 'Two', 'One'], 'created newest first, named by title');
    for (const d of docs) {
      assert.equal(d.folder, name);
      assert.equal(d.type, 'url');
      assert.equal(d.auto_rewrite, true);
      assert.equal(d.model_tier, 'standard');
    }
    const short = docs.find((d) => d.name === 'Two');
    await eventually('the short to be digitized', async () => (await c.http('GET', `/api/documents/${k.partner.name}/${k.kb}/${short.id}/content/digitized`, { key: k.partner.key })).status === 200);
    const digitized = await c.http('GET', `/api/documents/${k.partner.name}/${k.kb}/${short.id}/content/digitized`, { key: k.partner.key });
    assert.match(digitized.body.content, /A short about river mouths\./);
    // An imported video goes the whole ordinary way: rewritten and embedded.
    await eventually('an import to be embedded', async () => (await c.documents(k)).some((d) => d.embedding_status === 'success'), 120_000);

    // The live stream ends: the next scan imports it.
    channel.videos.find((v) => v.title === 'Six')!.kind = 'completed';
    const after = await c.waitFor(k, name, 'the ended stream to be imported', (e) => e.counts.imported === 7 && e.counts.deferred === 0);
    assert.equal(after.status === 'synced' || after.status === 'syncing', true);
    assert.equal((await c.documents(k)).filter((d) => d.name === 'Six').length, 1);
  });

  it('keeps a video whose document the user deleted suppressed, and counts a video already in the KB as duplicate', async () => {
    const channel = system.fake.addChannel({ handle: `supp${Date.now()}`, videos: [{ title: 'Kept' }, { title: 'Deleted by the user' }, { title: 'Already here' }] });
    const k = await c.newKb();
    // The third video is already a document of the KB, in a regular folder.
    assert.equal((await c.http('POST', `/api/folders/${k.partner.name}/${k.kb}`, { key: k.partner.key, form: { name: 'notes' } })).status, 201);
    const existing = await c.http('POST', `/api/documents/${k.partner.name}/${k.kb}`, {
      key: k.partner.key,
      form: { type: 'url', folder: 'notes', url: `https://youtu.be/${channel.videos[2]!.id}` },
    });
    assert.equal(existing.status, 201, JSON.stringify(existing.body));

    const { name } = await createAndWait(k, `https://www.youtube.com/@${channel.handle}`);
    const first = await c.waitFor(k, name, 'the first scan', (e) => e.status === 'synced');
    assert.deepEqual(first.counts, { pending: 0, deferred: 0, imported: 2, duplicate: 1, suppressed: 0 });
    assert.deepEqual(first.duplicate_document_ids, [existing.body.id]);

    const victim = (await c.documents(k)).find((d) => d.name === 'Deleted by the user');
    const del = await c.http('DELETE', `/api/documents/${k.partner.name}/${k.kb}/${victim.id}`, { key: k.partner.key });
    assert.equal(del.status, 200);
    assert.equal((await c.entry(k, name)).counts.suppressed, 1);

    const sync = await c.http('POST', `/api/folders/${k.partner.name}/${k.kb}/${name}/sync`, { key: k.partner.key });
    assert.equal(sync.status, 202, JSON.stringify(sync.body));
    assert.equal(sync.body.status, 'pending');
    assert.equal(sync.body.budget.blocked, false);
    await c.waitFor(k, name, 'a later complete scan', (e) => e.status === 'synced' && Date.parse(e.last_sync_at) > Date.parse(first.last_sync_at));
    const docs = await c.documents(k);
    assert.equal(docs.filter((d) => d.name === 'Deleted by the user').length, 0, 'never imported again');
    assert.equal(docs.filter((d) => d.url?.includes(channel.videos[2]!.id)).length, 1, 'the video already present was not imported twice');
    assert.deepEqual((await c.entry(k, name)).counts, { pending: 0, deferred: 0, imported: 1, duplicate: 1, suppressed: 1 });
  });

  it('leaves a video that disappears from the channel alone: its document stays and its status does not change', async () => {
    const channel = system.fake.addChannel({ handle: `vanish${Date.now()}`, videos: [{ title: 'Stays' }, { title: 'Deleted on the platform' }, { title: 'Made private' }] });
    const k = await c.newKb();
    const { name } = await createAndWait(k, `@${channel.handle}`);
    const first = await c.waitFor(k, name, 'the first scan', (e) => e.status === 'synced' && e.counts.imported === 3);
    const before = await c.documents(k);
    assert.equal(before.length, 3);
    // Their transcripts are read before the videos go (what happens to a document later is its pipeline's business).
    const documentOf = async (id: string) => (await c.http('GET', `/api/document/${k.partner.name}/${k.kb}/${id}`, { key: k.partner.key })).body;
    for (const doc of before) await eventually(`${doc.name} digitized`, async () => (await documentOf(doc.id)).file_digitized, 120_000);
    const rowsOf = async () =>
      Object.fromEntries(
        (await system.api.deps.db.channelVideo.findMany({ where: { sourceId: first.id }, select: { videoId: true, status: true, documentId: true, suppressedAt: true } })).map((v) => [v.videoId, v]),
      );
    const rowsBefore = await rowsOf();

    // One video is deleted by its owner, another made private: neither is in the uploads list any
    // more. A new upload arrives at the same time, so the next scan visibly read the new listing.
    const [, deleted, hidden] = channel.videos;
    channel.videos.splice(channel.videos.indexOf(deleted!), 1);
    hidden!.privacy = 'private';
    system.fake.addVideo(channel, { title: 'New upload' });
    assert.equal((await c.http('POST', `/api/folders/${k.partner.name}/${k.kb}/${name}/sync`, { key: k.partner.key })).status, 202);
    const later = await c.waitFor(k, name, 'a later complete scan', (e) => e.status === 'synced' && Date.parse(e.last_sync_at) > Date.parse(first.last_sync_at) && e.counts.imported === 4);
    assert.deepEqual(later.counts, { pending: 0, deferred: 0, imported: 4, duplicate: 0, suppressed: 0 });
    assert.equal(later.last_error, null);

    const after = await c.documents(k);
    for (const doc of before) {
      const now = after.find((d) => d.id === doc.id);
      assert.ok(now, `${doc.name}: its document is still there`);
      assert.deepEqual([now.name, now.url, now.folder], [doc.name, doc.url, doc.folder]);
      const one = await c.http('GET', `/api/document/${k.partner.name}/${k.kb}/${doc.id}`, { key: k.partner.key });
      assert.equal(one.status, 200, `${doc.name}: ${JSON.stringify(one.body)}`);
      assert.notEqual(one.body.embedding_status, 'delete_pending');
      assert.equal(one.body.processing_error, null);
    }
    assert.deepEqual(after.map((d) => d.name).sort(), ['Deleted on the platform', 'Made private', 'New upload', 'Stays']);
    const rowsAfter = await rowsOf();
    for (const video of [deleted!, hidden!]) assert.deepEqual(rowsAfter[video.id], rowsBefore[video.id], `${video.title}: its video record is unchanged (imported, same document)`);
    assert.equal(rowsAfter[deleted!.id]!.status, 'imported');
  });

  it('names at most 100 of the owner\'s documents, newest first, in the 409 of a duplicate alias', async () => {
    const channel = system.fake.addChannel({ handle: `many${Date.now()}`, videos: [{ title: 'Recent one' }, { title: 'Recent two' }] });
    const k = await c.newKb();
    const { name } = await createAndWait(k, `@${channel.handle}`);
    const owner = await c.waitFor(k, name, 'the owner synced', (e) => e.status === 'synced' && e.counts.imported === 2);
    // Paused, so that no scan touches the archive seeded below.
    assert.equal((await c.http('PATCH', `/api/folders/${k.partner.name}/${k.kb}/${name}/channel`, { key: k.partner.key, json: { enabled: false } })).status, 200);
    const docs = await c.documents(k);
    const recent = ['Recent two', 'Recent one'].map((n) => docs.find((d) => d.name === n).id as string);

    // An archive of 103 older imports of the same source, written straight to Postgres: creating
    // them through the pipeline would take long and is not what is under test (the 409 body is).
    const db = system.api.deps.db;
    const source = await db.channelSource.findUniqueOrThrow({ where: { id: owner.id } });
    const archive = Array.from({ length: 103 }, (_, i) => {
      const videoId = `arch${String(i).padStart(3, '0')}${Date.now().toString(36).slice(-4)}`;
      return { documentId: crypto.randomUUID(), videoId, publishedAt: new Date(Date.parse('2020-01-01T00:00:00Z') + i * 3_600_000) };
    });
    await db.document.createMany({
      data: archive.map((a) => ({ id: a.documentId, knowledgeBaseId: source.knowledgeBaseId, folderId: source.folderId, name: `Archive ${a.videoId}`, type: 'url', url: `https://www.youtube.com/watch?v=${a.videoId}`, videoId: a.videoId })),
    });
    await db.channelVideo.createMany({
      data: archive.map((a) => ({ sourceId: source.id, videoId: a.videoId, title: `Archive ${a.videoId}`, publishedAt: a.publishedAt, status: 'imported', documentId: a.documentId, importedAt: new Date(), pipelineStartedAt: new Date() })),
    });
    const before = await c.folders(k);

    const res = await c.createFolder(k, `https://www.youtube.com/channel/${channel.id}`);
    assert.equal(res.status, 409, JSON.stringify(res.body));
    assert.deepEqual(res.body.duplicate_source, { id: owner.id, folder: name, channel_url: `@${channel.handle}`, channel_id: channel.id });
    const newestArchive = [...archive].reverse().slice(0, 98).map((a) => a.documentId);
    assert.equal(res.body.duplicate_document_ids.length, 100, 'capped at 100 of the 105 documents');
    assert.deepEqual(res.body.duplicate_document_ids, [...recent, ...newestArchive], 'newest first; the five oldest are left out');
    assert.deepEqual(await c.folders(k), before, 'no folder was created');
  });

  it('answers 409 for a second alias of a channel the KB already has, naming the source and its documents, and creates nothing', async () => {
    const channel = system.fake.addChannel({ handle: `dup${Date.now()}`, videos: [{ title: 'Only' }, { title: 'Other' }] });
    const k = await c.newKb();
    const { name } = await createAndWait(k, `@${channel.handle}`);
    const owner = await c.waitFor(k, name, 'the owner synced', (e) => e.status === 'synced');
    const ownerDocs = (await c.documents(k)).map((d) => d.id);
    const before = await c.folders(k);

    for (const alias of [`https://www.youtube.com/channel/${channel.id}`, `https://youtube.com/@${channel.handle!.toUpperCase()}`]) {
      const res = await c.createFolder(k, alias);
      assert.equal(res.status, 409, `${alias}: ${JSON.stringify(res.body)}`);
      assert.match(res.body.detail, new RegExp(`already the source of folder "${name}"`));
      assert.deepEqual(res.body.duplicate_source, { id: owner.id, folder: name, channel_url: `@${channel.handle}`, channel_id: channel.id });
      assert.equal(res.body.duplicate_document_ids.length, 2);
      for (const id of res.body.duplicate_document_ids) assert.ok(ownerDocs.includes(id));
    }
    // A handle that resolves to the same channel ID is only found by the resolution: still 409, nothing kept.
    const renamed = system.fake.addChannel({ id: channelIdFor(), handle: `dupalias${Date.now()}` });
    renamed.id = channel.id;
    renamed.videos = channel.videos;
    const viaResolution = await c.createFolder(k, `@${renamed.handle}`);
    assert.equal(viaResolution.status, 409, JSON.stringify(viaResolution.body));
    assert.equal(viaResolution.body.duplicate_source.id, owner.id);
    assert.deepEqual(await c.folders(k), before, 'no folder was created');
    assert.equal((await c.entries(k)).length, 1);
  });

  it('refuses bad input with a clear 4xx and changes nothing', async () => {
    const k = await c.newKb();
    const before = await c.folders(k);
    const form = (f: Record<string, string>) => c.http('POST', `/api/folders/${k.partner.name}/${k.kb}`, { key: k.partner.key, form: f });

    const missing = await c.createFolder(k, undefined);
    assert.equal(missing.status, 400);
    assert.match(missing.body.detail, /channel_url is required/);
    const bad = await c.createFolder(k, 'https://vimeo.com/@river');
    assert.equal(bad.status, 400);
    assert.match(bad.body.detail, /channel_url must be an @handle or a youtube\.com/);
    assert.match((await form({ name: unique('f'), channel_url: '@river' })).body.detail, /only accepted for video_channel/);
    assert.equal((await c.createFolder(k, '@river', { model_tier: 'premium' })).status, 400);
    const unknown = await c.createFolder(k, `@nobody${Date.now()}`);
    assert.equal(unknown.status, 404, JSON.stringify(unknown.body));
    assert.match(unknown.body.detail, /does not exist on the video platform/);
    assert.deepEqual(await c.folders(k), before, 'no folder was created');
    assert.deepEqual(await c.entries(k), []);

    assert.equal((await form({ name: 'plain' })).status, 201);
    assert.equal((await c.http('PATCH', `/api/folders/${k.partner.name}/${k.kb}/plain/channel`, { key: k.partner.key, json: { enabled: false } })).status, 404);
    assert.equal((await c.http('POST', `/api/folders/${k.partner.name}/${k.kb}/plain/sync`, { key: k.partner.key })).status, 404);

    const channel = system.fake.addChannel({ handle: `bad${Date.now()}`, videos: [{}] });
    const { name } = await createAndWait(k, `@${channel.handle}`);
    const patch = await c.http('PATCH', `/api/folders/${k.partner.name}/${k.kb}/${name}/channel`, { key: k.partner.key, json: { channel_url: '@other' } });
    assert.equal(patch.status, 400);
    assert.match(patch.body.detail, /body\.channel_url is not allowed/);
    assert.equal((await c.http('PATCH', `/api/folders/${k.partner.name}/${k.kb}/${name}/channel`, { key: k.partner.key, json: { model_tier: 'best' } })).status, 400);
    assert.equal((await c.entry(k, name)).channel_url, `@${channel.handle}`);

    const noVideo = await c.newKb({}, { allow_audio_video: 'false' });
    const refused = await c.createFolder(noVideo, `@${channel.handle}`);
    assert.equal(refused.status, 403);
    assert.match(refused.body.detail, /video URLs are not enabled/);
    assert.deepEqual(await c.folders(noVideo), []);
  });

  it('creates a folder budget_blocked without any Data API request when the KB has no headroom, and a raised limit resumes it', async () => {
    const channel = system.fake.addChannel({ handle: `budget${Date.now()}`, videos: [{ title: 'Paid for later' }] });
    const k = await c.newKb({ character_limit: '0' });
    const { name, created } = await createAndWait(k, `@${channel.handle}`);
    assert.equal(created.channel_source.status, 'budget_blocked');
    assert.match(created.channel_source.last_error, /^BUDGET_BLOCKED:character_limit_exhausted/);
    assert.equal(c.requestsFor(channel).length, 0, 'no paid discovery started');

    const sync = await c.http('POST', `/api/folders/${k.partner.name}/${k.kb}/${name}/sync`, { key: k.partner.key });
    assert.equal(sync.status, 202);
    assert.equal(sync.body.status, 'pending');
    assert.equal(sync.body.budget.blocked, true);
    await c.waitFor(k, name, 'blocked again', (e) => e.status === 'budget_blocked');
    assert.equal(c.requestsFor(channel).length, 0);

    const raised = await c.http('PATCH', `/api/knowledgebases/${k.partner.name}/${k.kb}/limits`, { key: k.partner.key, json: { character_limit: 1_000_000 } });
    assert.equal(raised.status, 200);
    const synced = await c.waitFor(k, name, 'the source to resume by itself', (e) => e.status === 'synced' && e.counts.imported === 1);
    assert.equal(synced.last_error, null);
    assert.equal((await c.documents(k))[0].name, 'Paid for later');
  });

  it('pauses and resumes: nothing is scanned while paused, a sync is refused, and a new model tier applies to later imports', async () => {
    const channel = system.fake.addChannel({ handle: `pause${Date.now()}`, videos: [{ title: 'Before the pause' }] });
    const k = await c.newKb();
    const { name } = await createAndWait(k, `@${channel.handle}`);
    await c.waitFor(k, name, 'synced', (e) => e.status === 'synced');

    const paused = await c.http('PATCH', `/api/folders/${k.partner.name}/${k.kb}/${name}/channel`, { key: k.partner.key, json: { enabled: false } });
    assert.equal(paused.status, 200, JSON.stringify(paused.body));
    assert.equal(paused.body.enabled, false);
    assert.equal(paused.body.status, 'paused');
    assert.equal(paused.body.next_sync_at, null);
    const sync = await c.http('POST', `/api/folders/${k.partner.name}/${k.kb}/${name}/sync`, { key: k.partner.key });
    assert.equal(sync.status, 409);
    assert.match(sync.body.detail, /paused; resume it/);

    // A scan in flight may finish; after that, nothing more. The workflow shows 'paused' with no
    // next check once its loop has come round to the paused wait, past any scan step.
    const source = system.api.deps.temporal.workflow.getHandle(channelSourceWorkflowId((await c.entry(k, name)).id));
    const pausedWait = async () => {
      const p = await source.query(progressQuery);
      return p.status === 'paused' && p.phase === 'idle' && p.nextCheckAt === null;
    };
    await eventually('the source workflow to wait, paused', pausedWait);
    const requests = c.requestsFor(channel).length;
    system.fake.addVideo(channel, { title: 'During the pause' });
    await holdsFor('no Data API request while paused', {
      ms: 9000,
      why: 'more than two scan intervals (CHANNEL_SCAN_INTERVAL_SECONDS=4, test/support/channels.ts): a source that was not paused would have scanned twice',
    }, () => c.requestsFor(channel).length === requests);
    assert.ok(await pausedWait(), 'still waiting for a signal only');
    assert.equal((await c.documents(k)).length, 1);
    assert.equal((await c.entry(k, name)).status, 'paused');

    const resumed = await c.http('PATCH', `/api/folders/${k.partner.name}/${k.kb}/${name}/channel`, { key: k.partner.key, json: { enabled: true, model_tier: 'economy' } });
    assert.equal(resumed.status, 200);
    assert.equal(resumed.body.enabled, true);
    assert.equal(resumed.body.model_tier, 'economy');
    await c.waitFor(k, name, 'the new video imported', (e) => e.counts.imported === 2);
    const docs = await c.documents(k);
    assert.equal(docs.find((d) => d.name === 'During the pause').model_tier, 'economy');
    assert.equal(docs.find((d) => d.name === 'Before the pause').model_tier, 'standard', 'existing documents keep theirs');
  });

  it('backs off on quota, 5xx and timeouts (incomplete, then finished), and charges every request, failed ones included', async () => {
    const channel = system.fake.addChannel({ handle: `quota${Date.now()}`, videos: [{}, {}, {}, {}, {}] });
    system.fake.fail('playlistItems', 'quota', 2);
    system.fake.fail('playlistItems', 'backend');
    system.fake.fail('playlistItems', 'hang');
    const k = await c.newKb();
    const { name } = await createAndWait(k, `@${channel.handle}`);
    const incomplete = await c.waitFor(k, name, 'the quota failure to show', (e) => e.status === 'incomplete' && /quotaExceeded/.test(e.last_error ?? ''));
    assert.ok(Date.parse(incomplete.next_sync_at) - Date.now() < 5000, 'the retry is near');
    const done = await c.waitFor(k, name, 'the scan to finish after the failures', (e) => e.status === 'synced' && e.counts.imported === 5);
    assert.equal(done.last_error, null);
    assert.equal((await c.documents(k)).length, 5, 'each video once');

    // Settle: pause, then every request sent for this channel is charged at the unit price.
    await c.http('PATCH', `/api/folders/${k.partner.name}/${k.kb}/${name}/channel`, { key: k.partner.key, json: { enabled: false } });
    await eventually('every request charged', async () => {
      const kbs = await c.http('GET', `/api/knowledgebases/${k.partner.name}`, { key: k.partner.key });
      const usage = kbs.body.find((x: { name: string }) => x.name === k.kb).lifetime_usage;
      return Math.abs(usage.cost_usd_total - c.requestsFor(channel).length * UNIT_PRICE) < 1e-9;
    });
  });

  it('shows an invalid key and a channel gone for good as error with last_error, and recovers on sync', async () => {
    const channel = system.fake.addChannel({ handle: `key${Date.now()}`, videos: [{ title: 'Survives' }] });
    system.fake.apiKey = 'a-rotated-key';
    try {
      const k = await c.newKb();
      const { name, created } = await createAndWait(k, `@${channel.handle}`);
      const failed = created.channel_source.status === 'error' ? created.channel_source : await c.waitFor(k, name, 'error', (e) => e.status === 'error');
      assert.match(failed.last_error, /API key not valid/);
      system.fake.apiKey = 'test-data-api-key';
      assert.equal((await c.http('POST', `/api/folders/${k.partner.name}/${k.kb}/${name}/sync`, { key: k.partner.key })).status, 202);
      await c.waitFor(k, name, 'synced with the fixed key', (e) => e.status === 'synced' && e.counts.imported === 1);

      channel.gone = true;
      assert.equal((await c.http('POST', `/api/folders/${k.partner.name}/${k.kb}/${name}/sync`, { key: k.partner.key })).status, 202);
      const gone = await c.waitFor(k, name, 'the channel gone', (e) => e.status === 'error');
      assert.match(gone.last_error, /no longer exists/);
      assert.equal((await c.documents(k)).length, 1, 'its documents are kept');
    } finally {
      system.fake.apiKey = 'test-data-api-key';
    }
  });
});
