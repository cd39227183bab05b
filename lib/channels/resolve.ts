import { parseHTML } from 'linkedom';
import { DataApiError, type ChannelInfo, type YouTubeDataApi } from '../providers/video-data-api.js';
import { fetchPage, FetchRefused } from '../providers/web-fetch.js';
import { channelPagePath, type ChannelAlias } from './aliases.js';
import type { ChannelDeps } from './state.js';

/**
 * Alias → channel. Handles, channel IDs and legacy user names are looked up with `channels.list`
 * (`forHandle`, `id`, `forUsername`). The Data API has no parameter for `/c/` custom names (and a
 * `/user/` name it does not know may still have a page): those are read from the channel page's
 * canonical link on the video platform (VIDEO_PLATFORM_BASE_URL, fetched through the safe URL
 * fetcher), and the ID found there is looked up with `channels.list?id=`.
 */
export async function findChannel(deps: ChannelDeps, api: YouTubeDataApi, alias: ChannelAlias): Promise<ChannelInfo | null> {
  switch (alias.kind) {
    case 'handle':
      return (await api.channels({ forHandle: `@${alias.value}` }))[0] ?? null;
    case 'channel':
      return (await api.channels({ id: [alias.value] }))[0] ?? null;
    case 'user': {
      const found = (await api.channels({ forUsername: alias.value }))[0];
      if (found) return found;
      return byPage(deps, api, alias);
    }
    case 'custom':
      return byPage(deps, api, alias);
  }
}

async function byPage(deps: ChannelDeps, api: YouTubeDataApi, alias: ChannelAlias): Promise<ChannelInfo | null> {
  const id = await channelIdFromPage(deps, channelPagePath(alias));
  return id ? ((await api.channels({ id: [id] }))[0] ?? null) : null;
}

const CHANNEL_PATH = /\/channel\/(UC[\w-]{22})(?![\w-])/;
const CHANNEL_ID = /^UC[\w-]{22}$/;

/** The channel ID a channel page names: its canonical link, else `itemprop=identifier`, else `og:url`. */
export function channelIdInPage(html: string): string | null {
  const { document } = parseHTML(html);
  const canonical = document.querySelector('link[rel="canonical"]')?.getAttribute('href') ?? '';
  const fromCanonical = CHANNEL_PATH.exec(canonical)?.[1];
  if (fromCanonical) return fromCanonical;
  const identifier = document.querySelector('meta[itemprop="identifier"]')?.getAttribute('content') ?? document.querySelector('meta[itemprop="channelId"]')?.getAttribute('content') ?? '';
  if (CHANNEL_ID.test(identifier)) return identifier;
  const ogUrl = document.querySelector('meta[property="og:url"]')?.getAttribute('content') ?? '';
  return CHANNEL_PATH.exec(ogUrl)?.[1] ?? null;
}

/** null: the platform has no such page (404 / 410). Outages are retryable DataApiErrors. */
async function channelIdFromPage(deps: ChannelDeps, path: string): Promise<string | null> {
  const url = `${deps.config.videoPlatformBaseUrl}${path}`;
  let page;
  try {
    page = await fetchPage(url, {
      allowPrivate: deps.config.urlFetchAllowPrivate,
      allowLoopback: deps.config.urlFetchAllowLoopback,
      timeoutMs: deps.config.videoDataApi.timeoutMs,
      // Accepts the platform's cookie consent, which otherwise answers with an interstitial page.
      headers: { cookie: 'SOCS=CAI', 'accept-language': 'en' },
    });
  } catch (err) {
    if (!(err instanceof FetchRefused)) throw err;
    const status = err.details.status ?? 0;
    if (err.reason === 'http_status' && (status === 404 || status === 410)) return null;
    if (err.reason === 'timeout') throw new DataApiError('timeout', err.message);
    if (err.reason === 'network' || err.reason === 'dns' || status >= 500 || status === 429) throw new DataApiError('unavailable', err.message, status || null);
    throw new DataApiError('bad_request', err.message, status || null);
  }
  const id = channelIdInPage(page.body.toString('utf8'));
  if (!id) throw new DataApiError('bad_request', `the channel page ${url} names no channel ID`);
  return id;
}
