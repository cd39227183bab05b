/**
 * Channel aliases a `video_channel` folder accepts (spec 4.2): `@handle`, and youtube.com URLs of
 * the forms `/@handle`, `/channel/UC…`, `/user/<name>`, `/c/<name>` (with or without the scheme,
 * `www.` or `m.`, and with any further path such as `/videos`). The key identifies the alias
 * within a KB: handles, legacy user names and custom names are case-insensitive on the platform,
 * channel IDs are not.
 */
export type AliasKind = 'handle' | 'channel' | 'user' | 'custom';

export interface ChannelAlias {
  kind: AliasKind;
  /** The handle without `@`, the channel ID, or the name, percent-decoded. */
  value: string;
  key: string;
}

const HANDLE = /^[\p{L}\p{M}\p{N}._·-]{3,30}$/u;
const CHANNEL_ID = /^UC[\w-]{22}$/;
const USER = /^[\w.-]{1,100}$/;
const CUSTOM = /^[\p{L}\p{M}\p{N}._-]{1,100}$/u;
const HOSTS = new Set(['youtube.com', 'www.youtube.com', 'm.youtube.com']);

export const channelAliasHelp = 'channel_url must be an @handle or a youtube.com /@handle, /channel/UC…, /user/… or /c/… URL';

function decode(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

function fromSegments(first: string, second: string | undefined): ChannelAlias | null {
  if (first.startsWith('@')) {
    const handle = first.slice(1);
    return HANDLE.test(handle) ? { kind: 'handle', value: handle, key: `handle:${handle.toLowerCase()}` } : null;
  }
  if (second === undefined) return null;
  if (first === 'channel') return CHANNEL_ID.test(second) ? { kind: 'channel', value: second, key: `channel:${second}` } : null;
  if (first === 'user') return USER.test(second) ? { kind: 'user', value: second, key: `user:${second.toLowerCase()}` } : null;
  if (first === 'c') return CUSTOM.test(second) ? { kind: 'custom', value: second, key: `custom:${second.toLowerCase()}` } : null;
  return null;
}

/** The alias of a submitted channel_url, or null when it is none of the accepted forms. */
export function parseChannelAlias(raw: string): ChannelAlias | null {
  const input = raw.trim();
  if (input.length === 0 || input.length > 2048) return null;
  if (input.startsWith('@')) {
    const handle = decode(input);
    return handle && !handle.includes('/') ? fromSegments(handle, undefined) : null;
  }
  let path: string;
  if (input.startsWith('/')) {
    path = input;
  } else {
    let url: URL;
    try {
      url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(input) ? input : `https://${input}`);
    } catch {
      return null;
    }
    if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.username || url.password || url.port) return null;
    if (!HOSTS.has(url.hostname.toLowerCase())) return null;
    path = url.pathname;
  }
  const segments = path.split(/[?#]/)[0]!.split('/').filter(Boolean).map(decode);
  if (segments.length === 0 || segments.some((s) => s === null)) return null;
  return fromSegments(segments[0]!, segments[1] ?? undefined);
}

/** The channel page of an alias on the video platform (for names the Data API cannot look up). */
export function channelPagePath(alias: ChannelAlias): string {
  const name = encodeURIComponent(alias.value);
  switch (alias.kind) {
    case 'handle':
      return `/@${name}`;
    case 'channel':
      return `/channel/${name}`;
    case 'user':
      return `/user/${name}`;
    case 'custom':
      return `/c/${name}`;
  }
}
