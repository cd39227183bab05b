import crypto from 'node:crypto';
import type { Db } from '../db.js';
import { hashKey } from '../auth.js';
import { AppError, badRequest, notFound } from '../errors.js';

/**
 * Quota-bound keys of the messaging interface. A key carries a quota type (which generation
 * endpoints it opens) and an amount: a lifetime allowance of model tokens (input + output, as the
 * provider reports them). Keys are shown once at creation; only their SHA-256 is stored.
 */
export const quotaTypes = ['chat', 'responses', 'legacy', 'any'] as const;
export type QuotaType = (typeof quotaTypes)[number];

/** The generation endpoints, each opened by its own quota type (and by `any`). */
export type MessagingEndpoint = 'chat' | 'responses' | 'legacy';

export interface QuotaKeyPrincipal {
  id: string;
  name: string;
  quotaType: QuotaType;
  partnerId: string | null;
  partnerName: string | null;
}

export const generateQuotaKey = () => `qk_${crypto.randomBytes(32).toString('base64url')}`;

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

async function liveHolds(db: Db, keyIds: string[]): Promise<Map<string, bigint>> {
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

export async function listQuotaKeys(db: Db) {
  const rows = await db.quotaKey.findMany({ orderBy: { createdAt: 'asc' } });
  const [names, holds] = await Promise.all([partnerNames(db, rows.map((r) => r.partnerId)), liveHolds(db, rows.map((r) => r.id))]);
  return rows.map((r) => present(r, r.partnerId ? names.get(r.partnerId) ?? null : null, holds.get(r.id) ?? 0n));
}

export async function getQuotaKey(db: Db, id: string) {
  const row = await db.quotaKey.findUnique({ where: { id } });
  if (!row) throw notFound(`quota key ${id} not found`);
  const [names, holds] = await Promise.all([partnerNames(db, [row.partnerId]), liveHolds(db, [row.id])]);
  return present(row, row.partnerId ? names.get(row.partnerId) ?? null : null, holds.get(row.id) ?? 0n);
}

/** Revocation is immediate and final; repeating it answers the same revoked key. */
export async function revokeQuotaKey(db: Db, id: string) {
  const found = await db.quotaKey.findUnique({ where: { id } });
  if (!found) throw notFound(`quota key ${id} not found`);
  if (!found.revokedAt) await db.quotaKey.update({ where: { id }, data: { revokedAt: new Date() } });
  return getQuotaKey(db, id);
}

/** The key's owner, or a 401 `invalid_api_key` (unknown or revoked key: the caller learns nothing more). */
export async function authenticateQuotaKey(db: Db, key: string | null): Promise<QuotaKeyPrincipal> {
  if (!key) throw new AppError('invalid_api_key', 'missing quota API key (send Authorization: Bearer <key> or X-API-Key)');
  const row = await db.quotaKey.findUnique({ where: { keyHash: hashKey(key) } });
  if (!row || row.revokedAt) throw new AppError('invalid_api_key', 'invalid quota API key');
  const partner = row.partnerId ? await db.partner.findUnique({ where: { id: row.partnerId }, select: { name: true } }) : null;
  return { id: row.id, name: row.name, quotaType: row.quotaType as QuotaType, partnerId: row.partnerId, partnerName: partner?.name ?? null };
}

export function assertQuotaType(principal: QuotaKeyPrincipal, endpoint: MessagingEndpoint): void {
  if (principal.quotaType !== 'any' && principal.quotaType !== endpoint) {
    throw new AppError('forbidden', `this key's quota type is ${principal.quotaType}; this endpoint needs a ${endpoint} (or any) key`);
  }
}
