import { AppError } from '../platform/errors.js';
import type { Db } from '../platform/db.js';

/**
 * A streamed /v3/responses answer with knowledge context announces its id before the provider's
 * answer starts (the knowledge search comes first), so it carries an id of ours, not the
 * provider's. Each is recorded with the provider's id of the same answer, and a later request of
 * the same key that names it as `previous_response_id` reaches the provider with the provider's.
 */
export const SERVICE_RESPONSE_PREFIX = 'resp_service_';

/** As long as the provider keeps a stored response by default (OpenAI: 30 days). */
const RETENTION_DAYS = 30;
const PRUNE_EVERY_MS = 60 * 60 * 1000;
const lastPruned = new WeakMap<Db, number>();

export async function recordResponseAlias(db: Db, alias: { serviceResponseId: string; providerResponseId: string; quotaKeyId: string }): Promise<void> {
  await db.responseAlias.create({ data: alias });
  if (Date.now() - (lastPruned.get(db) ?? 0) < PRUNE_EVERY_MS) return;
  lastPruned.set(db, Date.now());
  await db.responseAlias.deleteMany({ where: { createdAt: { lt: new Date(Date.now() - RETENTION_DAYS * 86_400_000) } } });
}

/** The id the provider knows for `previous_response_id`: ours translated, any other as it is. */
export async function providerResponseId(db: Db, quotaKeyId: string, previous: unknown): Promise<unknown> {
  if (typeof previous !== 'string' || !previous.startsWith(SERVICE_RESPONSE_PREFIX)) return previous;
  const alias = await db.responseAlias.findUnique({ where: { serviceResponseId: previous }, select: { providerResponseId: true, quotaKeyId: true } });
  // Another key's answer is as unknown to this one as an id never given.
  if (!alias || alias.quotaKeyId !== quotaKeyId) throw new AppError('bad_request', `previous_response_id ${previous} names no response of this key (ids of streamed answers are kept ${RETENTION_DAYS} days)`);
  return alias.providerResponseId;
}
