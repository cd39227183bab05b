import assert from 'node:assert/strict';
import { DataApiError, YouTubeDataApi, classifyDataApiError } from '../../lib/providers/video-data-api.js';
import { YouTubeFake } from '../support/youtube-fake.js';

/** The Data API client against a local server speaking the protocol: what it sends, how it pages, how it reads errors. */
describe('YouTube Data API client', function () {
  let fake: YouTubeFake;
  let counted = 0;
  const api = (options: { key?: string | null; timeoutMs?: number } = {}) =>
    new YouTubeDataApi({ baseUrl: fake.dataApiBaseUrl, apiKey: options.key === undefined ? 'test-data-api-key' : options.key, timeoutMs: options.timeoutMs ?? 5000 }, { beforeRequest: async () => void counted++ });

  before(async () => {
    fake = await YouTubeFake.start();
  });
  after(() => fake.close());
  beforeEach(() => {
    fake.requests.length = 0;
    counted = 0;
    fake.pageSize = 2;
  });

  it('looks channels up by handle, user name and ID with exactly one filter and the key', async () => {
    const c = fake.addChannel({ handle: 'RiverTalks', username: 'rivertalkslegacy', title: 'River Talks' });
    assert.deepEqual(await api().channels({ forHandle: '@rivertalks' }), [{ id: c.id, title: 'River Talks', customUrl: '@rivertalks', uploadsPlaylistId: `UU${c.id.slice(2)}` }]);
    assert.equal((await api().channels({ forUsername: 'RiverTalksLegacy' }))[0]!.id, c.id);
    assert.equal((await api().channels({ id: [c.id] }))[0]!.id, c.id);
    assert.deepEqual(await api().channels({ forHandle: '@nobody-here' }), []);
    const [byHandle] = fake.requests;
    assert.deepEqual(byHandle!.params, { part: 'snippet,contentDetails', forHandle: '@rivertalks', key: 'test-data-api-key' });
    assert.equal(counted, 4, 'the hook ran once per request');
  });

  it('pages through an uploads playlist with page tokens, 50 per request, newest first', async () => {
    const c = fake.addChannel({ videos: [{}, {}, {}, {}, {}] });
    const client = api();
    const ids: string[] = [];
    let token: string | null = null;
    let pages = 0;
    do {
      const page = await client.playlistPage(`UU${c.id.slice(2)}`, token);
      ids.push(...page.items.map((i) => i.videoId));
      token = page.nextPageToken;
      pages++;
    } while (token);
    assert.equal(pages, 3);
    assert.deepEqual(ids, [...c.videos].reverse().map((v) => v.id));
    for (const r of fake.requestsTo('playlistItems')) {
      assert.equal(r.params.maxResults, '50');
      assert.equal(r.params.part, 'snippet,contentDetails,status');
    }
    assert.equal(fake.requestsTo('playlistItems')[0]!.params.pageToken, undefined);
    assert.ok(fake.requestsTo('playlistItems')[1]!.params.pageToken);
  });

  it('reads video details for a comma-separated list of ids, missing the private ones', async () => {
    const c = fake.addChannel({ videos: [{ kind: 'live' }, { kind: 'completed' }, { privacy: 'private' }] });
    const details = await api().videos(c.videos.map((v) => v.id));
    assert.equal(fake.requestsTo('videos')[0]!.params.id, c.videos.map((v) => v.id).join(','));
    assert.deepEqual(details.map((d) => d.liveBroadcastContent), ['live', 'none']);
    assert.equal(details[1]!.liveStreamingDetails?.actualEndTime !== undefined, true);
    await assert.rejects(api().videos(Array.from({ length: 51 }, (_, i) => `id${i}`)), RangeError);
  });

  it('sorts Google error bodies into kinds: quota and 5xx retry, a bad key stops, a bad page token restarts', async () => {
    const c = fake.addChannel({ videos: [{}] });
    const playlist = `UU${c.id.slice(2)}`;
    const kindOf = (p: Promise<unknown>) => p.then(() => 'ok', (e) => (e instanceof DataApiError ? `${e.kind}:${e.reason}:${e.retryable}` : String(e)));
    fake.fail('playlistItems', 'quota');
    assert.equal(await kindOf(api().playlistPage(playlist, null)), 'quota:quotaExceeded:true');
    fake.fail('playlistItems', 'backend');
    assert.equal(await kindOf(api().playlistPage(playlist, null)), 'unavailable:backendError:true');
    fake.fail('playlistItems', 'drop');
    assert.equal(await kindOf(api().playlistPage(playlist, null)), 'unavailable:null:true');
    assert.equal(await kindOf(api({ key: 'wrong' }).playlistPage(playlist, null)), 'credentials:API_KEY_INVALID:false');
    assert.equal(await kindOf(api().playlistPage(playlist, 'not-a-token')), 'bad_page_token:invalidPageToken:false');
    assert.equal(await kindOf(api().playlistPage('UUnothing', null)), 'not_found:playlistNotFound:false');
    fake.fail('playlistItems', 'hang');
    assert.equal(await kindOf(api({ timeoutMs: 300 }).playlistPage(playlist, null)), 'timeout:null:true');
    assert.equal(counted, 7, 'every request was counted, failed ones included');
    assert.equal(classifyDataApiError(429, null).kind, 'rate_limited');
    assert.equal(classifyDataApiError(403, { error: { message: 'The API is not enabled', errors: [{ reason: 'accessNotConfigured' }] } }).kind, 'credentials');
    assert.equal(classifyDataApiError(403, { error: { message: 'closed', errors: [{ reason: 'channelClosed' }] } }).kind, 'gone');
  });
});
