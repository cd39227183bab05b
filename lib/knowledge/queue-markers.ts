import type { Prisma } from '../platform/db.js';

type Executor = Pick<Prisma.TransactionClient, '$executeRaw'>;

/**
 * A document's `in_queues` markers change in one statement each: queues are removed and appended
 * inside the UPDATE (Postgres re-evaluates it against the newest row version when it has to wait
 * for a concurrent writer), never read by the application and written back, so an activity and an
 * API request that change the markers at the same moment cannot lose each other's changes.
 *
 * `remove` queues leave the list; `add` queues move to its end (at most once each). Returns a
 * PrismaPromise, so it can join the other statements of a `$transaction([...])`.
 */
export function moveQueueMarkers(db: Executor, documentId: string, change: { remove?: readonly string[]; add?: readonly string[] }) {
  const add = [...new Set(change.add ?? [])];
  const drop = [...new Set([...(change.remove ?? []), ...add])];
  return db.$executeRaw`
    UPDATE "documents"
    SET "inQueues" = ARRAY(SELECT q FROM unnest("inQueues") WITH ORDINALITY AS m(q, i) WHERE NOT (q = ANY(${drop}::text[])) ORDER BY i) || ${add}::text[]
    WHERE "id" = ${documentId}::uuid`;
}
