import type { Db } from './db.js';
import { GroupCommit } from './group-commit.js';

/**
 * Request rate limits that hold across API replicas, kept in Postgres as a schedule per key (GCRA,
 * the generic cell rate algorithm): one turn every `windowSeconds / limit`, up to `burst` turns at
 * once (default: the whole `limit`). A request takes a free turn, or else is refused with the time
 * of the next free turn, which is booked for its client (`client`: who asks with the key, e.g. its
 * address). When that client comes back at its Retry-After, the turn is its own: nobody else takes
 * it and nobody else's request counts against it. Only admitted requests and booked turns move the
 * schedule; a refusal that books nothing changes nothing, so waiting clients cannot keep a key's
 * turns taken for ever (refused attempts used to count, and clients that honoured Retry-After were
 * starved by each other's retries). The database's clock is the only clock, so replicas agree.
 *
 * Booking has bounds, so that a client that asks again and again without waiting gains nothing by
 * it: a client holds at most one booked turn; asking again before it comes, it is told when it
 * comes and nothing is booked (and the API refuses it without asking Postgres until then: it is
 * hammering). Clients are told apart by their address, so several clients behind one address share
 * one place in the queue: when their turn comes, the first of them takes it. A key holds at most
 * `limit` booked turns (one window ahead); beyond, a client is told when they are through. A
 * booked turn not taken within `GRACE_MS` after its time is given up (its place in the rate is lost).
 */
export interface RateLimit {
  /** Who is limited on what, e.g. `transcript-create:<partner id>`. */
  key: string;
  /** Requests allowed per window. */
  limit: number;
  windowSeconds: number;
  /** Requests that may come at once (default `limit`). */
  burst?: number;
  /** Who asks with the key (its address): a booked turn is kept for this client alone. */
  client: string;
}

export type RateDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

/** Booked turns one client (address) may hold on one key. */
const CLIENT_TURNS = 1;
/** How long after its Retry-After a booked turn waits for its client. */
export const GRACE_MS = 10_000;

/** What Postgres said of a request and of its key's schedule after it. */
export interface ScheduleAnswer {
  allowed: boolean;
  retryAfterMs: number;
  /** Refused with a turn booked for its client (false: refused without one, or admitted). */
  booked: boolean;
  /** When the key's next request conforms, by the database's clock (ms since the epoch). */
  tatMs: number;
  /** The database's clock when it decided. */
  nowMs: number;
  /** Turns of the key booked and not taken yet. */
  reserved: number;
}

type DecideItem = { key: string; client: string; intervalMs: number; burst: number; maxReserved: number };
type DecideRow = { allowed: boolean; retry_after_ms: number; booked: boolean; tat_ms: number; now_ms: number; reserved: number; i: string };

/**
 * The requests pending in this process, whatever their keys, in one statement (group commit,
 * lib/platform/group-commit.ts): a lone request goes at once, a burst shares a round trip. Each is
 * decided by rate_limit_decide (prisma/migrations/..._rate_limit_schedules), in order of key, then
 * arrival: two replicas' batches lock keys in the same order. A named (prepared) statement.
 */
const DECIDE_BATCH = `
  SELECT d.allowed, d.retry_after_ms, d.booked, d.tat_ms, d.now_ms, d.reserved, t.i
  FROM unnest($1::text[], $2::text[], $3::float8[], $4::int[], $5::int[]) WITH ORDINALITY AS t(key, client, interval_ms, burst, max_reserved, i)
  CROSS JOIN LATERAL rate_limit_decide(t.key, t.client, t.interval_ms, t.burst, t.max_reserved, ${CLIENT_TURNS}, ${GRACE_MS}) AS d
  ORDER BY t.i`;

const decidersOf = new WeakMap<Db, GroupCommit<'decide', DecideItem, ScheduleAnswer>>();
function deciders(db: Db): GroupCommit<'decide', DecideItem, ScheduleAnswer> {
  let batcher = decidersOf.get(db);
  if (!batcher) {
    batcher = new GroupCommit(
      async (_key, items) => {
        const order = items.map((item, index) => ({ item, index })).sort((a, b) => (a.item.key < b.item.key ? -1 : a.item.key > b.item.key ? 1 : a.index - b.index));
        const sorted = order.map((o) => o.item);
        const { rows } = await db.pool.query<DecideRow>({
          name: 'rate-limit-decide',
          text: DECIDE_BATCH,
          values: [sorted.map((i) => i.key), sorted.map((i) => i.client), sorted.map((i) => i.intervalMs), sorted.map((i) => i.burst), sorted.map((i) => i.maxReserved)],
        });
        const answers: ScheduleAnswer[] = new Array(items.length);
        rows.forEach((r, k) => {
          answers[order[k]!.index] = { allowed: r.allowed, retryAfterMs: Number(r.retry_after_ms), booked: r.booked, tatMs: Number(r.tat_ms), nowMs: Number(r.now_ms), reserved: r.reserved };
        });
        sweepNowAndThen(db);
        return answers;
      },
      { retryAlone: true },
    );
    decidersOf.set(db, batcher);
  }
  return batcher;
}

const lastSweep = new WeakMap<Db, number>();
const SWEEP_EVERY_MS = 5 * 60_000;

/**
 * A schedule idle for ten minutes is at its start again: a few minutes apart, each process deletes
 * those (with no turn booked), and the booked turns given up long ago whose schedule is gone.
 */
function sweepNowAndThen(db: Db): void {
  const now = Date.now();
  if (now - (lastSweep.get(db) ?? 0) < SWEEP_EVERY_MS) return;
  lastSweep.set(db, now);
  void (async () => {
    await db.pool.query(`DELETE FROM rate_limit_schedules WHERE tat < now() - interval '10 minutes' AND reserved = 0`);
    await db.pool.query(`DELETE FROM rate_limit_reservations r WHERE r.expires < now() - interval '10 minutes' AND NOT EXISTS (SELECT 1 FROM rate_limit_schedules s WHERE s.key = r.key)`);
  })().catch(() => undefined);
}

const decision = (a: ScheduleAnswer): RateDecision => (a.allowed ? { allowed: true } : { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(a.retryAfterMs / 1000)) });
const itemOf = ({ key, limit, windowSeconds, burst, client }: RateLimit): DecideItem => ({
  key,
  client,
  intervalMs: (windowSeconds * 1000) / limit,
  burst: Math.max(1, Math.min(burst ?? limit, limit)),
  maxReserved: limit,
});

/** Decides one request of `key` from `client` against the key's schedule. */
export async function consumeRateLimit(db: Db, limit: RateLimit): Promise<RateDecision> {
  return decision(await deciders(db).submit('decide', itemOf(limit)));
}

/**
 * When the key's next request would conform, on this process's clock, from an earlier answer and
 * the requests this process let through since (no request of others assumed).
 */
export function projectedTurn(answer: Pick<ScheduleAnswer, 'tatMs' | 'nowMs'> & { at: number }, intervalMs: number, since: number, now: number): number {
  return Math.max(answer.tatMs - answer.nowMs + answer.at, now) + since * intervalMs;
}

/**
 * What this process knows of one key's schedule: Postgres' last answer for it (which includes every
 * request of the key decided before it, from any replica) and this process's requests decided
 * since, whose answers have not come back yet.
 */
interface KeySchedule {
  intervalMs: number;
  burst: number;
  /** The answer; null before the first one comes back. */
  answer: (ScheduleAnswer & { at: number }) | null;
  /** Requests of this process sent to be decided and not answered yet. */
  pending: number;
  /** Of those, the ones already let through without waiting. */
  unconfirmed: number;
}

/**
 * A limiter for every request of an interface, per key, shared by all API replicas through
 * `consumeRateLimit` (Postgres holds the one schedule), with two process-local additions.
 *
 * Requests well within their limit do not wait for the decision. A request is let through at once
 * when the key's schedule as this process knows it (Postgres' last answer, and this process's
 * requests decided since) leaves room for it and for as many more as another replica may have let
 * through unconfirmed, no turn of the key is booked (those are kept for the clients told to come
 * back), and fewer than `unconfirmedShare` of the burst (at least one) of this key's requests are
 * still waiting for their answer; it is decided all the same, in the background. Otherwise the
 * request waits for Postgres' decision. Within one process this is exact: nothing it lets through
 * would have been refused. Across replicas a key can pass its limit only by what other replicas
 * let through for it since this process's last answer, and by at most `unconfirmedShare` of the
 * burst per replica. Decided: a rate limit is a guard against overload, not an account, and this
 * takes its round trip off every request that is nowhere near its limit (docs/abuse-resistance.md,
 * "Requests well within their limit do not wait for the decision").
 *
 * A client that Postgres refused without booking it a turn (it asks again before its turn, or the
 * key's turns are booked a window ahead) is refused again by this process, without a round trip,
 * until its Retry-After has passed: a flood from one client costs one statement per replica per
 * retry period, and cannot take the database from other tenants. A client that was booked a turn is
 * not blocked: its turn is waiting for it. If Postgres cannot be asked, the request is let through
 * (fail open): a limiter must not turn an outage of its counter into an outage of the service.
 */
export class RequestRateLimiter {
  private readonly blocked = new Map<string, number>();
  private readonly schedules = new Map<string, KeySchedule>();
  private readonly maxKeys: number;
  private readonly unconfirmedShare: number;
  /** Decisions asked for and not answered yet, and who waits for there to be none (`decided`). */
  private undecided = 0;
  private readonly onDecided: Array<() => void> = [];
  /** Decisions not sent yet, in the order their requests came, and what will send them. */
  private readonly unsent: Array<() => void> = [];
  private sendTimer: NodeJS.Timeout | null = null;
  private sendNext: NodeJS.Immediate | null = null;

  constructor(
    private readonly db: Db,
    private readonly options: { maxBlockedKeys?: number; onError?: (err: unknown) => void; unconfirmedShare?: number } = {},
  ) {
    this.maxKeys = options.maxBlockedKeys ?? 100_000;
    this.unconfirmedShare = options.unconfirmedShare ?? 0.1;
  }

  /** Resolves once every decision asked for so far has been answered (a request let through at once is decided after it). */
  decided(): Promise<void> {
    return this.undecided === 0 ? Promise.resolve() : new Promise((resolve) => this.onDecided.push(resolve));
  }

  /** Whether this process refuses any client locally right now (a Map size check: free while nobody floods). */
  anyBlocked(): boolean {
    return this.blocked.size > 0;
  }

  /** The local block of one client on one key (or on an alias of it: the hash of the key as presented). */
  static blockKey(key: string, client: string): string {
    return `${key}|${client}`;
  }

  /** Seconds until `blockKey` may be asked about again, when this process knows it is refused; else 0. */
  blockedFor(blockKey: string): number {
    const until = this.blocked.get(blockKey);
    if (until === undefined) return 0;
    const left = until - Date.now();
    if (left <= 0) {
      this.blocked.delete(blockKey);
      return 0;
    }
    return Math.max(1, Math.ceil(left / 1000));
  }

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

  private scheduleOf(key: string, intervalMs: number, burst: number): KeySchedule {
    let schedule = this.schedules.get(key);
    if (!schedule || schedule.intervalMs !== intervalMs || schedule.burst !== burst) {
      if (this.schedules.size >= this.maxKeys) this.forgetIdle();
      schedule = { intervalMs, burst, answer: null, pending: 0, unconfirmed: 0 };
      this.schedules.set(key, schedule);
    }
    return schedule;
  }

  /** Keys with nothing pending whose last answer says their schedule is back at its start are known anyway. */
  private forgetIdle(): void {
    const now = Date.now();
    for (const [k, s] of this.schedules) {
      if (s.pending === 0 && (!s.answer || (s.answer.reserved === 0 && projectedTurn(s.answer, s.intervalMs, 0, now) <= now))) this.schedules.delete(k);
    }
    // Still full: the oldest go (a forgotten key's next request waits for its decision once).
    for (const [k, s] of this.schedules) {
      if (this.schedules.size < this.maxKeys) break;
      if (s.pending === 0) this.schedules.delete(k);
    }
  }

  async consume(key: string, limit: number, options: { windowSeconds?: number; burst?: number; client: string; aliases?: string[] }): Promise<RateDecision> {
    const blockKeys = [key, ...(options.aliases ?? [])].map((k) => RequestRateLimiter.blockKey(k, options.client));
    const local = this.blockedFor(blockKeys[0]!);
    if (local > 0) return { allowed: false, retryAfterSeconds: local };
    const item = itemOf({ key, limit, windowSeconds: options.windowSeconds ?? 60, burst: options.burst, client: options.client });
    const schedule = this.scheduleOf(key, item.intervalMs, item.burst);
    const now = Date.now();
    const tolerance = (item.burst - 1) * item.intervalMs;
    const unconfirmedCap = Math.max(1, Math.floor(item.burst * this.unconfirmedShare));
    // Room is kept for what other replicas may have let through unconfirmed meanwhile (as much as this one may).
    const room = schedule.answer ? projectedTurn(schedule.answer, item.intervalMs, schedule.pending + unconfirmedCap, now) - tolerance <= now : schedule.pending + unconfirmedCap <= item.burst - 1;
    const atOnce = room && (schedule.answer?.reserved ?? 0) === 0 && schedule.unconfirmed < unconfirmedCap;

    schedule.pending++;
    this.undecided++;
    if (atOnce) schedule.unconfirmed++;
    const decide = () =>
      deciders(this.db)
        .submit('decide', item)
        .then(
          (answer) => {
            schedule.answer = { ...answer, at: Date.now() };
            const d = decision(answer);
            // A client told when its booked turn comes is not blocked: it may be one of several behind one address.
            if (!d.allowed && !answer.booked) this.block(blockKeys, d.retryAfterSeconds);
            return d;
          },
          (err: unknown): RateDecision => {
            this.options.onError?.(err);
            return { allowed: true };
          },
        )
        .finally(() => {
          schedule.pending--;
          if (atOnce) schedule.unconfirmed--;
          if (--this.undecided === 0) for (const resolve of this.onDecided.splice(0)) resolve();
        });
    if (atOnce) {
      this.send(() => void decide(), false);
      return { allowed: true };
    }
    return new Promise((resolve) => this.send(() => resolve(decide()), true));
  }

  /**
   * Queues a decision to be sent. One a request waits for goes at the next turn, with every decision
   * queued before it (their statements keep the order the requests came in). The decision of a
   * request let through at once waits up to SEND_AT_ONCE_AFTER_MS for company: sent at the next
   * turn, its statement and its answer, and the database's work on them, fell in the few
   * milliseconds in which the request's provider call answers (bench:messaging: ~0.5 ms more to the
   * first token at one stream). The room it was let through on is this process's count until then.
   */
  private send(decision: () => void, waitedFor: boolean): void {
    this.unsent.push(decision);
    if (waitedFor) this.sendNext ??= setImmediate(() => this.sendQueued());
    else if (!this.sendNext) this.sendTimer ??= setTimeout(() => this.sendQueued(), SEND_AT_ONCE_AFTER_MS);
  }

  private sendQueued(): void {
    if (this.sendTimer) clearTimeout(this.sendTimer);
    if (this.sendNext) clearImmediate(this.sendNext);
    this.sendTimer = null;
    this.sendNext = null;
    for (const decision of this.unsent.splice(0)) decision();
  }
}

/** How long the decision of a request let through at once may wait to be sent (`RequestRateLimiter.send`). */
const SEND_AT_ONCE_AFTER_MS = 10;
