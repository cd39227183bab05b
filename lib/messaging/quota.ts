import type { Db } from '../platform/db.js';
import { AppError } from '../platform/errors.js';
import { GroupCommit } from '../platform/group-commit.js';
import { countTokens } from '../platform/tokens.js';
import type { ProviderUsage } from './upstream.js';

/**
 * Quota admission, two-phase like the knowledge-base ledger (lib/budget/ledger.ts): `reserve`
 * holds a bound (estimated input tokens + the output limit) under a lock on the key's row, so
 * concurrent requests of one key serialise and consumed + held never exceeds the amount;
 * `settle` records the provider-reported usage once and drops the hold; `release` drops an unused
 * hold (the model was never reached). Holds expire (a crashed process cannot block a key forever).
 */
export const holdLifetimeMs = (upstreamTimeoutSeconds: number) => (upstreamTimeoutSeconds * 2 + 60) * 1000;

export interface QuotaHold {
  operationKey: string;
  quotaKeyId: string;
  endpoint: string;
  tokens: number;
  /** The escrow slice the hold was drawn from (lib/messaging/quota-escrow.ts), if it was. */
  escrow?: string;
}

/**
 * Tokens to hold for a text. Up to 4 KiB of UTF-8 it is the byte count: no tokenizer makes more
 * tokens than bytes, so that bound holds for every script at no cost before the first byte. Longer
 * texts hold their o200k token count plus 10 % and a little framing (another tokenizer may count
 * more), never less than ⌈characters / 4⌉ (which alone would under-hold Chinese or Japanese).
 */
const BYTE_BOUND_LIMIT = 4096;
/**
 * Past 1 MiB the count is not made: it would hold the event loop a second or two for adversarial
 * text (lib/platform/tokens.ts) and could only lower a hold of more tokens than any model takes.
 * The byte bound with the same 10 % and framing is held instead (`quickTokenBound`).
 */
const COUNT_LIMIT = 1 << 20;
export function estimateTokens(text: string): number {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= BYTE_BOUND_LIMIT) return bytes;
  if (bytes > COUNT_LIMIT) return quickTokenBound(text).tokens;
  return Math.max(Math.ceil(text.length / 4), Math.ceil(countTokens(text) * 1.1) + 16);
}

/**
 * An image costs the model what its pixels come to, not its bytes: scaled to fit 2048 px, then to
 * 768 px on its short side, it is at most 8 tiles of 512 px, which OpenAI charges at most 2,833 +
 * 8 × 5,667 = 48,169 tokens (gpt-4o-mini at high detail, the dearest per tile; gpt-4o 1,445,
 * gpt-4.1-mini 2,489). Held as its base64 bytes, a 1 MB photo asked for 1.4 million tokens and
 * was refused by a key with ample room. A smaller image keeps its byte count, as before.
 */
export const IMAGE_INPUT_TOKEN_BOUND = 48_169;

/**
 * The JSON of a request's messages (or responses `input`) with the data of every inline image left
 * out, and the tokens those images hold: each its length, at most IMAGE_INPUT_TOKEN_BOUND. An inline
 * image is a `data:image/` URL where the APIs take an image: chat's `image_url.url`, responses'
 * `input_image.image_url`; the same text in a message's text is text, and counts as such.
 * Documents and audio sent inline keep their bytes (their cost grows with their length).
 */
export function inputJson(value: unknown): { json: string; imageTokens: number } {
  let imageTokens = 0;
  const json = JSON.stringify(value, function (this: Record<string, unknown>, member: string, v: unknown) {
    const image = typeof v === 'string' && v.startsWith('data:image/') && (member === 'url' || (member === 'image_url' && this.type === 'input_image'));
    if (!image) return v;
    imageTokens += Math.min(v.length, IMAGE_INPUT_TOKEN_BOUND);
    return '';
  });
  return { json: json ?? '', imageTokens };
}

/**
 * The tokens a provider's usage reports, as charged: its input and output together, or its total
 * when that is more (it may count what the parts leave out); null when it reports neither, and the
 * whole hold is charged. A provider that leaves the total out, or reports less than its parts, is
 * charged the parts.
 */
export function tokensUsed(usage: ProviderUsage | null | undefined): number | null {
  if (!usage || typeof usage !== 'object') return null;
  const input = usage.prompt_tokens ?? usage.input_tokens;
  const output = usage.completion_tokens ?? usage.output_tokens;
  const parts = typeof input === 'number' && typeof output === 'number' ? input + output : null;
  const total = typeof usage.total_tokens === 'number' ? usage.total_tokens : null;
  if (parts === null) return total;
  return total === null ? parts : Math.max(total, parts);
}

/**
 * A bound of `estimateTokens(text)` that costs no token count: the byte count, plus the same 10 %
 * and framing (no tokenizer makes more tokens than bytes). Counting o200k tokens takes about 10 ms
 * for 16 KiB and 30 ms for 64 KiB here, too long to spend before a request's first byte: a long
 * request is admitted on this bound and its hold brought down to `estimateTokens` once its stream
 * has started (`refineHold`); only when the bound does not fit is the count made first.
 */
export function quickTokenBound(text: string): { tokens: number; exact: boolean } {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= BYTE_BOUND_LIMIT) return { tokens: bytes, exact: true };
  return { tokens: Math.max(Math.ceil(text.length / 4), Math.ceil(bytes * 1.1) + 16), exact: false };
}

/** Lowers a pending hold to `tokens` (never raises it): the room it held beyond that is free again. */
export async function refineHold(db: Db, hold: QuotaHold, tokens: number): Promise<void> {
  const lowered = Math.max(1, Math.ceil(tokens));
  if (lowered >= hold.tokens) return;
  if (hold.escrow) {
    const spare = hold.tokens - lowered;
    hold.tokens = lowered;
    await returnToSlice(db, hold.escrow, spare);
    return;
  }
  await db.pool.query(`UPDATE quota_reservations SET tokens = $2 WHERE "operationKey" = $1 AND status = 'pending' AND tokens > $2`, [hold.operationKey, lowered]);
  hold.tokens = lowered;
}

/**
 * Takes `tokens` out of an escrow slice's hold (lib/messaging/quota-escrow.ts): room it will not
 * lend goes back to the key. A slice with nothing left, lent or not, is released.
 */
export async function returnToSlice(db: Db, escrowOperationKey: string, tokens: number): Promise<void> {
  await batchers(db).sliceReturns.submit('return', { escrow: escrowOperationKey, tokens: Math.max(0, Math.floor(tokens)) });
}

/** Commits a new slice's hold durably (the WAL flushed up to it) before anything is lent from it. */
export async function commitSliceDurably(db: Db, escrowOperationKey: string): Promise<void> {
  await batchers(db).durableSlices.submit('durable', escrowOperationKey);
}

/**
 * The returns of a batch, summed per slice (applied one by one they would end the same way: a
 * slice taken to nothing is released and takes no more). The slices' rows are locked in the order
 * quota_settle_batch locks them (by key), so a batch of returns and one of settlements never wait
 * for each other in a circle.
 */
const RETURN_TO_SLICES = `
  WITH given AS (
    SELECT x.k AS "operationKey", sum(x.t)::BIGINT AS tokens FROM unnest($1::text[], $2::bigint[]) AS x(k, t) GROUP BY x.k
  ), locked AS (
    SELECT r."operationKey", g.tokens FROM quota_reservations r JOIN given g USING ("operationKey")
     WHERE r.status = 'pending' ORDER BY r."quotaKeyId", r."operationKey" FOR UPDATE OF r
  )
  UPDATE quota_reservations r
     SET tokens = GREATEST(r.tokens - l.tokens, 0),
         status = CASE WHEN r.tokens - l.tokens <= 0 THEN 'released' ELSE r.status END,
         "resolvedAt" = CASE WHEN r.tokens - l.tokens <= 0 THEN now() ELSE r."resolvedAt" END
    FROM locked l WHERE r."operationKey" = l."operationKey"`;

type ReserveRow = { outcome: 'admitted' | 'revoked' | 'exhausted'; token_amount: string | null; remaining: string | null };
type ReserveItem = { quota_key_id: string; operation_key: string; endpoint: string; tokens: number; hold_ms: number };
type SettleItem = { operation_key: string; used: number | null; quota_key_id: string | null; held: number | null; endpoint: string | null; escrow?: string };
type SettleOutcome = 'settled' | 'already_resolved';

/**
 * Holds and settlements that arrive while a batch of their kind is in flight go together as the
 * next batch (group commit, lib/platform/group-commit.ts): one round trip for all, each decided in
 * order under its key's lock exactly as alone (migration quota_admission_batches). A lone request
 * goes at once, so a quiet key pays one round trip, and a burst of streams shares a few instead of
 * queueing for the pool's connections one statement each. A batch is one statement: when it fails,
 * nothing of it was applied, and each request is tried again alone. Escrow slices' durable commits
 * and returns go the same way: many keys' slices begin and end together after a burst.
 */
interface Batchers {
  reserve: GroupCommit<'reserve', ReserveItem, ReserveRow>;
  settle: GroupCommit<'settle', SettleItem, SettleOutcome>;
  sliceReturns: GroupCommit<'return', { escrow: string; tokens: number }, null>;
  durableSlices: GroupCommit<'durable', string, null>;
}
const batchersOf = new WeakMap<Db, Batchers>();
function batchers(db: Db) {
  let b = batchersOf.get(db);
  if (!b) {
    b = {
      reserve: new GroupCommit(async (_key, items) => {
        const { rows } = await db.pool.query<ReserveRow & { idx: string }>('SELECT * FROM quota_reserve_batch($1)', [JSON.stringify(items)]);
        const byIndex = new Map<number, ReserveRow>(rows.map((r) => [Number(r.idx), r]));
        return items.map((_, i) => byIndex.get(i + 1)!);
      }, { retryAlone: true }),
      settle: new GroupCommit(async (_key, items) => {
        const { rows } = await db.pool.query<{ idx: string; outcome: SettleOutcome }>('SELECT * FROM quota_settle_batch($1)', [JSON.stringify(items)]);
        const byIndex = new Map(rows.map((r) => [Number(r.idx), r.outcome]));
        return items.map((_, i) => byIndex.get(i + 1)!);
      }, { retryAlone: true }),
      sliceReturns: new GroupCommit(async (_key, items) => {
        await db.pool.query({ name: 'quota-return-to-slices', text: RETURN_TO_SLICES, values: [items.map((i) => i.escrow), items.map((i) => i.tokens)] });
        return items.map(() => null);
      }, { retryAlone: true }),
      // A durable commit flushes the WAL up to itself, the slices' holds (committed without waiting) included.
      durableSlices: new GroupCommit(async (_key, keys) => {
        await db.pool.query(`UPDATE quota_reservations SET "expiresAt" = "expiresAt" WHERE "operationKey" = ANY($1::text[])`, [keys]);
        return keys.map(() => null);
      }),
    };
    batchersOf.set(db, b);
  }
  return b;
}

/**
 * What this process last heard of each key's free room (amount − consumed − held, after the hold
 * of that answer), and the tokens of its own holds asked for since. Only a forecast: other requests
 * and replicas hold and settle meanwhile, and the database still decides every hold.
 */
interface KeyRoom {
  remaining: number;
  at: number;
  asking: number;
}
const roomsOf = new WeakMap<Db, Map<string, KeyRoom>>();
const MAX_KNOWN_ROOMS = 100_000;
/** Holds this process is making right now, whatever their keys. */
const holdsInFlight = new WeakMap<Db, number>();

/** How many holds this process is waiting for the database to make (a burst of requests shows here). */
export const holdsBeingMade = (db: Db): number => holdsInFlight.get(db) ?? 0;

function roomOf(db: Db, quotaKeyId: string): KeyRoom {
  let rooms = roomsOf.get(db);
  if (!rooms) roomsOf.set(db, (rooms = new Map()));
  let room = rooms.get(quotaKeyId);
  if (!room) {
    if (rooms.size >= MAX_KNOWN_ROOMS) for (const [k, r] of rooms) if (r.asking === 0) rooms.delete(k);
    rooms.set(quotaKeyId, (room = { remaining: 0, at: -Infinity, asking: 0 }));
  }
  return room;
}

/**
 * Whether a hold of `tokens` on the key is all but certain to be admitted: this process heard less
 * than `maxAgeMs` ago that the key had room for it beyond every hold this process has asked for
 * since. The messaging gateway then calls the provider while the hold is being made
 * (lib/messaging/generation.ts) instead of after it.
 */
/** The key's free room as this process last heard of it, less its own holds asked for since (0 when it never heard). */
export function knownRoom(db: Db, quotaKeyId: string): number {
  const room = roomsOf.get(db)?.get(quotaKeyId);
  return room && room.at > -Infinity ? Math.max(0, room.remaining - room.asking) : 0;
}

export function roomForeseen(db: Db, quotaKeyId: string, tokens: number, maxAgeMs: number): boolean {
  const room = roomsOf.get(db)?.get(quotaKeyId);
  return !!room && performance.now() - room.at <= maxAgeMs && room.remaining - room.asking >= tokens;
}

/**
 * Settlements this process has sent and not heard back from, per key. A hold on the key waits for
 * them, so that a client's next request is decided on what its last one used: the answer goes out
 * before its settlement lands, and the client may be quicker than the settlement's commit.
 */
const settlingOf = new WeakMap<Db, Map<string, Promise<unknown>>>();

function trackSettlement(db: Db, quotaKeyId: string, settlement: Promise<unknown>): void {
  let settling = settlingOf.get(db);
  if (!settling) settlingOf.set(db, (settling = new Map()));
  const earlier = settling.get(quotaKeyId);
  const all: Promise<unknown> = Promise.allSettled(earlier ? [earlier, settlement] : [settlement]).then(() => {
    if (settling.get(quotaKeyId) === all) settling.delete(quotaKeyId);
  });
  settling.set(quotaKeyId, all);
}

export async function reserveQuota(
  db: Db,
  req: { quotaKeyId: string; operationKey: string; endpoint: string; tokens: number; holdMs: number },
): Promise<QuotaHold> {
  const settling = settlingOf.get(db)?.get(req.quotaKeyId);
  if (settling) await settling;
  const tokens = Math.max(1, Math.ceil(req.tokens));
  // One round trip (shared with the holds that arrive meanwhile): the function locks the key's
  // row, sums its live holds and inserts this one.
  const room = roomOf(db, req.quotaKeyId);
  room.asking += tokens;
  holdsInFlight.set(db, holdsBeingMade(db) + 1);
  let r: ReserveRow;
  try {
    r = await batchers(db).reserve.submit('reserve', { quota_key_id: req.quotaKeyId, operation_key: req.operationKey, endpoint: req.endpoint, tokens, hold_ms: Math.round(req.holdMs) });
  } finally {
    room.asking -= tokens;
    holdsInFlight.set(db, holdsBeingMade(db) - 1);
  }
  if (r.remaining !== null) Object.assign(room, { remaining: Number(r.remaining), at: performance.now() });
  else room.at = -Infinity;
  if (r.outcome === 'revoked') throw new AppError('invalid_api_key', 'invalid quota API key');
  if (r.outcome === 'exhausted') throw await exhausted(db, req.quotaKeyId, tokens, BigInt(r.token_amount!), BigInt(r.remaining!));
  return { operationKey: req.operationKey, quotaKeyId: req.quotaKeyId, endpoint: req.endpoint, tokens };
}

/**
 * The 429 of a hold that does not fit. Only the requests of the key in flight may give room back
 * (they settle for what they used, at most what they hold); when the tokens nobody holds cannot
 * cover the request either, no retry can pass, and the answer says so to OpenAI clients
 * (`x-should-retry: false`), which otherwise retry a 429 on their own. The tokens nobody holds are
 * read only on this path, so an admitted request pays no extra round trip.
 */
async function exhausted(db: Db, quotaKeyId: string, tokens: number, amount: bigint, remaining: bigint): Promise<AppError> {
  const { rows } = await db.pool.query<{ unheld: string }>('SELECT "tokenAmount" - "tokensConsumed" AS unheld FROM quota_keys WHERE id = $1', [quotaKeyId]);
  const unheld = BigInt(rows[0]?.unheld ?? 0);
  const left = (n: bigint) => (n > 0n ? n : 0n);
  if (BigInt(tokens) > unheld) {
    const message =
      unheld <= 0n
        ? `quota exhausted: this key's ${amount} tokens are used up`
        : `quota exhausted: the request needs up to ${tokens} tokens (estimated input + output limit), ${unheld} of ${amount} remain; lower the output limit`;
    return new AppError('quota_exceeded', message, { quota_remaining: Number(left(remaining)), retry: false }, 429);
  }
  return new AppError(
    'quota_exceeded',
    `quota exhausted for now: the request needs up to ${tokens} tokens (estimated input + output limit), ${left(remaining)} of ${amount} remain while ${unheld - left(remaining)} are held by this key's requests in flight; retry when they have finished`,
    { quota_remaining: Number(left(remaining)) },
    429,
  );
}

/**
 * Records the used tokens once (null: unknown usage, charged the whole hold), durably. The
 * conditional status change makes a repeat a no-op; hold and consumption change in one commit, and
 * the key row update waits for any admission holding the key's lock, so admissions see both or
 * neither. Given the hold, a hold lost in a database crash is charged all the same. A hold drawn
 * from an escrow slice has no row of its own: it is recorded settled, and the slice gives up what it
 * held, in the same transaction.
 */
export async function settleQuota(db: Db, hold: QuotaHold | { operationKey: string }, usedTokens: number | null): Promise<'settled' | 'already_resolved'> {
  const used = usedTokens == null ? null : Math.max(0, Math.trunc(usedTokens));
  const full = 'quotaKeyId' in hold ? hold : null;
  const settlement = batchers(db).settle.submit('settle', {
    operation_key: hold.operationKey,
    used,
    quota_key_id: full?.quotaKeyId ?? null,
    held: full?.tokens ?? null,
    endpoint: full?.endpoint ?? null,
    ...(full?.escrow ? { escrow: full.escrow } : {}),
  });
  if (full) trackSettlement(db, full.quotaKeyId, settlement);
  return settlement;
}

/** Drops a hold the model never used; one drawn from an escrow slice goes back to the key. */
export async function releaseHold(db: Db, hold: QuotaHold): Promise<void> {
  if (hold.escrow) await returnToSlice(db, hold.escrow, hold.tokens);
  else await releaseQuota(db, hold.operationKey);
}

export async function releaseQuota(db: Db, operationKey: string): Promise<void> {
  await db.pool.query(`UPDATE quota_reservations SET status = 'released', "resolvedAt" = now() WHERE "operationKey" = $1 AND status = 'pending'`, [operationKey]);
}
