import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local stand-in for the video platform, speaking both of its protocols that the service uses:
 * - the YouTube Data API v3 under `/youtube/v3`: `channels` (exactly one of forHandle, forUsername,
 *   id), `playlistItems` (the uploads playlist, newest first, opaque page tokens, a small page size
 *   so that several pages are needed), `videos` (up to 50 ids; live, upcoming and completed
 *   streams, shorts, private videos missing), Google's error bodies (`quotaExceeded`,
 *   `API_KEY_INVALID`, `playlistNotFound`, `invalidPageToken`, `backendError`);
 * - the platform's pages: channel pages with their canonical link (`/@handle`, `/channel/UC…`,
 *   `/user/<name>`, `/c/<name>`), and the timedtext / oEmbed endpoints of each video's captions.
 * Every Data API request is recorded (each costs a quota unit on the real service); faults can be
 * queued (quota, 5xx, a hang past the client's timeout, a dropped connection), and answers delayed.
 */
export type VideoKind = 'regular' | 'short' | 'live' | 'upcoming' | 'completed';

export interface FakeVideo {
  id: string;
  title: string;
  publishedAt: string;
  kind: VideoKind;
  privacy?: 'public' | 'private' | 'unlisted';
  captions: string[];
}

export interface FakeChannel {
  id: string;
  title: string;
  handle?: string;
  /** Legacy user name known to the Data API (forUsername). */
  username?: string;
  /** A /user/ name only the channel page knows. */
  pageUser?: string;
  /** A /c/ custom name (only the channel page knows it). */
  custom?: string;
  videos: FakeVideo[];
  /** Gone: channels.list no longer lists it and its uploads playlist is 404. */
  gone?: boolean;
}

export interface DataApiRequest {
  resource: string;
  params: Record<string, string>;
  at: number;
}

export type Fault = 'quota' | 'backend' | 'hang' | 'drop' | 'not_found';

interface QueuedFault {
  resource: string;
  fault: Fault;
}

let idCounter = 0;
const randomPart = (n: number) => Array.from({ length: n }, () => 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'[Math.floor(Math.random() * 64)]).join('');

/** A fresh channel ID (UC + 22 characters). */
export const channelIdFor = () => `UC${randomPart(22)}`;
/** A fresh 11-character video ID. */
export const videoIdFor = () => `v${(++idCounter).toString(36).padStart(3, '0')}${randomPart(7)}`;

const tokenFor = (offset: number) => Buffer.from(`PT:${offset}`).toString('base64url');
function offsetOf(token: string): number | null {
  const m = /^PT:(\d+)$/.exec(Buffer.from(token, 'base64url').toString('utf8'));
  return m ? Number(m[1]) : null;
}

const googleError = (code: number, message: string, reason: string, domain = 'youtube.api', extra: Record<string, unknown> = {}) => ({
  error: { code, message, errors: [{ message, domain, reason }], ...extra },
});

export class YouTubeFake {
  readonly channels: FakeChannel[] = [];
  readonly requests: DataApiRequest[] = [];
  readonly pageRequests: string[] = [];
  /** The key the Data API accepts; null accepts any. */
  apiKey: string | null = 'test-data-api-key';
  pageSize = 2;
  /** Delay of every Data API answer, in ms. */
  delayMs = 0;
  private faults: QueuedFault[] = [];
  private readonly hanging = new Set<http.ServerResponse>();

  private constructor(private readonly server: http.Server, readonly baseUrl: string) {}

  /** VIDEO_DATA_API_BASE_URL of this fake. */
  get dataApiBaseUrl() {
    return `${this.baseUrl}/youtube/v3`;
  }

  static async start(): Promise<YouTubeFake> {
    const holder: { fake?: YouTubeFake } = {};
    const server = http.createServer((req, res) => void holder.fake!.handle(req, res));
    server.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    holder.fake = new YouTubeFake(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return holder.fake;
  }

  async close(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }

  /** A channel with `count` regular videos (newest first by publication), captioned. */
  addChannel(options: Partial<Omit<FakeChannel, 'videos'>> & { videos?: Array<Partial<FakeVideo>> } = {}): FakeChannel {
    const channel: FakeChannel = { id: options.id ?? channelIdFor(), title: options.title ?? 'River Channel', ...options, videos: [] };
    this.channels.push(channel);
    for (const v of options.videos ?? []) this.addVideo(channel, v);
    return channel;
  }

  /** A new upload; by default published after every other video of the channel. */
  addVideo(channel: FakeChannel, v: Partial<FakeVideo> = {}): FakeVideo {
    const latest = Math.max(Date.parse('2024-01-01T00:00:00Z'), ...channel.videos.map((x) => Date.parse(x.publishedAt)));
    const id = v.id ?? videoIdFor();
    const video: FakeVideo = {
      id,
      title: v.title ?? `Video ${id}`,
      publishedAt: v.publishedAt ?? new Date(latest + 3_600_000).toISOString(),
      kind: v.kind ?? 'regular',
      privacy: v.privacy ?? 'public',
      captions: v.captions ?? [`This is the transcript of ${v.title ?? id}.`, 'Rivers carry sediment to the sea.'],
    };
    channel.videos.push(video);
    return video;
  }

  /** The next matching Data API request(s) answer with a fault instead. */
  fail(resource: 'channels' | 'playlistItems' | 'videos', fault: Fault, times = 1) {
    for (let i = 0; i < times; i++) this.faults.push({ resource, fault });
  }

  requestsTo(resource: string) {
    return this.requests.filter((r) => r.resource === resource);
  }

  private uploadsOf(playlistId: string) {
    return this.channels.find((c) => `UU${c.id.slice(2)}` === playlistId && !c.gone);
  }

  private findVideo(id: string) {
    for (const c of this.channels) {
      const v = c.videos.find((x) => x.id === id);
      if (v) return v;
    }
    return undefined;
  }

  private json(res: http.ServerResponse, status: number, body: unknown) {
    res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
    res.end(JSON.stringify(body));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const url = new URL(req.url ?? '/', this.baseUrl);
    if (url.pathname.startsWith('/youtube/v3/')) return this.dataApi(url, res);
    this.pageRequests.push(url.pathname + url.search);
    return this.platform(url, res);
  }

  private async dataApi(url: URL, res: http.ServerResponse) {
    const resource = url.pathname.slice('/youtube/v3/'.length);
    const params = Object.fromEntries(url.searchParams);
    this.requests.push({ resource, params, at: Date.now() });
    if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
    const faultAt = this.faults.findIndex((f) => f.resource === resource);
    if (faultAt >= 0) {
      const [{ fault }] = this.faults.splice(faultAt, 1) as [QueuedFault];
      switch (fault) {
        case 'quota':
          return this.json(res, 403, googleError(403, 'The request cannot be completed because you have exceeded your <a href="/youtube/v3/getting-started#quota">quota</a>.', 'quotaExceeded', 'youtube.quota'));
        case 'backend':
          return this.json(res, 503, googleError(503, 'The service is currently unavailable.', 'backendError', 'global'));
        case 'not_found':
          return this.json(res, 404, googleError(404, "The playlist identified with the request's <code>playlistId</code> parameter cannot be found.", 'playlistNotFound', 'youtube.playlistItem', {}));
        case 'drop':
          return void res.socket?.destroy();
        case 'hang':
          this.hanging.add(res);
          res.once('close', () => this.hanging.delete(res));
          return;
      }
    }
    if (this.apiKey && params.key !== this.apiKey) {
      return this.json(res, 400, {
        error: {
          code: 400,
          message: 'API key not valid. Please pass a valid API key.',
          errors: [{ message: 'API key not valid. Please pass a valid API key.', domain: 'global', reason: 'badRequest' }],
          status: 'INVALID_ARGUMENT',
          details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com', metadata: { service: 'youtube.googleapis.com' } }],
        },
      });
    }
    switch (resource) {
      case 'channels':
        return this.channelsList(params, res);
      case 'playlistItems':
        return this.playlistItemsList(params, res);
      case 'videos':
        return this.videosList(params, res);
      default:
        return this.json(res, 404, googleError(404, 'Not Found', 'notFound', 'global'));
    }
  }

  private channelResource(c: FakeChannel) {
    return {
      kind: 'youtube#channel',
      etag: 'e',
      id: c.id,
      snippet: { title: c.title, customUrl: c.handle ? `@${c.handle.toLowerCase()}` : undefined },
      contentDetails: { relatedPlaylists: { likes: '', uploads: `UU${c.id.slice(2)}` } },
    };
  }

  private channelsList(params: Record<string, string>, res: http.ServerResponse) {
    const filters = ['forHandle', 'forUsername', 'id', 'mine', 'categoryId', 'managedByMe'].filter((f) => params[f] !== undefined);
    if (filters.length !== 1) {
      return this.json(res, 400, googleError(400, 'No filter selected. Expected one of: forHandle, forUsername, id, idParam, mine, managedByMe, categoryId', 'missingRequiredParameter', 'youtube.parameter'));
    }
    const live = this.channels.filter((c) => !c.gone);
    let found: FakeChannel[];
    if (params.forHandle !== undefined) {
      const h = params.forHandle.replace(/^@/, '').toLowerCase();
      found = live.filter((c) => c.handle?.toLowerCase() === h);
    } else if (params.forUsername !== undefined) {
      found = live.filter((c) => c.username?.toLowerCase() === params.forUsername!.toLowerCase());
    } else {
      const ids = params.id!.split(',');
      found = live.filter((c) => ids.includes(c.id));
    }
    // A channel that does not exist is 200 without items.
    this.json(res, 200, { kind: 'youtube#channelListResponse', etag: 'e', pageInfo: { totalResults: found.length, resultsPerPage: 5 }, ...(found.length ? { items: found.map((c) => this.channelResource(c)) } : {}) });
  }

  private playlistItemsList(params: Record<string, string>, res: http.ServerResponse) {
    const max = Number(params.maxResults ?? '5');
    if (!Number.isInteger(max) || max < 0 || max > 50) {
      return this.json(res, 400, googleError(400, "Invalid value for parameter 'maxResults'", 'invalidParameter', 'youtube.parameter'));
    }
    const channel = this.uploadsOf(params.playlistId ?? '');
    if (!channel) return this.json(res, 404, googleError(404, "The playlist identified with the request's <code>playlistId</code> parameter cannot be found.", 'playlistNotFound', 'youtube.playlistItem'));
    const offset = params.pageToken ? offsetOf(params.pageToken) : 0;
    if (offset === null) return this.json(res, 400, googleError(400, 'The request specifies an invalid page token.', 'invalidPageToken', 'youtube.parameter'));
    const visible = channel.videos.filter((v) => v.privacy !== 'private').sort((a, b) => Date.parse(b.publishedAt) - Date.parse(a.publishedAt));
    const size = Math.min(max, this.pageSize);
    const page = visible.slice(offset, offset + size);
    const next = offset + size < visible.length ? tokenFor(offset + size) : undefined;
    this.json(res, 200, {
      kind: 'youtube#playlistItemListResponse',
      etag: 'e',
      ...(next ? { nextPageToken: next } : {}),
      ...(offset > 0 ? { prevPageToken: tokenFor(Math.max(0, offset - size)) } : {}),
      pageInfo: { totalResults: visible.length, resultsPerPage: size },
      items: page.map((v, i) => ({
        kind: 'youtube#playlistItem',
        etag: 'e',
        id: `PLI${offset + i}`,
        snippet: { publishedAt: v.publishedAt, channelId: channel.id, title: v.title, position: offset + i, resourceId: { kind: 'youtube#video', videoId: v.id } },
        contentDetails: { videoId: v.id, videoPublishedAt: v.publishedAt },
        status: { privacyStatus: v.privacy },
      })),
    });
  }

  private videosList(params: Record<string, string>, res: http.ServerResponse) {
    if (params.maxResults !== undefined || params.pageToken !== undefined) {
      return this.json(res, 400, googleError(400, 'The request specifies an unsupported parameter combination.', 'unsupportedParameter', 'youtube.parameter'));
    }
    const ids = (params.id ?? '').split(',').filter(Boolean);
    if (ids.length > 50) return this.json(res, 400, googleError(400, 'The request specifies too many ids.', 'invalidParameter', 'youtube.parameter'));
    const items = ids
      .map((id) => this.findVideo(id))
      .filter((v): v is FakeVideo => !!v && v.privacy !== 'private')
      .map((v) => {
        const stream = v.kind === 'live' || v.kind === 'upcoming' || v.kind === 'completed';
        return {
          kind: 'youtube#video',
          etag: 'e',
          id: v.id,
          snippet: { publishedAt: v.publishedAt, title: v.title, liveBroadcastContent: v.kind === 'live' || v.kind === 'upcoming' ? v.kind : 'none' },
          contentDetails: { duration: v.kind === 'live' || v.kind === 'upcoming' ? 'P0D' : v.kind === 'short' ? 'PT45S' : v.kind === 'completed' ? 'PT1H2M3S' : 'PT5M10S' },
          status: { uploadStatus: 'processed', privacyStatus: v.privacy, embeddable: true },
          ...(stream
            ? {
                liveStreamingDetails: {
                  scheduledStartTime: v.publishedAt,
                  ...(v.kind !== 'upcoming' ? { actualStartTime: v.publishedAt } : {}),
                  ...(v.kind === 'completed' ? { actualEndTime: new Date(Date.parse(v.publishedAt) + 3_723_000).toISOString() } : {}),
                },
              }
            : {}),
        };
      });
    this.json(res, 200, { kind: 'youtube#videoListResponse', etag: 'e', pageInfo: { totalResults: items.length, resultsPerPage: items.length }, items });
  }

  private platform(url: URL, res: http.ServerResponse) {
    const live = this.channels.filter((c) => !c.gone);
    const segments = url.pathname.split('/').filter(Boolean).map((s) => decodeURIComponent(s));
    const page = (c: FakeChannel | undefined) => {
      if (!c) return void res.writeHead(404, { 'content-type': 'text/html' }).end('<html><body>404 Not Found</body></html>');
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(`<!doctype html><html><head><title>${c.title} - YouTube</title><link rel="canonical" href="https://www.youtube.com/channel/${c.id}"><meta property="og:url" content="https://www.youtube.com/channel/${c.id}"></head><body><h1>${c.title}</h1></body></html>`);
    };
    const [first, second] = segments;
    if (first?.startsWith('@')) return page(live.find((c) => c.handle?.toLowerCase() === first.slice(1).toLowerCase()));
    if (first === 'channel') return page(live.find((c) => c.id === second));
    if (first === 'user') return page(live.find((c) => [c.username, c.pageUser].some((n) => n && n.toLowerCase() === second?.toLowerCase())));
    if (first === 'c') return page(live.find((c) => c.custom?.toLowerCase() === second?.toLowerCase()));
    if (url.pathname === '/api/timedtext') {
      const video = this.findVideo(url.searchParams.get('v') ?? '');
      res.writeHead(200, { 'content-type': 'text/xml' });
      if (url.searchParams.get('type') === 'list') {
        return void res.end(video ? '<transcript_list><track id="0" name="" lang_code="en" lang_original="English" lang_default="true"/></transcript_list>' : '<transcript_list/>');
      }
      const lines = video?.captions ?? [];
      return void res.end(`<?xml version="1.0" encoding="utf-8" ?><transcript>${lines.map((t, i) => `<text start="${i * 3}" dur="2.5">${t}</text>`).join('')}</transcript>`);
    }
    if (url.pathname === '/oembed') {
      const id = new URL(url.searchParams.get('url') ?? 'http://x/').searchParams.get('v') ?? '';
      const video = this.findVideo(id);
      if (!video) return void res.writeHead(404).end();
      return this.json(res, 200, { title: video.title, author_name: 'River Channel', type: 'video' });
    }
    res.writeHead(404).end();
  }
}
