import type { Db } from '../db.js';
import { AppError } from '../errors.js';

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
  tokens: number;
}

/** ⌈characters / 4⌉: the usual rough token estimate, used only to size a hold. */
export const estimateTokens = (text: string) => Math.ceil(text.length / 4);

export async function reserveQuota(
  db: Db,
  req: { quotaKeyId: string; operationKey: string; endpoint: string; tokens: number; holdMs: number },
): Promise<QuotaHold> {
  const tokens = BigInt(Math.max(1, Math.ceil(req.tokens)));
  return db.$transaction(async (tx) => {
    await tx.$queryRaw`SELECT id FROM quota_keys WHERE id = ${req.quotaKeyId}::uuid FOR UPDATE`;
    const key = await tx.quotaKey.findUniqueOrThrow({ where: { id: req.quotaKeyId } });
    if (key.revokedAt) throw new AppError('invalid_api_key', 'invalid quota API key');
    const existing = await tx.quotaReservation.findUnique({ where: { operationKey: req.operationKey } });
    if (existing) return { operationKey: existing.operationKey, tokens: Number(existing.tokens) };
    const held = await tx.quotaReservation.aggregate({
      where: { quotaKeyId: key.id, status: 'pending', expiresAt: { gt: new Date() } },
      _sum: { tokens: true },
    });
    const remaining = key.tokenAmount - key.tokensConsumed - (held._sum.tokens ?? 0n);
    if (tokens > remaining) {
      throw new AppError(
        'quota_exceeded',
        remaining <= 0n
          ? `quota exhausted: this key's ${key.tokenAmount} tokens are used up`
          : `quota exhausted: the request needs up to ${tokens} tokens (estimated input + output limit), ${remaining} of ${key.tokenAmount} remain; lower the output limit`,
        { quota_remaining: Number(remaining > 0n ? remaining : 0n) },
        429,
      );
    }
    await tx.quotaReservation.create({
      data: { quotaKeyId: key.id, operationKey: req.operationKey, endpoint: req.endpoint, tokens, expiresAt: new Date(Date.now() + req.holdMs) },
    });
    await tx.quotaKey.update({ where: { id: key.id }, data: { lastUsedAt: new Date() } });
    return { operationKey: req.operationKey, tokens: Number(tokens) };
  });
}

/** Records the used tokens once (null: unknown usage, charged the whole hold). */
export async function settleQuota(db: Db, operationKey: string, usedTokens: number | null): Promise<'settled' | 'already_resolved' | 'unknown_operation'> {
  return db.$transaction(async (tx) => {
    const found = await tx.quotaReservation.findUnique({ where: { operationKey } });
    if (!found) return 'unknown_operation';
    await tx.$queryRaw`SELECT id FROM quota_keys WHERE id = ${found.quotaKeyId}::uuid FOR UPDATE`;
    const r = await tx.quotaReservation.findUniqueOrThrow({ where: { operationKey } });
    if (r.status !== 'pending') return 'already_resolved';
    const used = usedTokens == null ? r.tokens : BigInt(Math.max(0, Math.trunc(usedTokens)));
    await tx.quotaReservation.update({ where: { id: r.id }, data: { status: 'settled', usedTokens: used, resolvedAt: new Date() } });
    await tx.quotaKey.update({ where: { id: r.quotaKeyId }, data: { tokensConsumed: { increment: used } } });
    return 'settled';
  });
}

export async function releaseQuota(db: Db, operationKey: string): Promise<void> {
  await db.quotaReservation.updateMany({ where: { operationKey, status: 'pending' }, data: { status: 'released', resolvedAt: new Date() } });
}
