import { readBoundedBody } from './web-fetch.js';
/**
 * A client of the YouTube Data API v3 (the video platform's metadata API), for channel sources:
 * `channels.list` (one filter: `forHandle`, `forUsername` or `id`), the uploads playlist through
 * `playlistItems.list` with page tokens, and `videos.list` for up to 50 ids. Each request costs at
 * least one quota unit, failed ones included, so a hook runs before every request is sent (the
 * caller counts it durably). Errors are read from Google's error body and sorted into kinds the
 * caller acts on: retry later (quota, rate limit, outage, timeout), stop (credentials, a channel
 * gone, a bad request), or restart the listing (an invalid page token).
 */
export interface VideoDataApiClientSettings {
  baseUrl: string;
  apiKey: string | null;
  timeoutMs: number;
}

export type DataApiFailure = 'quota' | 'rate_limited' | 'credentials' | 'not_found' | 'gone' | 'bad_page_token' | 'bad_request' | 'unavailable' | 'timeout';

const retryableKinds: ReadonlySet<DataApiFailure> = new Set(['quota', 'rate_limited', 'unavailable', 'timeout']);

export class DataApiError extends Error {
  override name = 'DataApiError';
  readonly retryable: boolean;

  constructor(
    readonly kind: DataApiFailure,
    message: string,
    /** HTTP status; null when no answer arrived. */
    readonly status: number | null = null,
    /** Google's `errors[0].reason` (e.g. quotaExceeded) or `details[].reason` (e.g. API_KEY_INVALID). */
    readonly reason: string | null = null,
  ) {
    super(message);
    this.retryable = retryableKinds.has(kind);
  }
}

export interface ChannelInfo {
  id: string;
  title: string | null;
  customUrl: string | null;
  uploadsPlaylistId: string;
}

export interface PlaylistEntry {
  videoId: string;
  title: string | null;
  /** contentDetails.videoPublishedAt (the video's own publication), else the item's. */
  publishedAt: string | null;
  privacyStatus: string | null;
}

export interface VideoDetails {
  id: string;
  title: string | null;
  publishedAt: string | null;
  /** none | upcoming | live | completed */
  liveBroadcastContent: string | null;
  /** ISO 8601, e.g. PT1H2M3S */
  duration: string | null;
  privacyStatus: string | null;
  /** uploaded (still processing) | processed | failed | rejected | deleted */
  uploadStatus: string | null;
  liveStreamingDetails: { actualStartTime?: string; actualEndTime?: string; scheduledStartTime?: string } | null;
}

export type ChannelFilter = { forHandle: string } | { forUsername: string } | { id: string[] };

/** Items a `videos.list` request may name at most (`maxResults`/`pageToken` are not allowed with `id`). */
export const MAX_VIDEO_IDS = 50;

interface GoogleErrorBody {
  error?: {
    code?: number;
    message?: string;
    status?: string;
    errors?: Array<{ reason?: string; domain?: string; message?: string }>;
    details?: Array<{ reason?: string }>;
  };
}

const quotaReasons = new Set(['quotaExceeded', 'dailyLimitExceeded']);
const rateReasons = new Set(['rateLimitExceeded', 'userRateLimitExceeded']);
const credentialReasons = new Set(['keyInvalid', 'keyExpired', 'accessNotConfigured', 'forbidden', 'ipRefererBlocked', 'API_KEY_INVALID', 'API_KEY_SERVICE_BLOCKED', 'API_KEY_HTTP_REFERRER_BLOCKED', 'API_KEY_IP_ADDRESS_BLOCKED', 'SERVICE_DISABLED', 'CONSUMER_INVALID']);
const goneReasons = new Set(['channelClosed', 'channelSuspended', 'accountClosed', 'accountSuspended']);

/** Google's error body to a failure kind (docs/api/knowledge-bases.md, "Quota and failures"). */
export function classifyDataApiError(status: number, body: GoogleErrorBody | null): DataApiError {
  const err = body?.error;
  const message = err?.message || `the Data API answered HTTP ${status}`;
  const reasons = [...(err?.errors ?? []).map((e) => e.reason), ...(err?.details ?? []).map((d) => d.reason)].filter((r): r is string => !!r);
  const reason = reasons.find((r) => quotaReasons.has(r) || rateReasons.has(r) || credentialReasons.has(r) || goneReasons.has(r)) ?? reasons[0] ?? null;
  const has = (set: Set<string>) => reasons.some((r) => set.has(r));
  if (has(quotaReasons)) return new DataApiError('quota', message, status, reason);
  if (status === 429 || has(rateReasons)) return new DataApiError('rate_limited', message, status, reason);
  if (has(credentialReasons) || status === 401 || /API key/i.test(message)) return new DataApiError('credentials', message, status, reason);
  if (has(goneReasons)) return new DataApiError('gone', message, status, reason);
  if (reasons.includes('invalidPageToken')) return new DataApiError('bad_page_token', message, status, reason);
  if (status === 404) return new DataApiError('not_found', message, status, reason);
  if (status >= 500) return new DataApiError('unavailable', message, status, reason);
  return new DataApiError('bad_request', message, status, reason);
}

export class YouTubeDataApi {
  constructor(
    private readonly settings: VideoDataApiClientSettings,
    private readonly hooks: {
      /** Runs before every request is sent (each costs a quota unit, answered or not). */
      beforeRequest?: () => Promise<void>;
      /** Aborts requests in flight (e.g. the activity was cancelled). */
      signal?: AbortSignal;
    } = {},
  ) {}

  private async get<T>(resource: string, params: Record<string, string>): Promise<T> {
    const query = new URLSearchParams(params);
    if (this.settings.apiKey) query.set('key', this.settings.apiKey);
    await this.hooks.beforeRequest?.();
    const timeout = AbortSignal.timeout(this.settings.timeoutMs);
    const signal = this.hooks.signal ? AbortSignal.any([timeout, this.hooks.signal]) : timeout;
    let res: Response;
    let text: string;
    try {
      res = await fetch(`${this.settings.baseUrl}/${resource}?${query}`, { headers: { accept: 'application/json' }, signal });
      // Bounded: a page of the Data API is a few kilobytes.
      text = (await readBoundedBody(res, 16 * 1024 * 1024, () => new DataApiError('unavailable', 'the Data API answered with more than 16 MiB'))).toString('utf8');
    } catch (err) {
      if (this.hooks.signal?.aborted) throw err;
      if (timeout.aborted) throw new DataApiError('timeout', `the Data API did not answer within ${this.settings.timeoutMs / 1000} s`);
      throw new DataApiError('unavailable', `the Data API could not be reached: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}`);
    }
    let body: unknown = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      // An unreadable body: a proxy's HTML page, a cut-off answer.
    }
    if (!res.ok) throw classifyDataApiError(res.status, body as GoogleErrorBody | null);
    if (!body || typeof body !== 'object') throw new DataApiError('unavailable', `the Data API answered HTTP ${res.status} with an unreadable body`, res.status);
    return body as T;
  }

  /** The channels matching one filter; a channel that does not exist is simply absent. */
  async channels(filter: ChannelFilter): Promise<ChannelInfo[]> {
    const params: Record<string, string> = { part: 'snippet,contentDetails' };
    if ('forHandle' in filter) params.forHandle = filter.forHandle;
    else if ('forUsername' in filter) params.forUsername = filter.forUsername;
    else params.id = filter.id.join(',');
    const body = await this.get<{ items?: Array<{ id?: string; snippet?: { title?: string; customUrl?: string }; contentDetails?: { relatedPlaylists?: { uploads?: string } } }> }>('channels', params);
    return (body.items ?? [])
      .filter((c): c is typeof c & { id: string } => typeof c.id === 'string')
      .map((c) => ({
        id: c.id,
        title: c.snippet?.title ?? null,
        customUrl: c.snippet?.customUrl ?? null,
        // Every channel's uploads playlist is its ID with UU for UC, should the field be missing.
        uploadsPlaylistId: c.contentDetails?.relatedPlaylists?.uploads ?? `UU${c.id.slice(2)}`,
      }));
  }

  /** One page (up to 50 items) of a playlist, newest first for an uploads playlist. */
  async playlistPage(playlistId: string, pageToken: string | null): Promise<{ items: PlaylistEntry[]; nextPageToken: string | null }> {
    const params: Record<string, string> = { part: 'snippet,contentDetails,status', playlistId, maxResults: '50' };
    if (pageToken) params.pageToken = pageToken;
    const body = await this.get<{
      nextPageToken?: string;
      items?: Array<{ snippet?: { title?: string; publishedAt?: string; resourceId?: { videoId?: string } }; contentDetails?: { videoId?: string; videoPublishedAt?: string }; status?: { privacyStatus?: string } }>;
    }>('playlistItems', params);
    const items: PlaylistEntry[] = [];
    for (const item of body.items ?? []) {
      const videoId = item.contentDetails?.videoId ?? item.snippet?.resourceId?.videoId;
      if (!videoId) continue;
      items.push({
        videoId,
        title: item.snippet?.title ?? null,
        publishedAt: item.contentDetails?.videoPublishedAt ?? item.snippet?.publishedAt ?? null,
        privacyStatus: item.status?.privacyStatus ?? null,
      });
    }
    return { items, nextPageToken: body.nextPageToken || null };
  }

  /** Details of up to 50 videos; deleted and private ones are missing from the answer. */
  async videos(ids: string[]): Promise<VideoDetails[]> {
    if (ids.length === 0) return [];
    if (ids.length > MAX_VIDEO_IDS) throw new RangeError(`videos.list takes at most ${MAX_VIDEO_IDS} ids`);
    const body = await this.get<{
      items?: Array<{
        id?: string;
        snippet?: { title?: string; publishedAt?: string; liveBroadcastContent?: string };
        contentDetails?: { duration?: string };
        status?: { privacyStatus?: string; uploadStatus?: string };
        liveStreamingDetails?: { actualStartTime?: string; actualEndTime?: string; scheduledStartTime?: string };
      }>;
    }>('videos', { part: 'snippet,contentDetails,status,liveStreamingDetails', id: ids.join(',') });
    return (body.items ?? [])
      .filter((v): v is typeof v & { id: string } => typeof v.id === 'string')
      .map((v) => ({
        id: v.id,
        title: v.snippet?.title ?? null,
        publishedAt: v.snippet?.publishedAt ?? null,
        liveBroadcastContent: v.snippet?.liveBroadcastContent ?? null,
        duration: v.contentDetails?.duration ?? null,
        privacyStatus: v.status?.privacyStatus ?? null,
        uploadStatus: v.status?.uploadStatus ?? null,
        liveStreamingDetails: v.liveStreamingDetails ?? null,
      }));
  }
}
