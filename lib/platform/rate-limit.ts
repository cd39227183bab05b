import type { Db } from './db.js';
import { GroupCommit } from './group-commit.js';

/**
 * Request rate limits that hold across API replicas: each request adds one to its key's counter of
 * the current window in Postgres (batched, see `counters`), and the rate is the sliding-window estimate
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

type WindowRow = { key: string; secs: number; current: number; previous: number; elapsed: number };
type ConsumeItem = { key: string; limit: number; windowSeconds: number };

/**
 * Counts the requests pending in this process in one statement, whatever their keys (group commit,
 * lib/platform/group-commit.ts): a lone request goes at once, a burst of requests shares a round
 * trip instead of queueing for the pool one statement each. Requests of one key are summed into
 * one upsert (keys in a fixed order, so that two replicas' batches lock rows in the same order) and
 * decided in arrival order against the counts they would have seen alone. The counters live in an
 * unlogged table (migration rate_limit_windows_unlogged): no WAL flush waits on a request, and a
 * database crash forgets at most the current windows. A named (prepared) statement: each connection
 * plans it once, not at every request.
 */
const COUNT_BATCH = `
  WITH req AS (
    SELECT key, secs, count(*)::int AS n FROM unnest($1::text[], $2::int[]) AS t(key, secs) GROUP BY key, secs
  ), clock AS (
    SELECT extract(epoch FROM now()) AS at
  ), win AS (
    SELECT req.*, to_timestamp(floor(clock.at / req.secs) * req.secs) AS start,
           (clock.at - floor(clock.at / req.secs) * req.secs) / req.secs AS elapsed
    FROM req, clock
  ), gone AS (
    DELETE FROM rate_limit_windows w USING win
    WHERE w.key = win.key AND w.window_start < win.start - make_interval(secs => win.secs)
  ), cur AS (
    INSERT INTO rate_limit_windows AS w (key, window_start, count)
    SELECT key, start, n FROM win ORDER BY key
    ON CONFLICT (key, window_start) DO UPDATE SET count = w.count + excluded.count
    RETURNING w.key, w.window_start, w.count
  )
  SELECT win.key, win.secs, cur.count::int AS current, COALESCE(p.count, 0)::int AS previous, win.elapsed::float8 AS elapsed
  FROM win JOIN cur ON cur.key = win.key AND cur.window_start = win.start
  LEFT JOIN rate_limit_windows p ON p.key = win.key AND p.window_start = win.start - make_interval(secs => win.secs)`;

/** What Postgres said of a key's windows after a batch: the current count includes the whole batch. */
export interface WindowState {
  previous: number;
  current: number;
  /** Fraction of the current window that had passed, by the database's clock. */
  elapsed: number;
}

type Counted = { decision: RateDecision; window: WindowState };

const countersOf = new WeakMap<Db, GroupCommit<'count', ConsumeItem, Counted>>();
function counters(db: Db): GroupCommit<'count', ConsumeItem, Counted> {
  let batcher = countersOf.get(db);
  if (!batcher) {
    batcher = new GroupCommit(async (_key, items) => {
      const { rows } = await db.pool.query<WindowRow>({ name: 'rate-limit-count', text: COUNT_BATCH, values: [items.map((i) => i.key), items.map((i) => i.windowSeconds)] });
      const windows = new Map(rows.map((r) => [`${r.secs}:${r.key}`, r]));
      // The count after the whole batch, less what came after each request: its count alone.
      const after = new Map<string, number>();
      for (const item of items) {
        const id = `${item.windowSeconds}:${item.key}`;
        after.set(id, (after.get(id) ?? 0) + 1);
      }
      const seen = new Map<string, number>();
      return items.map(({ key, limit, windowSeconds }) => {
        const id = `${windowSeconds}:${key}`;
        const w = windows.get(id)!;
        const position = (seen.get(id) ?? 0) + 1;
        seen.set(id, position);
        return {
          decision: decide(limit, windowSeconds, w.previous, w.current - after.get(id)! + position, w.elapsed),
          window: { previous: w.previous, current: w.current, elapsed: w.elapsed },
        };
      });
    }, { retryAlone: true });
    countersOf.set(db, batcher);
  }
  return batcher;
}

/** Counts one request of `key` and decides it against the counts it would have seen alone. */
export async function consumeRateLimit(db: Db, { key, limit, windowSeconds }: RateLimit): Promise<RateDecision> {
  return (await counters(db).submit('count', { key, limit, windowSeconds })).decision;
}

function decide(limit: number, windowSeconds: number, previous: number, current: number, elapsed: number): RateDecision {
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
 * What this process knows of one key's count: Postgres' last answer for it (which includes every
 * request of the key counted before it, from any replica) and this process's requests counted
 * since, whose answers have not come back yet.
 */
interface KeyCount {
  windowMs: number;
  /** The answer; null before the first one comes back. */
  answer: (WindowState & { at: number }) | null;
  /** Requests of this process submitted for counting and not answered yet. */
  pending: number;
  /** Of those, the ones already let through without waiting. */
  unconfirmed: number;
}

/** The sliding-window count of a key at `now` from an earlier answer, as the windows move on (no request of others assumed). */
export function projectedCount(answer: WindowState & { at: number }, windowMs: number, now: number): number {
  const elapsed = answer.elapsed + (now - answer.at) / windowMs;
  if (elapsed < 1) return answer.previous * (1 - elapsed) + answer.current;
  // The answer's current window has become the previous one; two windows on, nothing of it counts.
  if (elapsed < 2) return answer.current * (2 - elapsed);
  return 0;
}

/**
 * A limiter for every request of an interface, per key, shared by all API replicas through
 * `consumeRateLimit` (Postgres is the one counter), with two process-local additions.
 *
 * Requests well within their limit do not wait for the count. A request is let through at once
 * when the key's count as this process knows it (Postgres' last answer, decayed as its windows
 * move on, plus this process's requests counted since) leaves room for it and for as many more as
 * another replica may have let through unconfirmed, and fewer than `unconfirmedShare` of the limit
 * (at least one) of this key's requests are still waiting for their count's answer; it is counted
 * all the same, in the background. Otherwise (near the limit, a key this
 * process has never counted while others are unconfirmed) the request waits for Postgres' decision,
 * exactly as before. Within one process this is exact: nothing it lets through would have been
 * refused. Across replicas a key can pass its limit only by what other replicas let through for it
 * since this process's last answer, and by at most `unconfirmedShare` of the limit per replica
 * (an answer that refuses an unconfirmed request blocks the key at once, as below). Decided: a
 * rate limit is a guard against overload, not an account, and this takes its round trip off every
 * request that is nowhere near its limit (README, "Abuse resistance").
 *
 * A key that Postgres has just refused is refused again by this process, without a round trip,
 * until its `Retry-After` has passed (what rate-limiter-flexible calls blocking in memory on
 * consumption). A flood from one key therefore costs one statement per replica per retry period
 * instead of one per request, and cannot take the database (or its connection pool) from other
 * tenants. Requests refused locally are not counted: a client hammering through its block gets in
 * again exactly when Postgres' window admits one more request, and never more than `limit` a window.
 * If Postgres cannot be asked, the request is let through (fail open): it will meet the database
 * soon anyway, and a limiter must not turn an outage of its counter into an outage of the service.
 */
export class RequestRateLimiter {
  private readonly blocked = new Map<string, number>();
  private readonly counts = new Map<string, KeyCount>();
  private readonly maxKeys: number;
  private readonly unconfirmedShare: number;

  constructor(
    private readonly db: Db,
    private readonly options: { maxBlockedKeys?: number; onError?: (err: unknown) => void; unconfirmedShare?: number } = {},
  ) {
    this.maxKeys = options.maxBlockedKeys ?? 100_000;
    this.unconfirmedShare = options.unconfirmedShare ?? 0.1;
  }

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
    if (this.blocked.size >= this.maxKeys) {
      const now = Date.now();
      for (const [k, until] of this.blocked) if (until <= now) this.blocked.delete(k);
      // Still full: forget the oldest blocks (they are re-learnt from Postgres at the next request).
      for (const k of this.blocked.keys()) {
        if (this.blocked.size < this.maxKeys) break;
        this.blocked.delete(k);
      }
    }
    const until = Date.now() + retryAfterSeconds * 1000;
    for (const k of keys) this.blocked.set(k, until);
  }

  private countOf(key: string, windowMs: number): KeyCount {
    let count = this.counts.get(key);
    if (!count || count.windowMs !== windowMs) {
      if (this.counts.size >= this.maxKeys) this.forgetIdleCounts();
      count = { windowMs, answer: null, pending: 0, unconfirmed: 0 };
      this.counts.set(key, count);
    }
    return count;
  }

  /** Keys with nothing pending whose last answer no longer counts (two windows old) are known to be at zero anyway. */
  private forgetIdleCounts(): void {
    const now = Date.now();
    for (const [k, c] of this.counts) {
      if (c.pending === 0 && (!c.answer || now - c.answer.at >= 2 * c.windowMs)) this.counts.delete(k);
    }
    // Still full: the oldest go (a forgotten key's next request waits for its count once).
    for (const [k, c] of this.counts) {
      if (this.counts.size < this.maxKeys) break;
      if (c.pending === 0) this.counts.delete(k);
    }
  }

  async consume(key: string, limit: number, options: { windowSeconds?: number; aliases?: string[] } = {}): Promise<RateDecision> {
    const local = this.blockedFor(key);
    if (local > 0) return { allowed: false, retryAfterSeconds: local };
    const windowSeconds = options.windowSeconds ?? 60;
    const count = this.countOf(key, windowSeconds * 1000);
    const known = count.answer ? projectedCount(count.answer, count.windowMs, Date.now()) : 0;
    const unconfirmedCap = Math.max(1, Math.floor(limit * this.unconfirmedShare));
    // Room is kept for what other replicas may have let through unconfirmed meanwhile (as much as this one may).
    const atOnce = known + count.pending + 1 + unconfirmedCap <= limit && count.unconfirmed < unconfirmedCap;

    count.pending++;
    if (atOnce) count.unconfirmed++;
    const counted = counters(this.db)
      .submit('count', { key, limit, windowSeconds })
      .then(
        ({ decision, window }) => {
          count.answer = { ...window, at: Date.now() };
          if (!decision.allowed) this.block([key, ...(options.aliases ?? [])], decision.retryAfterSeconds);
          return decision;
        },
        (err: unknown): RateDecision => {
          this.options.onError?.(err);
          return { allowed: true };
        },
      )
      .finally(() => {
        count.pending--;
        if (atOnce) count.unconfirmed--;
      });
    if (atOnce) return { allowed: true };
    return counted;
  }
}
