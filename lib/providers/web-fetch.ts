/**
 * Safe fetching of URL documents (issue "URL documents").
 *
 * - Only http and https. Every host (the first URL and every redirect target) is resolved once with
 *   `dns.lookup(host, { all: true })`; if ANY address is private, loopback, link-local, unspecified,
 *   multicast or otherwise reserved (IPv4-mapped / NAT64 / 6to4 forms included) the fetch is refused
 *   before a connection is opened, unless the matching allow flag is set.
 * - The connection goes to the vetted addresses only: the request's `lookup` hands back what was
 *   checked, so a second DNS answer (DNS rebinding) cannot change where we connect. The Host header
 *   and TLS SNI stay the original host name.
 * - Redirects are followed by hand (default 5), each target re-checked; other schemes are refused.
 * - The body is bounded (default 10 MiB, after decompression) and the whole fetch, DNS and
 *   redirects included, is bounded in time (default 20 s) and aborted when over.
 * - Every failure is a `FetchRefused` with a reason and a message naming the URL; callers turn it
 *   into the document's processing_error.
 */
import dns from 'node:dns';
import fsp from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { pipeline, type Readable } from 'node:stream';
import zlib from 'node:zlib';
import { isUnavailableStatus } from './service-unavailable.js';

export type FetchRefusedReason =
  | 'private_address'
  | 'scheme'
  | 'too_large'
  | 'timeout'
  | 'http_status'
  | 'too_many_redirects'
  /** The name server could not answer now (EAI_AGAIN and the like): worth another try. */
  | 'dns'
  /** The name does not exist or has no address (ENOTFOUND, ENODATA): a definite answer. */
  | 'unknown_host'
  /** The URL (or a redirect's Location) does not parse. */
  | 'invalid_url'
  /** Connection refused/reset, TLS failure, malformed response, bad content encoding. */
  | 'network';

export class FetchRefused extends Error {
  override name = 'FetchRefused';

  constructor(
    readonly reason: FetchRefusedReason,
    /** The URL the caller asked for. */
    readonly url: string,
    message: string,
    readonly details: { status?: number; address?: string; hopUrl?: string } = {},
  ) {
    super(message);
  }
}

/**
 * Whether a refusal may pass if the same fetch is tried later: timeouts, network errors, a name
 * server that could not answer, and 5xx, 429 and 408 answers. Every other refusal (an address,
 * scheme or size refused, a name that does not exist, a 4xx) is the input's and final.
 */
export function isTransientFetchFailure(err: FetchRefused): boolean {
  if (err.reason === 'timeout' || err.reason === 'network' || err.reason === 'dns') return true;
  return err.reason === 'http_status' && isUnavailableStatus(err.details.status ?? 0);
}

export interface FetchPageOptions {
  /** Allow private (RFC 1918, CGNAT, ULA) and reserved addresses. */
  allowPrivate?: boolean;
  /** Allow loopback addresses (127/8, ::1). */
  allowLoopback?: boolean;
  /** Largest body accepted, after decompression. Default 10 MiB. */
  maxBytes?: number;
  /** Bound on the whole fetch, redirects included. Default 20 s. */
  timeoutMs?: number;
  /** Redirects followed at most. Default 5. */
  maxRedirects?: number;
  userAgent?: string;
  /** Further request headers (e.g. a consent cookie for a platform's own pages). */
  headers?: Record<string, string>;
  /** The Accept header (default: HTML and text first). */
  accept?: string;
  /** Send this body with POST instead of a GET (a webhook delivery); pair it with `maxRedirects: 0`. */
  post?: { body: Buffer; contentType: string };
}

export interface FetchedPage {
  finalUrl: string;
  status: number;
  /** The response's Content-Type header as sent ('' when absent). */
  contentType: string;
  body: Buffer;
}

const fetchDefaults = {
  maxBytes: 10 * 1024 * 1024,
  timeoutMs: 20_000,
  maxRedirects: 5,
  userAgent: 'Mozilla/5.0 (compatible; durable-knowledge-backend/0.1; URL document fetcher)',
} as const;

// ---- address classification -----------------------------------------------------------------

export type AddressClass = 'public' | 'private' | 'reserved' | 'loopback' | 'link_local' | 'unspecified' | 'multicast';

function parseIPv4(s: string): number | null {
  const parts = s.split('.');
  if (parts.length !== 4) return null;
  let n = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p)) return null;
    const v = Number(p);
    if (v > 255) return null;
    n = n * 256 + v;
  }
  return n;
}

/** Eight 16-bit groups, or null. Accepts '::' compression, a dotted IPv4 tail and a zone id. */
function parseIPv6(input: string): number[] | null {
  let s = input;
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  const lastColon = s.lastIndexOf(':');
  if (lastColon >= 0 && s.slice(lastColon + 1).includes('.')) {
    // A dotted IPv4 tail (::ffff:1.2.3.4) becomes two hex groups.
    const v4 = parseIPv4(s.slice(lastColon + 1));
    if (v4 === null) return null;
    s = `${s.slice(0, lastColon + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const halves = s.split('::');
  if (halves.length > 2) return null;
  const parse = (h: string) => (h === '' ? [] : h.split(':').map((g) => (/^[0-9a-f]{1,4}$/i.test(g) ? parseInt(g, 16) : NaN)));
  const head = parse(halves[0] ?? '');
  const rest = halves.length === 2 ? parse(halves[1] ?? '') : [];
  if ([...head, ...rest].some((g) => Number.isNaN(g))) return null;
  const explicit = head.length + rest.length;
  if (halves.length === 1) {
    if (explicit !== 8) return null;
    return head;
  }
  if (explicit > 7) return null;
  return [...head, ...new Array<number>(8 - explicit).fill(0), ...rest];
}

const inV4 = (ip: number, base: string, bits: number) => {
  const b = parseIPv4(base)!;
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  return ((ip & mask) >>> 0) === ((b & mask) >>> 0);
};

function classifyIPv4(ip: number): AddressClass {
  if (inV4(ip, '0.0.0.0', 8)) return 'unspecified';
  if (inV4(ip, '127.0.0.0', 8)) return 'loopback';
  if (inV4(ip, '169.254.0.0', 16)) return 'link_local';
  if (inV4(ip, '10.0.0.0', 8) || inV4(ip, '172.16.0.0', 12) || inV4(ip, '192.168.0.0', 16) || inV4(ip, '100.64.0.0', 10)) {
    return 'private';
  }
  if (inV4(ip, '224.0.0.0', 4)) return 'multicast';
  if (
    inV4(ip, '240.0.0.0', 4) || // reserved, 255.255.255.255 broadcast
    inV4(ip, '192.0.0.0', 24) || // IETF protocol assignments
    inV4(ip, '192.0.2.0', 24) ||
    inV4(ip, '198.51.100.0', 24) ||
    inV4(ip, '203.0.113.0', 24) || // documentation
    inV4(ip, '198.18.0.0', 15) || // benchmarking
    inV4(ip, '192.88.99.0', 24) // 6to4 relay anycast
  ) {
    return 'reserved';
  }
  return 'public';
}

function classifyIPv6(g: number[]): AddressClass {
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = g;
  const v4 = (hi: number, lo: number) => ((hi << 16) >>> 0) + lo;
  const zeroPrefix = g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0;
  if (zeroPrefix && g5 === 0 && g6 === 0 && g7 === 0) return 'unspecified';
  if (zeroPrefix && g5 === 0 && g6 === 0 && g7 === 1) return 'loopback';
  // IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d, IPv4-translated ::ffff:0:a.b.c.d
  if (zeroPrefix && (g5 === 0xffff || g5 === 0)) return classifyIPv4(v4(g6, g7));
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0xffff && g5 === 0) return classifyIPv4(v4(g6, g7));
  // NAT64 64:ff9b::/96 and 64:ff9b:1::/48 embed an IPv4 address in the last 32 bits.
  if (g0 === 0x64 && g1 === 0xff9b && (g2 === 0 || g2 === 1)) {
    const c = classifyIPv4(v4(g6, g7));
    return c === 'public' && g2 === 1 ? 'reserved' : c;
  }
  // 6to4 2002::/16 embeds an IPv4 address in groups 1-2.
  if (g0 === 0x2002) return classifyIPv4(v4(g1, g2));
  if ((g0 & 0xff00) === 0xff00) return 'multicast';
  if ((g0 & 0xffc0) === 0xfe80) return 'link_local';
  if ((g0 & 0xfe00) === 0xfc00 || (g0 & 0xffc0) === 0xfec0) return 'private'; // ULA, deprecated site-local
  if (g0 === 0x2001 && g1 === 0x0db8) return 'reserved'; // documentation
  if (g0 === 0x0100 && g1 === 0 && g2 === 0 && g3 === 0) return 'reserved'; // discard-only
  if (g0 === 0x2001 && g1 < 0x200) return 'reserved'; // IETF protocol assignments (Teredo, ORCHID, ...)
  return 'public';
}

/** The class of an IP address; null when `address` is not an IP address. */
export function classifyAddress(address: string): AddressClass | null {
  const family = net.isIP(address.includes('%') ? address.slice(0, address.indexOf('%')) : address);
  if (family === 4) return classifyIPv4(parseIPv4(address)!);
  if (family === 6) {
    const groups = parseIPv6(address);
    return groups ? classifyIPv6(groups) : null;
  }
  return null;
}

function isAllowed(cls: AddressClass, options: FetchPageOptions): boolean {
  switch (cls) {
    case 'public':
      return true;
    case 'private':
    case 'reserved':
      return options.allowPrivate === true;
    case 'loopback':
      return options.allowLoopback === true;
    default:
      return false; // link-local (cloud metadata), unspecified, multicast: never
  }
}

// ---- fetching ---------------------------------------------------------------------------------

interface Vetted { address: string; family: 4 | 6 }

const redirectStatuses = new Set([301, 302, 303, 307, 308]);

function parseUrl(raw: string, original: string, base?: URL): URL {
  try {
    return base ? new URL(raw, base) : new URL(raw);
  } catch {
    throw new FetchRefused('invalid_url', original, `Refused to fetch ${original}: ${JSON.stringify(raw)} is not a valid URL`, { hopUrl: raw });
  }
}

function checkScheme(url: URL, original: string) {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new FetchRefused(
      'scheme',
      original,
      `Refused to fetch ${original}: only http and https URLs are fetched, not ${url.protocol.replace(/:$/, '')} (${url.href})`,
      { hopUrl: url.href },
    );
  }
}

/** Resolves the host and checks every address; throws before any connection when one is refused. */
async function vetHost(url: URL, original: string, options: FetchPageOptions): Promise<Vetted[]> {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  let addresses: Vetted[];
  if (net.isIP(host)) {
    addresses = [{ address: host, family: net.isIP(host) as 4 | 6 }];
  } else {
    try {
      const found = await dns.promises.lookup(host, { all: true, verbatim: true });
      addresses = found.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      const unknown = code === 'ENOTFOUND' || code === 'ENODATA';
      throw new FetchRefused(unknown ? 'unknown_host' : 'dns', original, `Refused to fetch ${original}: host ${host} does not resolve (${code})`, { hopUrl: url.href });
    }
    if (addresses.length === 0) {
      throw new FetchRefused('unknown_host', original, `Refused to fetch ${original}: host ${host} has no address`, { hopUrl: url.href });
    }
  }
  for (const a of addresses) {
    const cls = classifyAddress(a.address);
    if (cls === null || !isAllowed(cls, options)) {
      const what = cls === null ? 'an unrecognised' : `a ${cls.replace('_', '-')}`;
      // Compared as parsed: the parser's own spelling of the first URL (http://0x7f000001/ is
      // http://127.0.0.1/) is not a redirect.
      const via = URL.canParse(original) && url.href === new URL(original).href ? '' : ` (redirected to ${url.href})`;
      throw new FetchRefused(
        'private_address',
        original,
        `Refused to fetch ${original}${via}: host ${host} resolves to ${what} address ${a.address}`,
        { address: a.address, hopUrl: url.href },
      );
    }
  }
  return addresses;
}

/** One request to the vetted addresses; resolves with the response head. */
function requestOnce(url: URL, vetted: Vetted[], options: Pick<FetchPageOptions, 'accept' | 'headers' | 'post'> & { userAgent: string }, signal: AbortSignal) {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const isHttps = url.protocol === 'https:';
  const lookup = (
    _hostname: string,
    opts: { all?: boolean },
    callback: (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void,
  ) => {
    if (opts.all) callback(null, vetted.map((v) => ({ address: v.address, family: v.family })));
    else callback(null, vetted[0]!.address, vetted[0]!.family);
  };
  const requestOptions: https.RequestOptions = {
    protocol: url.protocol,
    host,
    port: url.port ? Number(url.port) : isHttps ? 443 : 80,
    path: `${url.pathname}${url.search}`,
    method: options.post ? 'POST' : 'GET',
    headers: {
      ...options.headers,
      host: url.host,
      'user-agent': options.userAgent,
      accept: options.accept ?? 'text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5',
      'accept-encoding': 'gzip, deflate, br',
      ...(options.post ? { 'content-type': options.post.contentType, 'content-length': String(options.post.body.length) } : {}),
    },
    agent: false,
    signal,
    // net.connect skips the lookup for IP literals, which are the vetted address already.
    lookup: lookup as unknown as net.LookupFunction,
  };
  if (isHttps && !net.isIP(host)) requestOptions.servername = host;
  return new Promise<http.IncomingMessage>((resolve, reject) => {
    const req = (isHttps ? https : http).request(requestOptions, resolve);
    req.on('error', reject);
    req.end(options.post?.body);
  });
}

/** Where a body goes: collected in memory, or written to a file as it arrives. */
interface BodySink<T> {
  write(chunk: Buffer): void | Promise<void>;
  finish(total: number): T | Promise<T>;
}

function memorySink(): BodySink<Buffer> {
  const chunks: Buffer[] = [];
  return { write: (c) => void chunks.push(c), finish: (total) => Buffer.concat(chunks, total) };
}

async function readBody<T>(res: http.IncomingMessage, original: string, maxBytes: number, sink: BodySink<T>): Promise<T> {
  const tooLarge = () =>
    new FetchRefused('too_large', original, `Refused to fetch ${original}: the response is larger than ${maxBytes} bytes`);
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    res.destroy();
    throw tooLarge();
  }
  const encoding = String(res.headers['content-encoding'] ?? '').trim().toLowerCase();
  const decoder =
    encoding === 'gzip' || encoding === 'x-gzip' ? zlib.createGunzip()
    : encoding === 'deflate' ? zlib.createInflate()
    : encoding === 'br' ? zlib.createBrotliDecompress()
    : null;
  const source: Readable = decoder ? pipeline(res, decoder, () => {}) : res;
  let total = 0;
  for await (const chunk of source) {
    const buf = chunk as Buffer;
    total += buf.length;
    if (total > maxBytes) {
      res.destroy();
      decoder?.destroy();
      throw tooLarge();
    }
    await sink.write(buf);
  }
  return sink.finish(total);
}

interface Fetched<T> {
  finalUrl: string;
  status: number;
  contentType: string;
  body: T;
}

async function run<T>(original: string, options: FetchPageOptions, signal: AbortSignal, sink: () => BodySink<T>): Promise<Fetched<T>> {
  const maxRedirects = options.maxRedirects ?? fetchDefaults.maxRedirects;
  const maxBytes = options.maxBytes ?? fetchDefaults.maxBytes;
  const userAgent = options.userAgent ?? fetchDefaults.userAgent;
  let url = parseUrl(original, original);
  for (let redirects = 0; ; redirects++) {
    checkScheme(url, original);
    const vetted = await vetHost(url, original, options);
    if (signal.aborted) throw signal.reason;
    let res: http.IncomingMessage;
    try {
      res = await requestOnce(url, vetted, { userAgent, accept: options.accept, headers: options.headers, post: options.post }, signal);
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      throw networkError(original, url, err);
    }
    const status = res.statusCode ?? 0;
    const location = res.headers.location;
    if (redirectStatuses.has(status) && location) {
      res.destroy();
      if (redirects >= maxRedirects) {
        throw new FetchRefused(
          'too_many_redirects',
          original,
          `Refused to fetch ${original}: more than ${maxRedirects} redirects`,
          { status, hopUrl: url.href },
        );
      }
      url = parseUrl(location, original, url);
      continue;
    }
    if (status < 200 || status > 299) {
      res.destroy();
      throw new FetchRefused('http_status', original, `Fetching ${original} failed: HTTP ${status} from ${url.href}`, {
        status,
        hopUrl: url.href,
      });
    }
    let body: T;
    try {
      body = await readBody(res, original, maxBytes, sink());
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      if (err instanceof FetchRefused) throw err;
      throw networkError(original, url, err);
    }
    return { finalUrl: url.href, status, contentType: String(res.headers['content-type'] ?? ''), body };
  }
}

function networkError(original: string, url: URL, err: unknown) {
  const e = err as NodeJS.ErrnoException;
  const detail = e?.code ? `${e.code}${e.message ? `: ${e.message}` : ''}` : String(e?.message ?? err);
  return new FetchRefused('network', original, `Fetching ${original} failed: ${detail}`, { hopUrl: url.href });
}

/** Fetches `url` safely (see the module comment); rejects with `FetchRefused`. */
export function fetchPage(url: string, options: FetchPageOptions = {}): Promise<FetchedPage> {
  return bounded(url, options, memorySink);
}

/**
 * The same safe fetch, with the body streamed into `destination` instead of memory (audio,
 * media): the size bound applies as it is written. Answers the page's metadata and the byte count.
 */
export async function fetchToFile(url: string, destination: string, options: FetchPageOptions = {}): Promise<Omit<FetchedPage, 'body'> & { bytes: number }> {
  const file = await fsp.open(destination, 'w');
  try {
    const fetched = await bounded(url, options, () => ({ write: async (c: Buffer) => void (await file.write(c)), finish: (total: number) => total }));
    return { finalUrl: fetched.finalUrl, status: fetched.status, contentType: fetched.contentType, bytes: fetched.body };
  } finally {
    await file.close();
  }
}

async function bounded<T>(url: string, options: FetchPageOptions, sink: () => BodySink<T>): Promise<Fetched<T>> {
  const timeoutMs = options.timeoutMs ?? fetchDefaults.timeoutMs;
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = new FetchRefused('timeout', url, `Fetching ${url} took longer than ${timeoutMs} ms`);
      controller.abort(err);
      reject(err);
    }, timeoutMs);
  });
  try {
    return await Promise.race([run(url, options, controller.signal, sink), timeout]);
  } finally {
    clearTimeout(timer);
    if (!controller.signal.aborted) controller.abort(new Error('fetch finished'));
  }
}

/**
 * The address checks of fetchPage for a URL that another service will fetch on a user's behalf
 * (the scraping provider): http(s) only, and every address of its host allowed by `options`
 * (private, loopback, link-local, ... refused as for a direct fetch). Rejects with FetchRefused.
 * The provider follows redirects itself: what it reaches beyond the first host is its network's
 * business, but it is never handed an address of ours to start from.
 */
export async function vetUrl(url: string, options: Pick<FetchPageOptions, 'allowPrivate' | 'allowLoopback'> = {}): Promise<void> {
  const parsed = parseUrl(url, url);
  checkScheme(parsed, url);
  await vetHost(parsed, url, options);
}

/** A response body read up to `maxBytes` (the Content-Length first, then the bytes as they come); over it, `onTooLarge()` is thrown. */
export async function readBoundedBody(res: Response, maxBytes: number, onTooLarge: () => Error): Promise<Buffer> {
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > maxBytes) {
    await res.body?.cancel().catch(() => undefined);
    throw onTooLarge();
  }
  const parts: Buffer[] = [];
  let size = 0;
  if (res.body) {
    for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
      size += chunk.length;
      if (size > maxBytes) {
        await res.body.cancel().catch(() => undefined);
        throw onTooLarge();
      }
      parts.push(Buffer.from(chunk));
    }
  }
  return Buffer.concat(parts, size);
}
