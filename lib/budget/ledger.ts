import type { Db } from '../platform/db.js';
import { Prisma } from '../platform/db.js';
import type { ActualUsage, BlockReason, Bound, ReserveRequest, ReserveResult } from '../contracts/budget-admission.js';
import { GroupCommit } from '../platform/group-commit.js';

/**
 * Knowledge-base budget admission, modelled on two-phase transfers: `reserve` holds a verified
 * bound of capacity before an operation is dispatched, `settle` records the actual usage once and
 * releases the rest, `release` returns an unused hold. Every decision is taken under a lock on the
 * KB row (SELECT ... FOR UPDATE), so concurrent admissions serialise per KB and
 * consumed + reserved never exceeds a limit. Each operation key is admitted, settled or released at
 * most once: repeating a call (a retried activity) returns the first answer.
 */
const Decimal = Prisma.Decimal;

type Tx = Prisma.TransactionClient;

/**
 * Every decision is one call of a PostgreSQL function (migrations one_round_trip_admission and
 * admission_held_counters): it locks the KB row, re-reads under the lock, decides and writes, in one
 * round trip on the pool's connection. The KB row carries what its pending and uncertain holds hold
 * (kept by a trigger on budget_reservations), so a decision costs the same however many holds the
 * KB has. Only a settlement that must read or write more in the same transaction (a manual
 * digitized update) takes a transaction of its own.
 */
export async function lockKnowledgeBase(tx: Tx, knowledgeBaseId: string): Promise<void> {
  const rows = await tx.$queryRaw<Array<{ id: string }>>`SELECT id FROM knowledge_bases WHERE id = ${knowledgeBaseId}::uuid FOR UPDATE`;
  if (rows.length === 0) throw new Error(`knowledge base ${knowledgeBaseId} does not exist`);
}

type Block = { reason: BlockReason; detail: string };

/**
 * Why the KB has no headroom at all, or null: a limit that is set and used up (consumed + held),
 * an unresolved provider outcome on a capped KB, or unknown usage under a token or dollar limit.
 * Read without the KB lock: a gate before work that feeds later paid work (channel imports), not
 * an admission; `requireHeadroom` makes the same check part of an admission.
 */
export async function checkHeadroom(db: Db, knowledgeBaseId: string): Promise<Block | null> {
  const { rows } = await db.pool.query<Block>('SELECT * FROM budget_headroom($1)', [knowledgeBaseId]);
  return rows[0] ?? null;
}

const boundOf = (b: Bound) => ({
  characters: Math.max(0, Math.trunc(b.characters ?? 0)),
  tokens: Math.max(0, Math.trunc(b.tokens ?? 0)),
  dollars: Decimal.max(new Decimal(b.dollars ?? 0), 0).toFixed(),
});

type ReserveRow = { admitted: boolean; reservation_id: string | null; reason: BlockReason | 'missing_knowledge_base' | null; detail: string | null };
type SettleItem = { operation_key: string; characters: number; input_tokens: number | null; output_tokens: number | null; cost: string | null; model: string | null; fallback: boolean; rejected: boolean };

/**
 * Admissions and settlements that arrive while a batch of their kind is in flight go together as
 * the next batch (group commit): one round trip and one WAL flush for all, each decided in order
 * under its KB's lock exactly as alone. Without it each would hold its KB's lock through its own
 * flush, and one contended KB could not pass one admission per flush. A batch is one statement, so
 * one transaction: when it fails (a request naming a document that was just deleted, say), nothing
 * of it was applied, and each request is tried again alone so that only the faulty one fails.
 */
const batchersOf = new WeakMap<Db, { reserve: GroupCommit<'reserve', object, ReserveRow>; settle: GroupCommit<'settle', SettleItem, SettleOutcome> }>();
function batchers(db: Db) {
  let b = batchersOf.get(db);
  if (!b) {
    b = {
      reserve: new GroupCommit(async (_key, items) => {
        const { rows } = await db.pool.query<ReserveRow & { idx: string }>('SELECT * FROM budget_reserve_batch($1)', [JSON.stringify(items)]);
        const byIndex = new Map<number, ReserveRow>(rows.map((r) => [Number(r.idx), r]));
        return items.map((_, i) => byIndex.get(i + 1)!);
      }, { retryAlone: true }),
      settle: new GroupCommit(async (_key, items) => {
        const { rows } = await db.pool.query<{ idx: string; outcome: SettleOutcome }>('SELECT * FROM budget_settle_batch($1)', [JSON.stringify(items)]);
        const byIndex = new Map(rows.map((r) => [Number(r.idx), r.outcome]));
        return items.map((_, i) => byIndex.get(i + 1)!);
      }, { retryAlone: true }),
    };
    batchersOf.set(db, b);
  }
  return b;
}

export async function reserve(db: Db, req: ReserveRequest): Promise<ReserveResult> {
  const bound = boundOf(req.bound);
  const r = await batchers(db).reserve.submit('reserve', {
    knowledge_base_id: req.knowledgeBaseId,
    operation_key: req.operationKey,
    workflow_id: req.workflowId,
    document_id: req.documentId ?? null,
    category: req.category,
    characters: bound.characters,
    tokens: bound.tokens,
    dollars: bound.dollars,
    request_character_limit: req.requestCharacterLimit ?? null,
    require_headroom: req.requireHeadroom ?? false,
  });
  if (r.reason === 'missing_knowledge_base') throw new Error(r.detail!);
  return r.admitted ? { admitted: true, reservationId: r.reservation_id! } : { admitted: false, reason: r.reason!, detail: r.detail! };
}

export type SettleOutcome = 'settled' | 'uncertain' | 'already_resolved' | 'unknown_operation';

const usageParams = (usage: ActualUsage) => [
  Math.trunc(usage.characters ?? 0),
  usage.inputTokens ?? null,
  usage.outputTokens ?? null,
  usage.costUsd ?? null,
  usage.model ?? null,
  usage.fallback ?? false,
  usage.rejected ?? false,
];

/**
 * Records the actual usage of an admitted operation exactly once and releases the rest of its
 * hold. Missing token counts make the operation uncertain instead: it keeps its hold, is counted
 * in uncertain_operations and blocks capped work until an operator resolves it.
 * `usageOrReader` may read state inside the transaction, under the KB lock; `onSettle` runs in the
 * same transaction (e.g. to record the document's accepted characters).
 */
export async function settle(
  db: Db,
  operationKey: string,
  usageOrReader: ActualUsage | ((tx: Tx) => Promise<ActualUsage>),
  onSettle?: (tx: Tx) => Promise<void>,
): Promise<SettleOutcome> {
  if (typeof usageOrReader !== 'function' && !onSettle) {
    const [characters, inputTokens, outputTokens, cost, model, fallback, rejected] = usageParams(usageOrReader) as [number, number | null, number | null, string | null, string | null, boolean, boolean];
    return batchers(db).settle.submit('settle', { operation_key: operationKey, characters, input_tokens: inputTokens, output_tokens: outputTokens, cost, model, fallback, rejected });
  }
  return db.$transaction(async (tx) => {
    const found = await tx.budgetReservation.findUnique({ where: { operationKey }, select: { knowledgeBaseId: true } });
    if (!found) return 'unknown_operation';
    await lockKnowledgeBase(tx, found.knowledgeBaseId);
    const usage = typeof usageOrReader === 'function' ? await usageOrReader(tx) : usageOrReader;
    const [row] = await tx.$queryRawUnsafe<Array<{ outcome: SettleOutcome }>>('SELECT budget_settle($1, $2, $3, $4, $5, $6, $7, $8) AS outcome', operationKey, ...usageParams(usage));
    if (row!.outcome === 'settled' && onSettle) await onSettle(tx);
    return row!.outcome;
  });
}

/**
 * The provider's outcome is unknown (a timeout, a lost worker): the operation keeps its whole hold
 * and blocks capped work until an operator resolves it. Idempotent.
 */
export async function markUncertain(db: Db, operationKey: string, note: string): Promise<boolean> {
  const { rows } = await db.pool.query<{ changed: boolean }>('SELECT budget_mark_uncertain($1, $2) AS changed', [operationKey, note]);
  return rows[0]!.changed;
}

/**
 * The hold of a paid provider call (`what`: "provider call", "scrape") about to be dispatched, or
 * `lost`: an attempt after the first that still finds the hold pending, with no answer kept by the
 * attempt before, cannot know whether the provider did (and billed) the work, so the operation
 * becomes uncertain (as does one found uncertain) and the call is not made again.
 */
export async function holdBeforeDispatch(db: Db, operationKey: string, attempt: number, what: string) {
  const hold = await db.budgetReservation.findUnique({ where: { operationKey } });
  if (!hold) throw new Error(`no reservation ${operationKey}: a ${what} is dispatched only after admission`);
  if (hold.status === 'uncertain' || (hold.status === 'pending' && attempt > 1)) {
    await markUncertain(db, operationKey, `the worker was lost while the ${what} was in flight`);
    return 'lost' as const;
  }
  return hold;
}

/** Returns an unused hold (the operation failed or never ran). Idempotent. */
export async function release(db: Db, operationKey: string, note = 'released'): Promise<boolean> {
  const { rows } = await db.pool.query<{ changed: boolean }>('SELECT budget_release($1, $2) AS changed', [operationKey, note]);
  return rows[0]!.changed;
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
      await tx.$executeRawUnsafe(
        'SELECT budget_record_usage(r, $2, $3, $4, $5, $6, $7, $8) FROM budget_reservations r WHERE r."operationKey" = $1',
        operationKey,
        ...usageParams(resolution),
      );
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

