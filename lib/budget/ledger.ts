import type { Db } from '../db.js';
import { Prisma } from '../db.js';

/**
 * Knowledge-base budget admission, modelled on two-phase transfers: `reserve` holds a verified
 * bound of capacity before an operation is dispatched, `settle` records the actual usage once and
 * releases the rest, `release` returns an unused hold. Every decision is taken under a lock on the
 * KB row (SELECT ... FOR UPDATE), so concurrent admissions serialise per KB and
 * consumed + reserved never exceeds a limit. Each operation key is admitted, settled or released at
 * most once: repeating a call (a retried activity) returns the first answer.
 */
const Decimal = Prisma.Decimal;
type Decimal = Prisma.Decimal;

export type Category = 'digitization' | 'rewrite' | 'embedding' | 'discovery' | 'other';

export interface Bound {
  characters?: number;
  tokens?: number;
  /** Decimal string, exact. */
  dollars?: string;
}

export interface ReserveRequest {
  knowledgeBaseId: string;
  operationKey: string;
  workflowId: string;
  documentId?: string | null;
  category: Category;
  bound: Bound;
  /** Request-level character cap: the smaller of it and the KB limit applies. */
  requestCharacterLimit?: number | null;
}

export type BlockReason =
  | 'character_limit_exhausted'
  | 'token_limit_exhausted'
  | 'dollar_limit_exhausted'
  | 'request_character_limit'
  | 'unknown_historical_usage'
  | 'unresolved_provider_outcome';

export type ReserveResult =
  | { admitted: true; reservationId: string }
  | { admitted: false; reason: BlockReason; detail: string };

export interface ActualUsage {
  characters?: number;
  inputTokens?: number | null;
  outputTokens?: number | null;
  /** Null or omitted: unpriced. */
  costUsd?: string | null;
  model?: string | null;
  fallback?: boolean;
  rejected?: boolean;
}

type Tx = Prisma.TransactionClient;

interface Totals {
  characters: bigint;
  tokens: bigint;
  dollars: Decimal;
}

async function lockKnowledgeBase(tx: Tx, knowledgeBaseId: string) {
  const rows = await tx.$queryRaw<Array<{ id: string }>>`SELECT id FROM knowledge_bases WHERE id = ${knowledgeBaseId}::uuid FOR UPDATE`;
  if (rows.length === 0) throw new Error(`knowledge base ${knowledgeBaseId} does not exist`);
  return tx.knowledgeBase.findUniqueOrThrow({ where: { id: knowledgeBaseId } });
}

/** Holds of pending and uncertain reservations: an uncertain operation may have used its whole bound. */
async function outstanding(tx: Tx, knowledgeBaseId: string): Promise<Totals & { uncertain: number }> {
  const rows = await tx.budgetReservation.groupBy({
    by: ['status'],
    where: { knowledgeBaseId, status: { in: ['pending', 'uncertain'] } },
    _sum: { characters: true, tokens: true, dollars: true },
    _count: { _all: true },
  });
  const totals = { characters: 0n, tokens: 0n, dollars: new Decimal(0), uncertain: 0 };
  for (const r of rows) {
    totals.characters += r._sum.characters ?? 0n;
    totals.tokens += r._sum.tokens ?? 0n;
    totals.dollars = totals.dollars.plus(r._sum.dollars ?? 0);
    if (r.status === 'uncertain') totals.uncertain += r._count._all;
  }
  return totals;
}

async function unknownEvents(tx: Tx, knowledgeBaseId: string): Promise<number> {
  return tx.usageEvent.count({ where: { knowledgeBaseId, OR: [{ inputTokens: null }, { outputTokens: null }], category: { not: 'digitization' } } });
}

const boundOf = (b: Bound) => ({
  characters: BigInt(Math.max(0, Math.trunc(b.characters ?? 0))),
  tokens: BigInt(Math.max(0, Math.trunc(b.tokens ?? 0))),
  dollars: Decimal.max(new Decimal(b.dollars ?? 0), 0),
});

export async function reserve(db: Db, req: ReserveRequest): Promise<ReserveResult> {
  return db.$transaction(async (tx) => {
    const kb = await lockKnowledgeBase(tx, req.knowledgeBaseId);
    const existing = await tx.budgetReservation.findUnique({ where: { operationKey: req.operationKey } });
    if (existing) return { admitted: true, reservationId: existing.id };

    const bound = boundOf(req.bound);
    const held = await outstanding(tx, kb.id);
    const capped = kb.characterLimit !== null || kb.tokenLimit !== null || kb.dollarLimitUsd !== null || req.requestCharacterLimit != null;
    const wants = { characters: bound.characters > 0n, tokens: bound.tokens > 0n, dollars: bound.dollars.gt(0) };

    if (capped && held.uncertain > 0 && (wants.tokens || wants.dollars || wants.characters)) {
      return { admitted: false, reason: 'unresolved_provider_outcome', detail: `${held.uncertain} operation(s) with an unresolved provider outcome` };
    }
    if ((wants.tokens && kb.tokenLimit !== null) || (wants.dollars && kb.dollarLimitUsd !== null)) {
      const unknown = await unknownEvents(tx, kb.id);
      if (unknown > 0) return { admitted: false, reason: 'unknown_historical_usage', detail: `${unknown} usage event(s) with unknown usage` };
    }
    if (wants.characters) {
      const after = kb.charactersConsumed + held.characters + bound.characters;
      const kbFits = kb.characterLimit === null || after <= kb.characterLimit;
      const requestFits = req.requestCharacterLimit == null || after <= BigInt(req.requestCharacterLimit);
      if (!kbFits) {
        const remaining = kb.characterLimit! - kb.charactersConsumed - held.characters;
        return { admitted: false, reason: 'character_limit_exhausted', detail: `needs ${bound.characters} characters, ${remaining > 0n ? remaining : 0n} remaining of ${kb.characterLimit}` };
      }
      if (!requestFits) {
        return { admitted: false, reason: 'request_character_limit', detail: `needs ${after} characters in total, the request allows ${req.requestCharacterLimit}` };
      }
    }
    if (wants.tokens && kb.tokenLimit !== null && kb.tokensConsumed + held.tokens + bound.tokens > kb.tokenLimit) {
      return { admitted: false, reason: 'token_limit_exhausted', detail: `needs ${bound.tokens} tokens, ${clamp(kb.tokenLimit - kb.tokensConsumed - held.tokens)} remaining of ${kb.tokenLimit}` };
    }
    if (wants.dollars && kb.dollarLimitUsd !== null && kb.dollarsConsumed.plus(held.dollars).plus(bound.dollars).gt(kb.dollarLimitUsd)) {
      const remaining = Decimal.max(kb.dollarLimitUsd.minus(kb.dollarsConsumed).minus(held.dollars), 0);
      return { admitted: false, reason: 'dollar_limit_exhausted', detail: `needs $${bound.dollars.toFixed()}, $${remaining.toFixed()} remaining of $${kb.dollarLimitUsd.toFixed()}` };
    }
    const created = await tx.budgetReservation.create({
      data: {
        knowledgeBaseId: kb.id,
        operationKey: req.operationKey,
        workflowId: req.workflowId,
        documentId: req.documentId ?? null,
        category: req.category,
        characters: bound.characters,
        tokens: bound.tokens,
        dollars: bound.dollars,
      },
    });
    return { admitted: true, reservationId: created.id };
  });
}

const clamp = (n: bigint) => (n > 0n ? n : 0n);

export type SettleOutcome = 'settled' | 'uncertain' | 'already_resolved' | 'unknown_operation';

/**
 * Records the actual usage of an admitted operation exactly once and releases the rest of its
 * hold. Missing token counts make the operation uncertain instead: it keeps its hold, is counted
 * in uncertain_operations and blocks capped work until an operator resolves it.
 * `usageOrReader` may read state inside the transaction; `onSettle` runs in the same transaction
 * (e.g. to record the document's accepted characters).
 */
export async function settle(
  db: Db,
  operationKey: string,
  usageOrReader: ActualUsage | ((tx: Tx) => Promise<ActualUsage>),
  onSettle?: (tx: Tx) => Promise<void>,
): Promise<SettleOutcome> {
  return db.$transaction(async (tx) => {
    const found = await tx.budgetReservation.findUnique({ where: { operationKey } });
    if (!found) return 'unknown_operation';
    await lockKnowledgeBase(tx, found.knowledgeBaseId);
    const r = await tx.budgetReservation.findUniqueOrThrow({ where: { operationKey } });
    if (r.status !== 'pending' && r.status !== 'uncertain') return 'already_resolved';
    // Read under the KB lock, so usage that depends on current state (a character delta) is exact.
    const usage = typeof usageOrReader === 'function' ? await usageOrReader(tx) : usageOrReader;
    const tokensKnown = r.category === 'digitization' || (usage.inputTokens != null && usage.outputTokens != null);
    if (!tokensKnown && r.status === 'pending') {
      await tx.budgetReservation.update({ where: { id: r.id }, data: { status: 'uncertain', note: 'provider usage missing' } });
      return 'uncertain';
    }
    await recordUsage(tx, r, usage);
    if (onSettle) await onSettle(tx);
    return 'settled';
  });
}

async function recordUsage(tx: Tx, r: { id: string; knowledgeBaseId: string; operationKey: string; documentId: string | null; category: string }, usage: ActualUsage) {
  const tokens = BigInt((usage.inputTokens ?? 0) + (usage.outputTokens ?? 0));
  const cost = usage.costUsd == null ? null : new Decimal(usage.costUsd);
  const characters = BigInt(Math.trunc(usage.characters ?? 0));
  await tx.usageEvent.create({
    data: {
      knowledgeBaseId: r.knowledgeBaseId,
      documentId: r.documentId,
      operationKey: r.operationKey,
      category: r.category,
      model: usage.model ?? null,
      fallback: usage.fallback ?? false,
      rejected: usage.rejected ?? false,
      characters,
      inputTokens: usage.inputTokens == null ? null : BigInt(usage.inputTokens),
      outputTokens: usage.outputTokens == null ? null : BigInt(usage.outputTokens),
      costUsd: cost,
    },
  });
  await tx.knowledgeBase.update({
    where: { id: r.knowledgeBaseId },
    data: {
      charactersConsumed: { increment: characters },
      tokensConsumed: { increment: tokens },
      ...(cost ? { dollarsConsumed: { increment: cost } } : {}),
    },
  });
  await tx.budgetReservation.update({ where: { id: r.id }, data: { status: 'settled', resolvedAt: new Date() } });
}

/**
 * The provider's outcome is unknown (a timeout, a lost worker): the operation keeps its whole hold
 * and blocks capped work until an operator resolves it. Idempotent.
 */
export async function markUncertain(db: Db, operationKey: string, note: string): Promise<boolean> {
  const res = await db.budgetReservation.updateMany({ where: { operationKey, status: 'pending' }, data: { status: 'uncertain', note } });
  return res.count > 0;
}

/** Returns an unused hold (the operation failed or never ran). Idempotent. */
export async function release(db: Db, operationKey: string, note = 'released'): Promise<boolean> {
  const res = await db.budgetReservation.updateMany({ where: { operationKey, status: 'pending' }, data: { status: 'released', note, resolvedAt: new Date() } });
  return res.count > 0;
}

/**
 * Operator resolution of an uncertain operation: either the actual usage is known (settle) or the
 * operation used nothing (release).
 */
export async function resolveUncertain(db: Db, operationKey: string, resolution: { used: false } | ({ used: true } & ActualUsage)): Promise<'resolved' | 'not_uncertain'> {
  return db.$transaction(async (tx) => {
    const found = await tx.budgetReservation.findUnique({ where: { operationKey } });
    if (!found) return 'not_uncertain';
    await lockKnowledgeBase(tx, found.knowledgeBaseId);
    const r = await tx.budgetReservation.findUniqueOrThrow({ where: { operationKey } });
    if (r.status !== 'uncertain') return 'not_uncertain';
    if (!resolution.used) {
      await tx.budgetReservation.update({ where: { id: r.id }, data: { status: 'released', note: 'resolved: nothing used', resolvedAt: new Date() } });
    } else {
      await recordUsage(tx, r, resolution);
    }
    return 'resolved';
  });
}

/**
 * Frees a document's accepted characters (its content was deleted or replaced by less). Tokens and
 * dollars are lifetime and never refunded.
 */
export async function releaseDocumentCharacters(db: Db, documentId: string): Promise<void> {
  await db.$transaction(async (tx) => {
    const doc = await tx.document.findUnique({ where: { id: documentId } });
    if (!doc || doc.acceptedCharacters === 0) return;
    await lockKnowledgeBase(tx, doc.knowledgeBaseId);
    const current = await tx.document.findUniqueOrThrow({ where: { id: documentId } });
    await tx.knowledgeBase.update({ where: { id: current.knowledgeBaseId }, data: { charactersConsumed: { decrement: BigInt(current.acceptedCharacters) } } });
    await tx.document.update({ where: { id: documentId }, data: { acceptedCharacters: 0 } });
  });
}

export const lockedKnowledgeBase = lockKnowledgeBase;
