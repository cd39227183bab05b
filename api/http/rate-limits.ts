import crypto from 'node:crypto';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { AbuseLimits, RateLimitedInterface } from '../../lib/platform/config.js';
import type { Principal } from '../../lib/platform/api-keys.js';
import { AppError } from '../../lib/platform/errors.js';
import { RequestRateLimiter } from '../../lib/platform/rate-limit.js';
import type { QuotaKeyPrincipal } from '../../lib/messaging/quota-keys.js';
import { presentedKey } from './api-key.js';
import { errorBody, type ErrorStyle } from './errors.js';
import type { RouteDefinition, RouteEnvironment } from './route.js';

/**
 * Requests per key per minute on every interface (docs/abuse-resistance.md,
 * "Rate limits on every interface, per key"), scheduled in Postgres by `RequestRateLimiter`
 * (lib/platform/rate-limit.ts) so that every API replica shares one schedule per key. Who is
 * counted:
 * - a partner key: its partner (a regenerated key keeps the count);
 * - a messaging quota key (messaging, speech): the quota key;
 * - no key or an unknown key: the client's address, when REQUESTS_PER_MINUTE_ANONYMOUS is set;
 * - the administrator key: never (operators and their tools are trusted).
 * Over the limit: 429 in the interface's error shape with `Retry-After`, the time of a turn booked
 * for that client (its address), which it gets when it comes back then; nothing else is done for
 * the request (no body is read, nothing is stored). A client that asks again before its turn is
 * refused again by this process before any database work, even before its key is looked up
 * (`localBlockGate`), until its turn: a flood costs the service almost nothing.
 */
const settingNames: Record<RateLimitedInterface, string> = {
  'knowledge-base': 'REQUESTS_PER_MINUTE_KNOWLEDGE_BASE',
  messaging: 'REQUESTS_PER_MINUTE_MESSAGING',
  transcription: 'REQUESTS_PER_MINUTE_TRANSCRIPTION',
  speech: 'REQUESTS_PER_MINUTE_SPEECH',
  'dialog-analysis': 'REQUESTS_PER_MINUTE_DIALOG_ANALYSIS',
  voices: 'REQUESTS_PER_MINUTE_VOICES',
};

/** The limit an interface of api/app.ts counts against (the quota-key administration is part of the knowledge-base API's). */
export const limitedInterfaceOf = (apiName: string): RateLimitedInterface =>
  (Object.keys(settingNames) as RateLimitedInterface[]).includes(apiName as RateLimitedInterface) ? (apiName as RateLimitedInterface) : 'knowledge-base';

const hashOf = (key: string) => crypto.createHash('sha256').update(key, 'utf8').digest('hex');

/** The hash of the key a request presents (null: none, or two different ones, which the route refuses). */
function presentedHash(req: Request, queryKey?: string): string | null {
  try {
    const key = presentedKey(req, queryKey);
    return key ? hashOf(key) : null;
  } catch {
    return null;
  }
}

/** The client's address: behind a proxy named by TRUST_PROXY, the one it forwarded. A turn booked by a 429 is this client's. */
export const clientAddress = (req: Request) => req.ip ?? req.socket.remoteAddress ?? 'unknown';

function refusal(iface: RateLimitedInterface, limit: number, retryAfterSeconds: number, anonymous: boolean): AppError {
  const who = anonymous ? 'requests without a valid key from one address' : 'this key';
  const setting = anonymous ? 'REQUESTS_PER_MINUTE_ANONYMOUS' : settingNames[iface];
  return new AppError(
    'rate_limited',
    `Too many requests: ${who} may send ${limit} requests a minute to the ${iface} interface (${setting}). Try again in ${retryAfterSeconds} second${retryAfterSeconds === 1 ? '' : 's'}.`,
    { retryAfterSeconds },
  );
}

const presentedBucket = (iface: RateLimitedInterface, hash: string) => `presented:${iface}:${hash}`;
const anonymousBucket = (req: Request) => `requests:anonymous:${clientAddress(req)}`;

/**
 * A limit per minute, counted over a sliding window of 10 seconds (a sixth of it) when it is 60 or
 * more: a key cannot spend its whole minute in one burst (1,200 requests in a second would hold
 * up everyone's requests in that second). Smaller limits keep the minute.
 */
export const smoothed = (perMinute: number) => (perMinute >= 60 ? { seconds: 10, max: Math.ceil(perMinute / 6) } : { seconds: 60, max: perMinute });

/**
 * Requests of one key handled at once by this process (REQUESTS_IN_FLIGHT_PER_KEY): more wait
 * for a slot, in order (at most 256 waiting; beyond, 429). Within its rate a key may still send in
 * bursts; this keeps a burst from occupying the process and its database connections while other
 * keys wait. Not for the streaming interfaces (messaging, speech), whose answers last minutes.
 */
export class KeySlots {
  private readonly inFlight = new Map<string, number>();
  private readonly waiting = new Map<string, Array<() => void>>();

  constructor(private readonly max: number) {}

  /** Resolves with a release function once the key has a slot; null when too many already wait. */
  async acquire(key: string): Promise<(() => void) | null> {
    const used = this.inFlight.get(key) ?? 0;
    if (used >= this.max) {
      const queue = this.waiting.get(key) ?? [];
      if (queue.length >= MAX_WAITING) return null;
      await new Promise<void>((resolve) => {
        queue.push(resolve);
        this.waiting.set(key, queue);
      });
    } else this.inFlight.set(key, used + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.get(key)?.shift();
      if (next) return next(); // the slot passes to the next request of the same key
      if (this.waiting.get(key)?.length === 0) this.waiting.delete(key);
      const n = (this.inFlight.get(key) ?? 1) - 1;
      if (n <= 0) this.inFlight.delete(key);
      else this.inFlight.set(key, n);
    };
  }
}

const MAX_WAITING = 256;

/**
 * Spreads a key's requests (REQUESTS_BURST_PER_KEY): up to a burst start at once, the next ones at
 * an even pace, in order (the generic cell rate algorithm: one timestamp per key). The shared count
 * already bounds a key to its limit per window; without spreading, a key that sends its whole
 * allowance at once makes every other tenant's requests queue for the CPU behind it for that
 * moment, which is where their slowest answers come from. A key within its burst waits for nothing;
 * one sending faster waits; at most 256 waiting per key, beyond them 429.
 *
 * The pace is slower than the key's schedule (`burst` + paced requests start in any span of one
 * window, two fewer than its allowance `max`), because the schedule sees a request when it arrives,
 * not when it starts (a client that waits for each answer has sent its next request one slot
 * early). So a client that waits for each answer is never refused by the schedule however it
 * follows the pacing.
 * The burst is under half the allowance, so the pace keeps about half the limit at least; a key
 * whose whole window allowance fits in one burst is not spread at all (the count alone bounds it).
 */
export class KeyPacer {
  /** Per key: when its next request may start if it had used all of its burst (ms since the epoch). */
  private readonly next = new Map<string, number>();
  private readonly waiting = new Map<string, number>();

  constructor(private readonly burst: number) {}

  /** The burst and the spacing of paced requests (ms) for a count of `max` per `seconds`; null: not spread. */
  static pacing(burst: number, window: { max: number; seconds: number }): { burst: number; intervalMs: number } | null {
    if (window.max <= burst) return null;
    const b = Math.max(1, Math.min(burst, Math.floor(window.max / 2) - 1));
    const paced = window.max - b - 2;
    return paced < 1 ? null : { burst: b, intervalMs: (window.seconds * 1000) / paced };
  }

  /** Resolves when the key's request may start; false when too many of the key's requests already wait. */
  async pace(key: string, window: { max: number; seconds: number }): Promise<boolean> {
    const pacing = KeyPacer.pacing(this.burst, window);
    if (!pacing) return true;
    const { burst, intervalMs: interval } = pacing;
    const now = Date.now();
    const theoretical = Math.max(now, this.next.get(key) ?? now);
    const startAt = Math.max(now, theoretical - (burst - 1) * interval);
    const delay = startAt - now;
    if (delay > 0 && (this.waiting.get(key) ?? 0) >= MAX_WAITING) return false;
    this.next.set(key, theoretical + interval);
    if (this.next.size > 100_000) this.forgetIdle(now);
    if (delay <= 0) return true;
    this.waiting.set(key, (this.waiting.get(key) ?? 0) + 1);
    await new Promise((resolve) => setTimeout(resolve, delay));
    const left = (this.waiting.get(key) ?? 1) - 1;
    if (left > 0) this.waiting.set(key, left);
    else this.waiting.delete(key);
    return true;
  }

  /** Keys whose burst is whole again need no timestamp. */
  private forgetIdle(now: number): void {
    for (const [key, at] of this.next) if (at <= now) this.next.delete(key);
  }
}
const streamingInterfaces = new Set<RateLimitedInterface>(['messaging', 'speech']);

/** The rate limit of one interface's routes (RouteEnvironment.rateLimit of api/http/route.ts). */
export function interfaceRateLimit(
  limiter: RequestRateLimiter,
  limits: AbuseLimits,
  apiName: string,
  shaping: { slots: KeySlots | null; pacer: KeyPacer | null } = { slots: null, pacer: null },
): NonNullable<RouteEnvironment['rateLimit']> {
  const iface = limitedInterfaceOf(apiName);
  // One set of slots and one pacer for the process: a key's requests to any of these interfaces share them.
  const slots = streamingInterfaces.has(iface) ? null : shaping.slots;
  const pacer = streamingInterfaces.has(iface) ? null : shaping.pacer;
  return async ({ req, res, principal, route }: { req: Request; res: Response; principal: Principal | null; route: RouteDefinition }) => {
    if (principal?.isAdmin) return;
    const quotaKey = res.locals.quotaKey as QuotaKeyPrincipal | undefined;
    const owner = quotaKey ? `quota:${quotaKey.id}` : principal?.partnerId ? `partner:${principal.partnerId}` : null;
    if (owner) {
      const limit = limits.requestsPerMinute[iface];
      if (limit === 0) return;
      const hash = presentedHash(req, route.queryKey);
      const window = smoothed(limit);
      const decision = await limiter.consume(`requests:${iface}:${owner}`, window.max, { windowSeconds: window.seconds, client: clientAddress(req), aliases: hash ? [presentedBucket(iface, hash)] : [] });
      if (!decision.allowed) throw refusal(iface, limit, decision.retryAfterSeconds, false);
      if (pacer && !(await pacer.pace(`${iface}:${owner}`, window))) {
        throw new AppError('rate_limited', `Too many requests at once: this key already has ${MAX_WAITING} requests waiting to be spread within its limit of ${limit} a minute (REQUESTS_BURST_PER_KEY). Try again in 1 second.`, { retryAfterSeconds: 1 });
      }
      if (slots) {
        const release = await slots.acquire(owner);
        if (!release) {
          throw new AppError('rate_limited', `Too many requests at once: this key already has ${MAX_WAITING} requests waiting for one of its ${limits.inFlightPerKey} (REQUESTS_IN_FLIGHT_PER_KEY). Try again in 1 second.`, { retryAfterSeconds: 1 });
        }
        res.once('close', release);
      }
      return;
    }
    const limit = limits.anonymousRequestsPerMinute;
    if (limit === 0) return;
    const window = smoothed(limit);
    const decision = await limiter.consume(anonymousBucket(req), window.max, { windowSeconds: window.seconds, client: clientAddress(req) });
    if (!decision.allowed) throw refusal(iface, limit, decision.retryAfterSeconds, true);
  };
}

/** Which limit a path counts against, cheaply (its prefix), for the gate below. */
export interface PathLimit {
  prefix: RegExp;
  apiName: string;
  style: ErrorStyle;
  /** A query parameter that may carry the key (the voice interface's `api_key`). */
  queryKey?: string;
}

const headerKeyPresent = (req: Request) => req.headers['x-api-key'] !== undefined || req.headers.authorization !== undefined;

/**
 * The very first middleware: a client of a key (or, without a key, an address) that this process
 * already knows to be asking before its turn is answered 429 at once, before anything else is done for the request (no
 * key lookup, no quota-key authentication, no body, no per-request log line or metrics label: a
 * flood must cost as little as possible), after being held for RATE_LIMIT_TARPIT_MS (1 s; never
 * longer than its Retry-After; at most 1024 held at once). While no key is blocked it costs one Map
 * size check.
 * `paths` map a path to its interface by prefix, first match wins; the last should match all.
 */
export function localBlockGate(limiter: RequestRateLimiter, limits: AbuseLimits, paths: PathLimit[]): RequestHandler {
  const table = paths.map((p) => ({ ...p, iface: limitedInterfaceOf(p.apiName) }));
  return (req: Request, res: Response, next: NextFunction) => {
    if (!limiter.anyBlocked()) return next();
    const path = req.originalUrl.split('?', 1)[0]!;
    const entry = table.find((t) => t.prefix.test(path));
    if (!entry) return next();
    let bucket: string | null = null;
    let limit = limits.requestsPerMinute[entry.iface];
    let anonymous = false;
    if (headerKeyPresent(req) || (entry.queryKey && req.originalUrl.includes(`${entry.queryKey}=`))) {
      const hash = presentedHash(req, entry.queryKey);
      if (hash) bucket = presentedBucket(entry.iface, hash);
    } else if (limits.anonymousRequestsPerMinute > 0) {
      bucket = anonymousBucket(req);
      limit = limits.anonymousRequestsPerMinute;
      anonymous = true;
    }
    const left = bucket ? limiter.blockedFor(RequestRateLimiter.blockKey(bucket, clientAddress(req))) : 0;
    if (left === 0) return next();
    const requestId = crypto.randomUUID();
    const err = refusal(entry.iface, limit, left, anonymous);
    const endpoint = path;
    const text = JSON.stringify(errorBody(entry.style, err, requestId, endpoint));
    const answer = () => {
      if (res.destroyed || res.headersSent) return;
      res.writeHead(429, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), 'retry-after': String(left), 'x-request-id': requestId });
      res.end(text);
    };
    // The tarpit: a client that keeps sending through its block waits for each answer, so a loop
    // that sends as fast as it is answered slows to a crawl, and its requests cost nothing while held.
    const delay = Math.min(limits.tarpitMs, left * 1000);
    if (delay <= 0 || held >= MAX_HELD) return answer();
    held++;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      held--;
    };
    const timer = setTimeout(() => {
      release();
      answer();
    }, delay);
    res.once('close', () => {
      clearTimeout(timer);
      release();
    });
  };
}

/** Answers held by the tarpit at once, per process; beyond, blocked requests are answered at once. */
const MAX_HELD = 1024;
let held = 0;

