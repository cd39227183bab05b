import type { Db } from './db.js';

/**
 * Request rate limits that hold across API replicas: each request adds one to its key's counter of
 * the current window in Postgres (one statement), and the rate is the sliding-window estimate
 *
 *   previous window's count × (the part of the previous window still inside the last `windowSeconds`)
 *   + the current window's count,
 *
 * which smooths the burst a fixed window allows at its boundary. A refused request is counted too:
 * a client that keeps hammering stays refused, one that waits for `Retry-After` gets through. The
 * database's clock is the only clock, so replicas agree. Windows older than the previous one are
 * deleted in the same statement.
 */
export interface RateLimit {
  /** Who is limited on what, e.g. `transcript-create:<partner id>`. */
  key: string;
  /** Requests allowed per window. */
  limit: number;
  windowSeconds: number;
}

export type RateDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

export async function consumeRateLimit(db: Db, { key, limit, windowSeconds }: RateLimit): Promise<RateDecision> {
  const [row] = await db.$queryRaw<Array<{ current: number; previous: number; elapsed: number }>>`
    WITH clock AS (
      SELECT to_timestamp(floor(extract(epoch FROM now()) / ${windowSeconds}::int) * ${windowSeconds}::int) AS start,
             extract(epoch FROM now()) AS at
    ), gone AS (
      DELETE FROM rate_limit_windows w USING clock
      WHERE w.key = ${key} AND w.window_start < clock.start - make_interval(secs => ${windowSeconds}::int)
    ), cur AS (
      INSERT INTO rate_limit_windows AS w (key, window_start, count)
      SELECT ${key}, clock.start, 1 FROM clock
      ON CONFLICT (key, window_start) DO UPDATE SET count = w.count + 1
      RETURNING w.count
    )
    SELECT (SELECT count FROM cur)::int AS current,
           COALESCE((SELECT w.count FROM rate_limit_windows w, clock
                     WHERE w.key = ${key} AND w.window_start = clock.start - make_interval(secs => ${windowSeconds}::int)), 0)::int AS previous,
           (SELECT (at - extract(epoch FROM start)) / ${windowSeconds}::int FROM clock)::float8 AS elapsed`;
  const { current, previous, elapsed } = row!;
  if (previous * (1 - elapsed) + current <= limit) return { allowed: true };
  return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(secondsUntilNextAllowed(limit, windowSeconds, previous, current, elapsed))) };
}

/**
 * When one more request would fit: later in this window, as the previous window's share fades, or
 * else some way into the next window, whose previous window is this one.
 */
function secondsUntilNextAllowed(limit: number, windowSeconds: number, previous: number, current: number, elapsed: number): number {
  const remaining = (1 - elapsed) * windowSeconds;
  if (current + 1 <= limit && previous > 0) {
    const fade = (windowSeconds * (previous * (1 - elapsed) + current + 1 - limit)) / previous;
    if (fade <= remaining) return fade;
  }
  return remaining + windowSeconds * Math.max(0, 1 - (limit - 1) / current);
}

/**
 * A limiter for every request of an interface, per key, shared by all API replicas through
 * `consumeRateLimit` (Postgres is the one counter), with one process-local addition: a key that
 * Postgres has just refused is refused again by this process, without a round trip, until its
 * `Retry-After` has passed (what rate-limiter-flexible calls blocking in memory on consumption).
 * A flood from one key therefore costs one statement per replica per retry period instead of one
 * per request, and cannot take the database (or its connection pool) from other tenants. Requests
 * refused locally are not counted: a client hammering through its block gets in again exactly
 * when Postgres' window admits one more request, and never more than `limit` a window.
 * If Postgres cannot be asked, the request is let through (fail open): it will meet the database
 * soon anyway, and a limiter must not turn an outage of its counter into an outage of the service.
 */
export class RequestRateLimiter {
  private readonly blocked = new Map<string, number>();

  constructor(
    private readonly db: Db,
    private readonly options: { maxBlockedKeys?: number; onError?: (err: unknown) => void } = {},
  ) {}

  /** Whether this process refuses any key locally right now (a Map size check: free while nobody floods). */
  anyBlocked(): boolean {
    return this.blocked.size > 0;
  }

  /** Seconds until `key` may be asked about again, when this process knows it is refused; else 0. */
  blockedFor(key: string): number {
    const until = this.blocked.get(key);
    if (until === undefined) return 0;
    const left = until - Date.now();
    if (left <= 0) {
      this.blocked.delete(key);
      return 0;
    }
    return Math.max(1, Math.ceil(left / 1000));
  }

  /** Refuses `aliases` (e.g. the hash of the key as presented) locally as long as `key`. */
  private block(keys: string[], retryAfterSeconds: number): void {
    const max = this.options.maxBlockedKeys ?? 100_000;
    if (this.blocked.size >= max) {
      const now = Date.now();
      for (const [k, until] of this.blocked) if (until <= now) this.blocked.delete(k);
      // Still full: forget the oldest blocks (they are re-learnt from Postgres at the next request).
      for (const k of this.blocked.keys()) {
        if (this.blocked.size < max) break;
        this.blocked.delete(k);
      }
    }
    const until = Date.now() + retryAfterSeconds * 1000;
    for (const k of keys) this.blocked.set(k, until);
  }

  async consume(key: string, limit: number, options: { windowSeconds?: number; aliases?: string[] } = {}): Promise<RateDecision> {
    const local = this.blockedFor(key);
    if (local > 0) return { allowed: false, retryAfterSeconds: local };
    let decision: RateDecision;
    try {
      decision = await consumeRateLimit(this.db, { key, limit, windowSeconds: options.windowSeconds ?? 60 });
    } catch (err) {
      this.options.onError?.(err);
      return { allowed: true };
    }
    if (!decision.allowed) this.block([key, ...(options.aliases ?? [])], decision.retryAfterSeconds);
    return decision;
  }
}
