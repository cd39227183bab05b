import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from './system.js';
import { newPartner, unique } from './fixtures.js';
import { startOpenAiUpstream, type OpenAiUpstream } from './openai-upstream.js';
import { YouTubeFake, type FakeChannel } from './youtube-fake.js';

/**
 * The system under test for video-channel folders: the API and one worker process pointed at a
 * local video platform (Data API + pages + captions) and a local model API (so imported videos
 * are rewritten and embedded like any document), with scans every few seconds.
 */
export interface ChannelSystem {
  fake: YouTubeFake;
  upstream: OpenAiUpstream;
  api: RunningApi;
  worker: RunningWorker;
  env: Record<string, string>;
  http: ReturnType<typeof client>;
}

export const UNIT_PRICE = 0.001;

export function channelEnv(fake: YouTubeFake, upstream: OpenAiUpstream, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    VIDEO_DATA_API_BASE_URL: fake.dataApiBaseUrl,
    VIDEO_DATA_API_KEY: 'test-data-api-key',
    VIDEO_PLATFORM_BASE_URL: fake.baseUrl,
    VIDEO_DATA_API_TIMEOUT_SECONDS: '1',
    VIDEO_DATA_API_UNIT_PRICE_USD: String(UNIT_PRICE),
    CHANNEL_SCAN_INTERVAL_SECONDS: '4',
    CHANNEL_RETRY_INITIAL_SECONDS: '1',
    CHANNEL_RETRY_MAX_SECONDS: '2',
    OPENAI_BASE_URL: upstream.baseUrl,
    OPENAI_API_KEY: 'sk-test',
    // Unpriced models: the KB's dollar totals are discovery's alone.
    REWRITE_MODEL_STANDARD: 'rw-standard',
    REWRITE_MODEL_ECONOMY: 'rw-economy',
    ...overrides,
  };
}

/** Registers before/after hooks for a describe block; the object is filled in by the time tests run. */
export function useChannelSystem(overrides: Record<string, string> = {}) {
  const system = {} as ChannelSystem;
  before(async () => {
    system.fake = await YouTubeFake.start();
    system.upstream = await startOpenAiUpstream();
    system.env = channelEnv(system.fake, system.upstream, overrides);
    system.api = await startApi(system.env);
    system.http = client(system.api.url);
    system.worker = await startWorker(system.env);
  });
  after(async () => {
    if (system.api) await stopChannelSources(system.api.deps.temporal);
    await system.worker?.kill();
    await system.api?.close();
    await system.upstream?.close();
    await system.fake?.close();
  });
  return system;
}

/** Ends every running channel-source workflow: they live as long as their rows, which a test run leaves behind. */
export async function stopChannelSources(temporal: Client): Promise<void> {
  for await (const wf of temporal.workflow.list({ query: 'WorkflowType="channelSource" AND ExecutionStatus="Running"' })) {
    await temporal.workflow.getHandle(wf.workflowId).terminate('test finished').catch(() => undefined);
  }
}

export type Kb = { partner: { name: string; key: string }; kb: string };

/** Helpers that act as a client of the API would. */
export function channelClient(system: ChannelSystem) {
  const http: ChannelSystem['http'] = (...args) => system.http(...args);
  const created: Kb[] = [];

  return {
    http,
    async newKb(form: Record<string, string> = {}, partnerSettings: Record<string, string> = {}): Promise<Kb> {
      const partner = await newPartner(http, partnerSettings);
      const kb = unique('kb');
      const res = await http('POST', `/api/knowledgebases/${partner.name}`, { key: partner.key, form: { name: kb, ...form } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      created.push({ partner, kb });
      return { partner, kb };
    },
    createFolder(k: Kb, channelUrl: string | undefined, extra: Record<string, string> = {}, name = unique('channel')) {
      return http('POST', `/api/folders/${k.partner.name}/${k.kb}`, { key: k.partner.key, form: { name, type: 'video_channel', channel_url: channelUrl, ...extra } });
    },
    async entries(k: Kb) {
      const res = await http('GET', `/api/kb-data/${k.partner.name}/${k.kb}`, { key: k.partner.key });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.folder_details as any[];
    },
    async entry(k: Kb, folder: string) {
      const found = (await this.entries(k)).find((e) => e.name === folder);
      assert.ok(found, `folder_details has ${folder}`);
      return found;
    },
    async waitFor(k: Kb, folder: string, what: string, predicate: (e: any) => boolean, timeoutMs = 90_000) {
      let last: unknown;
      try {
        return await eventually(what, async () => {
          const e = await this.entry(k, folder);
          last = e;
          return predicate(e) ? e : null;
        }, timeoutMs);
      } catch (err) {
        throw new Error(`${(err as Error).message}; last entry: ${JSON.stringify(last)}`, { cause: err });
      }
    },
    async documents(k: Kb) {
      const res = await http('GET', `/api/documents/${k.partner.name}/${k.kb}`, { key: k.partner.key });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.documents as any[];
    },
    async folders(k: Kb) {
      return (await http('GET', `/api/folders/${k.partner.name}/${k.kb}`, { key: k.partner.key })).body.folders as string[];
    },
    /** Data API requests about one channel: its lookups, its uploads pages, its videos' details. */
    requestsFor(channel: FakeChannel) {
      const videoIds = new Set(channel.videos.map((v) => v.id));
      return system.fake.requests.filter((r) => {
        const p = r.params;
        if (r.resource === 'playlistItems') return p.playlistId === `UU${channel.id.slice(2)}`;
        if (r.resource === 'videos') return (p.id ?? '').split(',').some((id) => videoIds.has(id));
        return p.id === channel.id || (channel.handle && p.forHandle?.replace(/^@/, '').toLowerCase() === channel.handle.toLowerCase()) || (channel.username && p.forUsername?.toLowerCase() === channel.username.toLowerCase()) || (channel.pageUser && p.forUsername?.toLowerCase() === channel.pageUser.toLowerCase());
      });
    },
    /** Deletes the knowledge bases the test created (their sources stop first). */
    async cleanup() {
      for (const k of created.splice(0)) await http('DELETE', `/api/knowledgebases/${k.partner.name}/${k.kb}`, { key: k.partner.key });
    },
  };
}
