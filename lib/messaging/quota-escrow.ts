import crypto from 'node:crypto';
import type { Db } from '../platform/db.js';
import type { Logger } from '../platform/logger.js';
import { AppError } from '../platform/errors.js';
import { commitSliceDurably, knownRoom, reserveQuota, returnToSlice, type QuotaHold } from './quota.js';

/**
 * Quota escrow (docs/adr/0003-quota-escrow.md): an API process that serves a key often holds a
 * slice of the key's room in advance, as one hold of its own (endpoint `escrow`), and makes the
 * holds of its requests on that key from the slice in memory, with no round trip before the first
 * token. The database counts the whole slice as held, so consumed + held never exceeds the amount
 * across every process, exactly as with one hold per request; a request's settlement charges what
 * it used and takes what it held out of the slice in one transaction (quota_settle_batch).
 *
 * A slice is drawn from for MESSAGING_QUOTA_ESCROW_SECONDS, then what is left of it goes back to
 * the key; the slice row expires like any hold (plus that time), so a crashed process blocks at
 * most its slice for as long as it would have blocked its requests' holds. A slice is taken in the
 * background, never on a request's path, only for a key this process held on at least twice in the
 * last period, sized to twice that demand, at most a sixteenth of the room it last heard of and at
 * least four of the largest hold asked for: a key with little room keeps one hold per request, so
 * its last tokens go to whichever process asks for them. Its hold is committed durably before the
 * first draw (a hold committed without waiting for the WAL flush could vanish in a database crash
 * while the process goes on lending from it).
 *
 * A hold drawn from a slice does not read the key's row: a revocation stops the draws of the
 * process that revokes at once, and reaches the others through their key cache, within
 * MESSAGING_KEY_CACHE_SECONDS (0: every request reads the key, and is refused at once).
 */
export interface EscrowSettings {
  /** How long a slice is drawn from (0: no escrow). */
  drawMs: number;
  /** How long a request's hold lives (a slice lives this much longer than it is drawn from). */
  holdMs: number;
}

interface Slice {
  operationKey: string;
  free: number;
  drawUntil: number;
  timer: NodeJS.Timeout;
}

interface KeyDemand {
  /** Start of the current period of demand. */
  since: number;
  holds: number;
  tokens: number;
  largest: number;
  slice: Slice | null;
  taking: boolean;
}

const MIN_HOLDS = 2;
const ROOM_SHARE = 16;
const MIN_SLICE_IN_HOLDS = 4;
/** Keys whose demand a process follows before it forgets the quiet ones. */
const MAX_KEYS = 10_000;

class Escrows {
  private readonly keys = new Map<string, KeyDemand>();

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    private readonly settings: EscrowSettings,
  ) {}

  /** A hold of `tokens` on the key from this process's slice, or null when it has none that covers it. */
  draw(quotaKeyId: string, operationKey: string, endpoint: string, tokens: number): QuotaHold | null {
    if (this.settings.drawMs <= 0) return null;
    const demand = this.demandOf(quotaKeyId, tokens);
    const slice = demand.slice;
    if (!slice || slice.free < tokens || performance.now() >= slice.drawUntil) return null;
    slice.free -= tokens;
    return { operationKey, quotaKeyId, endpoint, tokens, escrow: slice.operationKey };
  }

  /** After a hold made in the database: takes a slice for the key when its demand asks for one. */
  considerSlice(quotaKeyId: string): void {
    const demand = this.keys.get(quotaKeyId);
    if (!demand || demand.taking || demand.slice || demand.holds < MIN_HOLDS || this.settings.drawMs <= 0) return;
    const room = knownRoom(this.db, quotaKeyId);
    const size = Math.floor(Math.min(2 * demand.tokens, room / ROOM_SHARE));
    if (size < MIN_SLICE_IN_HOLDS * demand.largest) return;
    demand.taking = true;
    void this.take(quotaKeyId, demand, size)
      .catch((err: unknown) => this.log.warn('quota escrow not taken', { err, quota_key_id: quotaKeyId }))
      .finally(() => (demand.taking = false));
  }

  /**
   * Gives back what is left of the key's slice, so that a hold this process asks the database for
   * is not refused for want of room its own slice keeps; answers whether there was any.
   */
  async giveBackUnlent(quotaKeyId: string): Promise<boolean> {
    const demand = this.keys.get(quotaKeyId);
    if (!demand?.slice || demand.slice.free <= 0) return false;
    await this.retire(quotaKeyId, demand, false);
    return true;
  }

  /** No more draws on a revoked key; what its slice has not lent goes back. */
  async forget(quotaKeyId: string): Promise<void> {
    const demand = this.keys.get(quotaKeyId);
    this.keys.delete(quotaKeyId);
    if (demand) await this.retire(quotaKeyId, demand, false);
  }

  /** What this process's slice of a key can still lend now (0: no slice, or its period is over). */
  lendable(quotaKeyId: string): number {
    const slice = this.keys.get(quotaKeyId)?.slice;
    return slice && performance.now() < slice.drawUntil ? slice.free : 0;
  }

  /** Gives back what is left of every slice (graceful shutdown). */
  async returnAll(): Promise<void> {
    await Promise.all([...this.keys.entries()].map(([keyId, d]) => this.retire(keyId, d, false)));
  }

  private demandOf(quotaKeyId: string, tokens: number): KeyDemand {
    const now = performance.now();
    let demand = this.keys.get(quotaKeyId);
    if (!demand) {
      if (this.keys.size >= MAX_KEYS) this.forgetQuietKeys(now);
      this.keys.set(quotaKeyId, (demand = { since: now, holds: 0, tokens: 0, largest: 0, slice: null, taking: false }));
    }
    else if (now - demand.since > this.settings.drawMs && !demand.slice) Object.assign(demand, { since: now, holds: 0, tokens: 0, largest: 0 });
    demand.holds++;
    demand.tokens += tokens;
    demand.largest = Math.max(demand.largest, tokens);
    return demand;
  }

  /** Keys seen once and not since hold nothing: their demand is forgotten when the table is full. */
  private forgetQuietKeys(now: number): void {
    for (const [keyId, d] of this.keys) if (!d.slice && !d.taking && now - d.since > this.settings.drawMs) this.keys.delete(keyId);
  }

  private async take(quotaKeyId: string, demand: KeyDemand, size: number): Promise<void> {
    const operationKey = `escrow-${crypto.randomUUID()}`;
    // Draws end before the slice's hold could have expired under any hold drawn from it.
    const drawUntil = performance.now() + this.settings.drawMs;
    await reserveQuota(this.db, { quotaKeyId, operationKey, endpoint: 'escrow', tokens: size, holdMs: this.settings.drawMs + this.settings.holdMs });
    await commitSliceDurably(this.db, operationKey);
    const timer = setTimeout(() => void this.retire(quotaKeyId, demand, true), Math.max(0, drawUntil - performance.now()));
    timer.unref();
    demand.slice = { operationKey, free: size, drawUntil, timer };
    Object.assign(demand, { since: performance.now(), holds: 0, tokens: 0, largest: 0 });
  }

  /**
   * Ends a slice's draws: what it has not lent goes back to the key. At the end of its period a key
   * still in demand takes the next slice; a key that was not is forgotten.
   */
  private async retire(quotaKeyId: string, demand: KeyDemand, periodEnded: boolean): Promise<void> {
    const slice = demand.slice;
    if (!slice) return;
    clearTimeout(slice.timer);
    demand.slice = null;
    const unlent = slice.free;
    slice.free = 0;
    try {
      await returnToSlice(this.db, slice.operationKey, unlent);
    } catch (err) {
      this.log.warn('quota escrow not given back (it expires on its own)', { err, operation_key: slice.operationKey });
    }
    if (!periodEnded) return;
    if (demand.holds >= MIN_HOLDS) this.considerSlice(quotaKeyId);
    else if (!demand.taking && this.keys.get(quotaKeyId) === demand) this.keys.delete(quotaKeyId);
  }
}

/** The process's escrows on a database (one per Db: an API process has one). */
const escrowsOf = new WeakMap<Db, Escrows>();
function escrows(db: Db, log: Logger, settings: EscrowSettings): Escrows {
  let e = escrowsOf.get(db);
  if (!e) escrowsOf.set(db, (e = new Escrows(db, log, settings)));
  return e;
}

/**
 * A hold of `tokens` on the key: from this process's slice when it covers the hold (no round
 * trip), else from the database. A refusal while the slice keeps room nobody borrowed gives that
 * room back first and asks once more, so a process is never refused for its own slice.
 */
export async function holdOnKey(
  db: Db,
  log: Logger,
  settings: EscrowSettings,
  req: { quotaKeyId: string; operationKey: string; endpoint: string; tokens: number; keyVerified?: boolean },
): Promise<QuotaHold> {
  const escrow = escrows(db, log, settings);
  const { keyVerified = true, ...hold } = req;
  const tokens = Math.max(1, Math.ceil(hold.tokens));
  // A key not verified lately (lib/messaging/quota-keys.ts) is held in the database, which reads its row.
  const drawn = keyVerified ? escrow.draw(hold.quotaKeyId, hold.operationKey, hold.endpoint, tokens) : null;
  if (drawn) return drawn;
  const reserve = () => reserveQuota(db, { ...hold, tokens, holdMs: settings.holdMs });
  let made: QuotaHold;
  try {
    made = await reserve();
  } catch (err) {
    if (!(err instanceof AppError && err.code === 'quota_exceeded') || !(await escrow.giveBackUnlent(hold.quotaKeyId))) throw err;
    made = await reserve();
  }
  escrow.considerSlice(hold.quotaKeyId);
  return made;
}

/** Tokens this process can lend from its slice of a key right now (a slice's row exists a round trip before it lends). */
export function lendableOnKey(db: Db, quotaKeyId: string): number {
  return escrowsOf.get(db)?.lendable(quotaKeyId) ?? 0;
}

/** The revoking process draws no more on the key. */
export async function forgetEscrow(db: Db, quotaKeyId: string): Promise<void> {
  await escrowsOf.get(db)?.forget(quotaKeyId);
}

/** Gives back what is left of this process's slices, if it has any (graceful shutdown). */
export async function returnEscrows(db: Db): Promise<void> {
  await escrowsOf.get(db)?.returnAll();
}
