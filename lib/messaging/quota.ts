import type { Db } from '../db.js';
import { AppError } from '../errors.js';
import { countTokens } from '../kb/tokens.js';

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

/**
 * Tokens to hold for a text: its o200k token count plus 10 % and a little framing (another
 * tokenizer may count more), and never less than ⌈characters / 4⌉. A plain characters / 4 estimate
 * would under-hold scripts such as Chinese or Japanese, where one character is about one token.
 */
export const estimateTokens = (text: string) => Math.max(Math.ceil(text.length / 4), Math.ceil(countTokens(text) * 1.1) + 16);

/** Waits for the key's row lock in line with the provider timeout rather than Prisma's 2 s default. */
const txOptions = { maxWait: 60_000, timeout: 60_000 };

export async function reserveQuota(
  db: Db,
  req: { quotaKeyId: string; operationKey: string; endpoint: string; tokens: number; holdMs: number },
): Promise<QuotaHold> {
  const tokens = BigInt(Math.max(1, Math.ceil(req.tokens)));
  return db.$transaction(async (tx) => {
    // Few statements under the lock: admissions of one key run one after another.
    const [key] = await tx.$queryRaw<Array<{ tokenAmount: bigint; tokensConsumed: bigint; revokedAt: Date | null }>>`
      SELECT "tokenAmount", "tokensConsumed", "revokedAt" FROM quota_keys WHERE id = ${req.quotaKeyId}::uuid FOR UPDATE`;
    if (!key || key.revokedAt) throw new AppError('invalid_api_key', 'invalid quota API key');
    const held = await tx.quotaReservation.aggregate({
      where: { quotaKeyId: req.quotaKeyId, status: 'pending', expiresAt: { gt: new Date() } },
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
      data: { quotaKeyId: req.quotaKeyId, operationKey: req.operationKey, endpoint: req.endpoint, tokens, expiresAt: new Date(Date.now() + req.holdMs) },
    });
    return { operationKey: req.operationKey, tokens: Number(tokens) };
  }, txOptions);
}

/**
 * Records the used tokens once (null: unknown usage, charged the whole hold). The conditional
 * status change makes a repeat a no-op; hold and consumption change in one commit, and the key
 * row update waits for any admission holding the key's lock, so admissions see both or neither.
 */
export async function settleQuota(db: Db, operationKey: string, usedTokens: number | null): Promise<'settled' | 'already_resolved'> {
  return db.$transaction(async (tx) => {
    const known = usedTokens == null ? null : BigInt(Math.max(0, Math.trunc(usedTokens)));
    const rows = await tx.$queryRaw<Array<{ quotaKeyId: string; used: bigint }>>`
      UPDATE quota_reservations SET status = 'settled', "usedTokens" = COALESCE(${known}::bigint, tokens), "resolvedAt" = now()
      WHERE "operationKey" = ${operationKey} AND status = 'pending'
      RETURNING "quotaKeyId", "usedTokens" AS used`;
    const r = rows[0];
    if (!r) return 'already_resolved';
    await tx.$executeRaw`UPDATE quota_keys SET "tokensConsumed" = "tokensConsumed" + ${r.used}, "lastUsedAt" = now() WHERE id = ${r.quotaKeyId}::uuid`;
    return 'settled';
  }, txOptions);
}

export async function releaseQuota(db: Db, operationKey: string): Promise<void> {
  await db.quotaReservation.updateMany({ where: { operationKey, status: 'pending' }, data: { status: 'released', resolvedAt: new Date() } });
}
