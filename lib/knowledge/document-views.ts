import type { Document, Folder } from '../../generated/prisma/client.js';
import type { Db } from '../platform/db.js';
import { Prisma } from '../platform/db.js';
import { badRequest } from '../platform/errors.js';
import { budgetStatus, usageTotals, type UsageTotals } from '../budget/status.js';
import { describeKnowledgeBase } from './knowledge-bases.js';
import { findKnowledgeBase } from './lookup.js';
import { presentDocument } from './presenters.js';

/**
 * Read models of a knowledge base's documents (spec 4.3 and 2.6). Each listing costs a constant
 * number of queries whatever the document count: the page of documents (without the columns no
 * listing shows), their usage in one grouped query, the KB's folders once, and one aggregate
 * statement for the embedding counts. Listings are in creation order (then id); `limit` and `cursor`
 * page through them (docs/api/knowledge-bases.md, "Document listings"); without them the whole list
 * is answered.
 */
export interface ListingPage {
  /** At most this many documents (1-1000); absent: all of them. */
  limit?: number;
  /** The `next_cursor` of the previous page. */
  cursor?: string;
}

interface CursorPosition {
  createdAt: Date;
  id: string;
}

const encodeCursor = (d: CursorPosition) => Buffer.from(`${d.createdAt.toISOString()}|${d.id}`).toString('base64url');

function decodeCursor(cursor: string): CursorPosition {
  const [at, id, extra] = Buffer.from(cursor, 'base64url').toString().split('|');
  const createdAt = new Date(at ?? '');
  if (extra !== undefined || !id || !/^[0-9a-f-]{36}$/i.test(id) || Number.isNaN(createdAt.getTime())) throw badRequest('cursor is not one this listing gave (use next_cursor as it was answered)');
  return { createdAt, id };
}

const usageOf = (rows: Array<{ category: string; _count: { _all: number; costUsd: number }; _sum: { costUsd: { toString(): string } | null } }>): UsageTotals => {
  const totals: UsageTotals = { event_count: 0, priced_event_count: 0, unpriced_event_count: 0, cost_usd_total: 0, rewrite_event_count: 0, digitization_event_count: 0 };
  let cost = new Prisma.Decimal(0);
  for (const r of rows) {
    totals.event_count += r._count._all;
    totals.priced_event_count += r._count.costUsd;
    totals.unpriced_event_count += r._count._all - r._count.costUsd;
    cost = cost.plus(r._sum.costUsd?.toString() ?? 0);
    if (r.category === 'rewrite') totals.rewrite_event_count += r._count._all;
    if (r.category === 'digitization') totals.digitization_event_count += r._count._all;
  }
  totals.cost_usd_total = Number(cost.toFixed(8));
  return totals;
};

/**
 * A page of the KB's documents, each with its `lifetime_usage` (the same totals as usageTotals of
 * lib/budget/status.ts, grouped for all the page's documents in one query).
 */
async function documentsWithUsage(db: Db, knowledgeBaseId: string, admin: boolean, page: ListingPage, folders: Promise<Folder[]>) {
  const after = page.cursor ? decodeCursor(page.cursor) : null;
  const take = page.limit;
  const docs = await db.document.findMany({
    where: {
      knowledgeBaseId,
      ...(after ? { OR: [{ createdAt: { gt: after.createdAt } }, { createdAt: after.createdAt, id: { gt: after.id } }] } : {}),
    },
    omit: { pipelineRequest: true, embeddingManifest: true },
    orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
    ...(take !== undefined ? { take: take + 1 } : {}),
  });
  const more = take !== undefined && docs.length > take;
  if (more) docs.length = take;
  const whole = !after && take === undefined;
  const [usage, folderRows] = await Promise.all([
    docs.length === 0
      ? []
      : db.usageEvent.groupBy({
          by: ['documentId', 'category'],
          // The whole list reads the KB's events by their KB index; a page, its documents'.
          where: whole ? { knowledgeBaseId } : { documentId: { in: docs.map((d) => d.id) } },
          _count: { _all: true, costUsd: true },
          _sum: { costUsd: true },
        }),
    folders,
  ]);
  const byDocument = new Map<string, typeof usage>();
  for (const u of usage) if (u.documentId) byDocument.set(u.documentId, [...(byDocument.get(u.documentId) ?? []), u]);
  const folderById = new Map(folderRows.map((f) => [f.id, f]));
  const documents = docs.map((d) => presentDocument({ ...d, folder: folderById.get(d.folderId)! } as Document & { folder: Folder }, { admin, usage: usageOf(byDocument.get(d.id) ?? []) }));
  const last = docs.at(-1);
  return { documents, ...(take !== undefined || after ? { next_cursor: more && last ? encodeCursor(last) : null } : {}) };
}

/** Aggregate embedding info of a KB (the counting part of spec 2.6's embedding status), in one statement. */
async function embeddingSummary(db: Db, kb: { id: string; embeddingStatus: string; deletionRequestedAt: Date | null }) {
  const [row] = await db.$queryRaw<Array<{ eligible: number; pending: number; failed: number; embedded: number; chunks: bigint | null; last: Date | null }>>`
    SELECT count(*) FILTER (WHERE "fileRewritten" IS NOT NULL)::int AS eligible,
           count(*) FILTER (WHERE "embeddingStatus" IN ('pending', 'in_progress'))::int AS pending,
           count(*) FILTER (WHERE "embeddingStatus" = 'failed')::int AS failed,
           count(*) FILTER (WHERE "embeddingStatus" = 'success')::int AS embedded,
           sum("embeddingChunkCount") AS chunks,
           max("embeddedAt") AS last
    FROM "documents" WHERE "knowledgeBaseId" = ${kb.id}::uuid AND "deletionRequestedAt" IS NULL`;
  return {
    embedding_status: kb.deletionRequestedAt ? 'delete_pending' : kb.embeddingStatus,
    eligible_document_count: row!.eligible,
    pending_document_count: row!.pending,
    failed_document_count: row!.failed,
    embedded_document_count: row!.embedded,
    chunk_count: Number(row!.chunks ?? 0),
    last_successful_update_time: row!.last ? new Date(row!.last).toISOString() : null,
  };
}

/** Spec 2.6 statistics, in one statement. A budget block is not an error (spec, Errors): error_count leaves it out. */
async function knowledgeBaseStats(db: Db, knowledgeBaseId: string) {
  const [row] = await db.$queryRaw<Array<Record<string, number | bigint | null>>>`
    SELECT count(*)::int AS document_count,
           count(*) FILTER (WHERE "fileDigitized" IS NOT NULL)::int AS digitized_count,
           count(*) FILTER (WHERE "fileRewrittenDraft" IS NOT NULL)::int AS draft_rewrite_count,
           count(*) FILTER (WHERE "fileRewritten" IS NOT NULL)::int AS final_rewrite_count,
           sum("digitizedCharCount") AS total_digitized_chars,
           sum("draftRewriteCharCount") AS total_draft_rewrite_chars,
           sum("finalRewriteCharCount") AS total_final_rewrite_chars,
           count(*) FILTER (WHERE "processingState" = 'failed' OR "embeddingStatus" = 'failed')::int AS error_count,
           count(*) FILTER (WHERE "embeddingStatus" = 'success')::int AS embedded_count
    FROM "documents" WHERE "knowledgeBaseId" = ${knowledgeBaseId}::uuid AND "deletionRequestedAt" IS NULL`;
  const n = (k: string) => Number(row![k] ?? 0);
  return {
    document_count: n('document_count'),
    digitized_count: n('digitized_count'),
    draft_rewrite_count: n('draft_rewrite_count'),
    final_rewrite_count: n('final_rewrite_count'),
    total_digitized_chars: n('total_digitized_chars'),
    total_draft_rewrite_chars: n('total_draft_rewrite_chars'),
    total_final_rewrite_chars: n('total_final_rewrite_chars'),
    error_count: n('error_count'),
    embedded_count: n('embedded_count'),
  };
}

export async function listKnowledgeBaseDocuments(db: Db, partner: string, kbName: string, admin: boolean, page: ListingPage = {}) {
  const { kb } = await findKnowledgeBase(db, partner, kbName);
  const folders = db.folder.findMany({ where: { knowledgeBaseId: kb.id } });
  const [knowledgeBase, listing, embedding_info] = await Promise.all([describeKnowledgeBase(db, kb), documentsWithUsage(db, kb.id, admin, page, folders), embeddingSummary(db, kb)]);
  return { ...knowledgeBase, ...listing, embedding_info };
}

/** The parts of the combined data that layers above this one supply. */
export interface CombinedDataSources {
  /** The entries of the KB's video-channel folders (lib/channels). */
  folderDetails(knowledgeBaseId: string): Promise<unknown[]>;
  /** The public vendor-sync summary (lib/vendor-sync), asked only for a partner with sync enabled. */
  vendorSync(knowledgeBaseId: string): Promise<object>;
}

/** The combined data of spec 2.6; `vendor_sync` only for a partner with vendor sync enabled. */
export async function combinedKnowledgeBaseData(db: Db, partner: string, kbName: string, admin: boolean, sources: CombinedDataSources, page: ListingPage = {}) {
  const { kb, partner: owner } = await findKnowledgeBase(db, partner, kbName);
  const allFolders = db.folder.findMany({ where: { knowledgeBaseId: kb.id }, orderBy: { name: 'asc' } });
  const [listing, folders, embedding_info, budget, usage_totals, folder_details, vendor_sync] = await Promise.all([
    documentsWithUsage(db, kb.id, admin, page, allFolders),
    allFolders,
    embeddingSummary(db, kb),
    budgetStatus(db, kb.id),
    usageTotals(db, { knowledgeBaseId: kb.id }),
    sources.folderDetails(kb.id),
    owner.vendorSyncEnabled ? sources.vendorSync(kb.id) : null,
  ]);
  return {
    name: kb.name,
    ...listing,
    folders: folders.filter((f) => !f.deletionRequestedAt).map((f) => f.name),
    pending_folder_deletions: folders.filter((f) => f.deletionRequestedAt).map((f) => ({ name: f.name, deletion_requested_at: f.deletionRequestedAt!.toISOString() })),
    embedding_info,
    budget,
    folder_details,
    usage_totals,
    quota_info: null,
    ...(vendor_sync ? { vendor_sync } : {}),
    deletion_requested_at: kb.deletionRequestedAt?.toISOString() ?? null,
  };
}

export async function kbStats(db: Db, partner: string, kbName: string) {
  const { kb } = await findKnowledgeBase(db, partner, kbName);
  return knowledgeBaseStats(db, kb.id);
}
