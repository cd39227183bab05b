import assert from 'node:assert/strict';
import { parseChannelAlias } from '../../lib/channels/aliases.js';
import { channelIdInPage } from '../../lib/channels/resolve.js';
import { classifyVideo, isoDurationSeconds } from '../../lib/channels/classify.js';
import type { VideoDetails } from '../../lib/providers/video-data-api.js';

const UC = 'UC_x5XG1OV2P6uZZ5FSM9Ttw';

describe('channel aliases', () => {
  const accepted: Array<[string, string, string]> = [
    ['@RiverTalks', 'handle', 'handle:rivertalks'],
    ['  @river.talks-2  ', 'handle', 'handle:river.talks-2'],
    ['https://www.youtube.com/@RiverTalks', 'handle', 'handle:rivertalks'],
    ['https://www.youtube.com/@RiverTalks/videos', 'handle', 'handle:rivertalks'],
    ['youtube.com/@rivertalks', 'handle', 'handle:rivertalks'],
    ['https://m.youtube.com/@RiverTalks?feature=shared', 'handle', 'handle:rivertalks'],
    ['https://www.youtube.com/@%E5%B7%9D%E3%81%AE%E8%A9%B1', 'handle', 'handle:川の話'],
    [`https://www.youtube.com/channel/${UC}`, 'channel', `channel:${UC}`],
    [`http://youtube.com/channel/${UC}/featured`, 'channel', `channel:${UC}`],
    [`/channel/${UC}`, 'channel', `channel:${UC}`],
    ['https://www.youtube.com/user/GoogleDevelopers', 'user', 'user:googledevelopers'],
    ['https://www.youtube.com/c/RiverTalks', 'custom', 'custom:rivertalks'],
    ['https://www.youtube.com/c/R%C3%ADo', 'custom', 'custom:río'],
  ];
  for (const [input, kind, key] of accepted) {
    it(`reads ${JSON.stringify(input)} as a ${kind}`, () => {
      const alias = parseChannelAlias(input);
      assert.ok(alias, 'accepted');
      assert.equal(alias.kind, kind);
      assert.equal(alias.key, key);
    });
  }

  it('gives every form of one handle the same key, and keeps channel IDs case-sensitive', () => {
    const keys = ['@RiverTalks', 'https://www.youtube.com/@rivertalks/streams', 'youtube.com/@RIVERTALKS'].map((a) => parseChannelAlias(a)!.key);
    assert.equal(new Set(keys).size, 1);
    assert.notEqual(parseChannelAlias(`/channel/${UC}`)!.key, parseChannelAlias('/channel/UC_X5XG1OV2P6UZZ5FSM9TTW')!.key);
  });

  const refused = [
    '',
    'river',
    '@ab',
    '@has space',
    'https://www.youtube.com/watch?v=abcdefghijk',
    'https://vimeo.com/@river',
    'ftp://www.youtube.com/@river',
    'https://user:pw@www.youtube.com/@river',
    'https://www.youtube.com/channel/UC123',
    'https://www.youtube.com/c/',
    'https://www.youtube.com/@%E0%A4',
    `https://www.youtube.com/${'a'.repeat(3000)}`,
  ];
  for (const input of refused) {
    it(`refuses ${JSON.stringify(input.slice(0, 60))}`, () => assert.equal(parseChannelAlias(input), null));
  }

  it("finds the channel ID in a channel page's canonical link, identifier or og:url", () => {
    assert.equal(channelIdInPage(`<html><head><link rel="canonical" href="https://www.youtube.com/channel/${UC}"></head></html>`), UC);
    assert.equal(channelIdInPage(`<html><head><meta itemprop="identifier" content="${UC}"></head></html>`), UC);
    assert.equal(channelIdInPage(`<html><head><meta property="og:url" content="https://www.youtube.com/channel/${UC}"></head></html>`), UC);
    assert.equal(channelIdInPage('<html><head><title>Before you continue to YouTube</title></head></html>'), null);
  });
});

describe('channel video classification', () => {
  it('reads ISO 8601 durations as the Data API writes them', () => {
    assert.equal(isoDurationSeconds('PT1H2M3S'), 3723);
    assert.equal(isoDurationSeconds('P0D'), 0);
    assert.equal(isoDurationSeconds('P1DT2H'), 93600);
    assert.equal(isoDurationSeconds('PT1M30.5S'), 91);
    assert.equal(isoDurationSeconds('P1W'), 604800);
    for (const bad of ['PT', 'P', 'garbage', '', null, '1H']) assert.equal(isoDurationSeconds(bad), null, String(bad));
  });

  const video = (v: Partial<VideoDetails>): VideoDetails => ({
    id: 'abcdefghijk', title: 't', publishedAt: '2024-01-01T00:00:00Z', liveBroadcastContent: 'none', duration: 'PT5M', privacyStatus: 'public', uploadStatus: 'processed', liveStreamingDetails: null, ...v,
  });
  const table: Array<[string, VideoDetails | undefined, string, string?]> = [
    ['a regular video', video({}), 'import', 'none'],
    ['a short', video({ duration: 'PT45S' }), 'import', 'none'],
    ['a completed livestream', video({ liveStreamingDetails: { actualStartTime: 'a', actualEndTime: 'b' } }), 'import', 'completed'],
    ['a premiere that has aired', video({ liveStreamingDetails: { scheduledStartTime: 'a', actualStartTime: 'a', actualEndTime: 'b' } }), 'import', 'completed'],
    ['a live stream', video({ liveBroadcastContent: 'live', duration: 'P0D', liveStreamingDetails: { actualStartTime: 'a' } }), 'defer', 'live'],
    ['an upcoming stream', video({ liveBroadcastContent: 'upcoming', duration: 'P0D', liveStreamingDetails: { scheduledStartTime: 'a' } }), 'defer', 'upcoming'],
    ['a stream that has started but says none yet', video({ liveStreamingDetails: { actualStartTime: 'a' } }), 'defer', 'live'],
    ['an upload still processing', video({ uploadStatus: 'uploaded' }), 'defer', 'processing'],
    ['a private video', video({ privacyStatus: 'private' }), 'skip'],
    ['a rejected upload', video({ uploadStatus: 'rejected' }), 'skip'],
    ['a deleted or private video missing from videos.list', undefined, 'skip'],
  ];
  for (const [what, details, decision, liveState] of table) {
    it(`${decision}s ${what}`, () => {
      const d = classifyVideo(details);
      assert.equal(d.decision, decision);
      if (liveState) assert.equal((d as { liveState: string }).liveState, liveState);
    });
  }
});
