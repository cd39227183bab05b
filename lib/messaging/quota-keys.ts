import crypto from 'node:crypto';
import { Prisma, type Db } from '../platform/db.js';
import { hashKey } from '../platform/api-keys.js';
import { GroupCommit } from '../platform/group-commit.js';
import { RecentLookups } from '../platform/recent-lookups.js';
import { AppError, badRequest, notFound } from '../platform/errors.js';
import { forgetEscrow, lendableOnKey } from './quota-escrow.js';

/**
 * Quota-bound keys of the messaging interface. A key carries a quota type (which generation
 * endpoints it opens) and an amount: a lifetime allowance of model tokens (input + output, as the
 * provider reports them; for speech, the o200k tokens of the input text). Keys are shown once at
 * creation; only their SHA-256 is stored.
 */
export const quotaTypes = ['chat', 'responses', 'legacy', 'speech', 'any'] as const;
export type QuotaType = (typeof quotaTypes)[number];

/** The endpoints a quota key opens, each by its own quota type (and by `any`); `speech` is /v2/audio/speech. */
export type MessagingEndpoint = 'chat' | 'responses' | 'legacy' | 'speech';

export interface QuotaKeyPrincipal {
  id: string;
  name: string;
  quotaType: QuotaType;
  partnerId: string | null;
  partnerName: string | null;
  /**
   * Whether a lookup or an admission found the key active within MESSAGING_KEY_CACHE_SECONDS. A key
   * served past that (`authenticateQuotaKey`'s `admittedInDatabase`) is not: only an admission in the
   * database, which reads the key's row again, may serve it.
   */
  verified: boolean;
}

const generateQuotaKey = () => `qk_${crypto.randomBytes(32).toString('base64url')}`;

export interface CreateQuotaKeyRequest {
  name: string;
  quota_type: QuotaType;
  token_amount: number;
  partner?: string | null;
}

type QuotaKeyRow = {
  id: string;
  name: string;
  keyPrefix: string;
  quotaType: string;
  tokenAmount: bigint;
  tokensConsumed: bigint;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
  createdAt: Date;
  partnerId: string | null;
};

async function partnerNames(db: Db, ids: Array<string | null>): Promise<Map<string, string>> {
  const wanted = [...new Set(ids.filter((x): x is string => !!x))];
  const rows = wanted.length ? await db.partner.findMany({ where: { id: { in: wanted } }, select: { id: true, name: true } }) : [];
  return new Map(rows.map((r) => [r.id, r.name]));
}

/** The public view of a key (never the key itself); `reserved` counts live holds. */
function present(row: QuotaKeyRow, partner: string | null, reserved: bigint) {
  const remaining = row.tokenAmount - row.tokensConsumed - reserved;
  return {
    id: row.id,
    name: row.name,
    key_prefix: row.keyPrefix,
    quota_type: row.quotaType,
    unit: 'tokens',
    period: 'lifetime',
    token_amount: Number(row.tokenAmount),
    tokens_consumed: Number(row.tokensConsumed),
    tokens_reserved: Number(reserved),
    tokens_remaining: Number(remaining > 0n ? remaining : 0n),
    partner,
    status: row.revokedAt ? 'revoked' : 'active',
    revoked_at: row.revokedAt?.toISOString() ?? null,
    last_used_at: row.lastUsedAt?.toISOString() ?? null,
    created_at: row.createdAt.toISOString(),
  };
}

async function liveHolds(db: Prisma.TransactionClient, keyIds: string[]): Promise<Map<string, bigint>> {
  if (keyIds.length === 0) return new Map();
  const rows = await db.quotaReservation.groupBy({
    by: ['quotaKeyId'],
    where: { quotaKeyId: { in: keyIds }, status: 'pending', expiresAt: { gt: new Date() } },
    _sum: { tokens: true },
  });
  return new Map(rows.map((r) => [r.quotaKeyId, r._sum.tokens ?? 0n]));
}

export async function createQuotaKey(db: Db, req: CreateQuotaKeyRequest) {
  let partnerId: string | null = null;
  if (req.partner) {
    const p = await db.partner.findUnique({ where: { name: req.partner } });
    if (!p) throw badRequest(`partner ${JSON.stringify(req.partner)} does not exist`);
    partnerId = p.id;
  }
  const key = generateQuotaKey();
  const row = await db.quotaKey.create({
    data: { name: req.name, keyHash: hashKey(key), keyPrefix: key.slice(0, 10), quotaType: req.quota_type, tokenAmount: BigInt(req.token_amount), partnerId },
  });
  return { ...present(row, req.partner ?? null, 0n), api_key: key };
}

/**
 * Keys and their live holds read in one snapshot: a settlement moves a hold's tokens to the key's
 * consumption in one commit, and two separate reads could see neither side of it.
 */
function keysWithHolds(db: Db, where: Prisma.QuotaKeyWhereInput) {
  return db.$transaction(
    async (tx) => {
      const rows = await tx.quotaKey.findMany({ where, orderBy: { createdAt: 'asc' } });
      return { rows, holds: await liveHolds(tx, rows.map((r) => r.id)) };
    },
    { isolationLevel: Prisma.TransactionIsolationLevel.RepeatableRead },
  );
}

export async function listQuotaKeys(db: Db) {
  const { rows, holds } = await keysWithHolds(db, {});
  const names = await partnerNames(db, rows.map((r) => r.partnerId));
  return rows.map((r) => present(r, r.partnerId ? names.get(r.partnerId) ?? null : null, holds.get(r.id) ?? 0n));
}

async function getQuotaKey(db: Db, id: string) {
  const { rows: [row], holds } = await keysWithHolds(db, { id });
  if (!row) throw notFound(`quota key ${id} not found`);
  const names = await partnerNames(db, [row.partnerId]);
  return present(row, row.partnerId ? names.get(row.partnerId) ?? null : null, holds.get(row.id) ?? 0n);
}

/** Revocation is immediate and final; repeating it answers the same revoked key. */
export async function revokeQuotaKey(db: Db, id: string) {
  const found = await db.quotaKey.findUnique({ where: { id } });
  if (!found) throw notFound(`quota key ${id} not found`);
  if (!found.revokedAt) await db.quotaKey.update({ where: { id }, data: { revokedAt: new Date() } });
  principals.forget((principal) => principal.id === id);
  await forgetEscrow(db, id);
  return getQuotaKey(db, id);
}

/**
 * Keys a process has seen lately (lib/platform/recent-lookups.ts): an entry is served for at most
 * `MESSAGING_KEY_CACHE_SECONDS` after the lookup that found the key active, and a key in use is
 * looked up again in the background before that, so a busy key never waits for a lookup and a
 * revoked one is refused within that bound on every API replica. A revocation is honoured at once
 * where it counts anyway: every admission re-reads the key's row under its lock (quota_reserve) and
 * refuses a revoked key (one drawn from an escrow slice, lib/messaging/quota-escrow.ts, is refused
 * through this cache), and the replica that revokes drops its entry at once. What the bound leaves
 * open is a read that admits nothing (polling a legacy completion, listing speech voices) with a key
 * revoked on another replica, for at most that long. A /v3 generation also takes, unverified, a key
 * found active within KEY_KNOWN_SECONDS (`authenticateQuotaKey`): its admission reads the row.
 */
const KEY_KNOWN_SECONDS = 600;
const principals = new RecentLookups<QuotaKeyPrincipal>({ knownSeconds: KEY_KNOWN_SECONDS });
/** The cache entries of the keys served to admissions in the database, for them to confirm. */
const admittedHashes = new WeakMap<QuotaKeyPrincipal, string>();

type KeyRow = { keyHash: string; id: string; name: string; quotaType: string; partnerId: string | null; partnerName: string | null; revoked: boolean };

/**
 * The keys' rows and their partners' names, for the lookups that come together (group commit,
 * lib/platform/group-commit.ts): a lone lookup goes at once, and the lookups that arrive while it
 * is in flight share the next round trip. A burst of clients whose keys were idle a while (their
 * entries expired) then costs the database a few statements rather than one per key.
 */
const LOOK_UP_KEYS = `
  SELECT k."keyHash", k.id, k.name, k."quotaType", k."partnerId", p.name AS "partnerName", k."revokedAt" IS NOT NULL AS revoked
    FROM quota_keys k LEFT JOIN partners p ON p.id = k."partnerId" WHERE k."keyHash" = ANY($1::text[])`;

const lookupsOf = new WeakMap<Db, GroupCommit<'keys', string, QuotaKeyPrincipal | null>>();
function keyLookups(db: Db): GroupCommit<'keys', string, QuotaKeyPrincipal | null> {
  let batcher = lookupsOf.get(db);
  if (!batcher) {
    batcher = new GroupCommit(async (_key, hashes): Promise<Array<QuotaKeyPrincipal | null>> => {
      const { rows } = await db.pool.query<KeyRow>({ name: 'quota-keys-look-up', text: LOOK_UP_KEYS, values: [hashes] });
      const byHash = new Map(rows.map((row) => [row.keyHash, row]));
      return hashes.map((hash) => {
        const row = byHash.get(hash);
        if (!row || row.revoked) return null;
        return { id: row.id, name: row.name, quotaType: row.quotaType as QuotaType, partnerId: row.partnerId, partnerName: row.partnerName, verified: true };
      });
    });
    lookupsOf.set(db, batcher);
  }
  return batcher;
}

/** The key's row and its partner's name, or null when the key is unknown or revoked. */
const lookUpKey = (db: Db, hash: string): Promise<QuotaKeyPrincipal | null> => keyLookups(db).submit('keys', hash);

/**
 * The key's owner, or a 401 `invalid_api_key` (unknown or revoked key: the caller learns nothing
 * more). `admittedInDatabase`: the request is served only once its admission, made in the database,
 * has read the key's row again (a /v3 generation); a key this process found active within the last
 * KEY_KNOWN_SECONDS is then served at once, unverified, rather than looked up (the admission confirms or
 * refuses it, `keyAdmitted`). Many keys used a minute apart then cost one round trip less each.
 */
export async function authenticateQuotaKey(db: Db, key: string | null, cacheSeconds = 0, admittedInDatabase = false): Promise<QuotaKeyPrincipal> {
  if (!key) throw new AppError('invalid_api_key', 'missing quota API key (send Authorization: Bearer <key> or X-API-Key)');
  const hash = hashKey(key);
  const lookUp = () => lookUpKey(db, hash);
  if (admittedInDatabase) {
    // A key this process lends from an escrow slice is looked up: verified, its requests draw on the slice.
    const found = await principals.findKnown(hash, cacheSeconds, lookUp, (p) => lendableOnKey(db, p.id) === 0);
    if (found) {
      const principal = found.verified ? found.value : { ...found.value, verified: false };
      admittedHashes.set(principal, hash);
      return principal;
    }
  } else {
    const principal = await principals.find(hash, cacheSeconds, lookUp);
    if (principal) return principal;
  }
  throw new AppError('invalid_api_key', 'invalid quota API key');
}

/**
 * What a /v3 admission did with the key it was served: `held` in the database, which found it active
 * (its entry is served verified for `cacheSeconds` from now, as after a lookup); `lent` from an
 * escrow slice, which read nothing of it (an entry past half its life is looked up in the background,
 * as `find` would have); or found it `revoked` (its entry is forgotten).
 */
export function keyAdmitted(db: Db, principal: QuotaKeyPrincipal, outcome: 'held' | 'lent' | 'revoked', cacheSeconds: number): void {
  const hash = admittedHashes.get(principal);
  if (hash === undefined) return;
  if (outcome === 'held') principals.confirm(hash, cacheSeconds);
  else if (outcome === 'lent') principals.refreshIfDue(hash, cacheSeconds, () => lookUpKey(db, hash));
  else principals.forget((p) => p.id === principal.id);
}

/** Refuses a key whose quota type opens none of `endpoints` (a list: the model list serves chat and responses keys alike). */
export function assertQuotaType(principal: QuotaKeyPrincipal, endpoints: MessagingEndpoint | readonly MessagingEndpoint[]): void {
  const needed: readonly string[] = typeof endpoints === 'string' ? [endpoints] : endpoints;
  if (principal.quotaType !== 'any' && !needed.includes(principal.quotaType)) {
    throw new AppError('forbidden', `this key's quota type is ${principal.quotaType}; this endpoint needs a ${needed.join(' or ')} (or any) key`);
  }
}
