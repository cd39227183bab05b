import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { Db } from '../platform/db.js';
import { conflict } from '../platform/errors.js';
import { findKnowledgeBase } from '../knowledge/lookup.js';
import { vendorSyncWorkflowId, vendorSyncWorkflowType } from '../contracts/vendor-sync.js';

/**
 * Vendor sync mirrors the final rewritten content of a partner's documents into an external vector
 * store (lib/providers/vector-store.ts), one store per knowledge base. It runs only for partners
 * with vendor_sync_enabled. Each document is synced by its own workflow `vendor-sync-<document id>`,
 * queued after every successful embedding, by backfill / retry-failed, and when a partner enables
 * sync. Document vendor_sync_status: null (never queued) → pending → synced | failed; a failed
 * document goes back to pending through retry-failed or backfill.
 */
export interface VendorSyncDeps {
  db: Db;
  temporal: Client;
  taskQueue: string;
}

/** Marks documents pending and starts their sync workflows; returns how many were queued. */
async function queueDocuments(deps: VendorSyncDeps, documentIds: string[]): Promise<number> {
  if (documentIds.length === 0) return 0;
  await deps.db.document.updateMany({ where: { id: { in: documentIds } }, data: { vendorSyncStatus: 'pending', vendorSyncError: null } });
  for (const documentId of documentIds) {
    try {
      await deps.temporal.workflow.start(vendorSyncWorkflowType, { taskQueue: deps.taskQueue, workflowId: vendorSyncWorkflowId(documentId), args: [{ documentId }] });
    } catch (err) {
      // A sync of this document is running: it reads the newest content when it uploads.
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }
  return documentIds.length;
}

/** After a successful embedding of a document of a partner with sync enabled. */
export async function queueVendorSyncAfterEmbedding(deps: VendorSyncDeps, documentId: string): Promise<void> {
  await queueDocuments(deps, [documentId]);
}

const eligible = { deletionRequestedAt: null, fileRewritten: { not: null } } as const;

async function syncableKnowledgeBase(db: Db, partner: string, kbName: string) {
  const { partner: p, kb } = await findKnowledgeBase(db, partner, kbName);
  if (!p.vendorSyncEnabled) throw conflict(`vendor sync is not enabled for partner ${p.name}`);
  if (kb.deletionRequestedAt) throw conflict(`knowledge base ${kb.name} is being deleted`);
  return kb;
}

export async function backfillVendorSync(deps: VendorSyncDeps, partner: string, kbName: string) {
  const kb = await syncableKnowledgeBase(deps.db, partner, kbName);
  const docs = await deps.db.document.findMany({ where: { knowledgeBaseId: kb.id, ...eligible }, select: { id: true } });
  return { status: 'queued' as const, queued: await queueDocuments(deps, docs.map((d) => d.id)) };
}

export async function retryFailedVendorSync(deps: VendorSyncDeps, partner: string, kbName: string) {
  const kb = await syncableKnowledgeBase(deps.db, partner, kbName);
  const docs = await deps.db.document.findMany({ where: { knowledgeBaseId: kb.id, ...eligible, vendorSyncStatus: 'failed' }, select: { id: true } });
  return { status: 'queued' as const, queued: await queueDocuments(deps, docs.map((d) => d.id)) };
}

/** Enabling sync on a partner queues every eligible document of its knowledge bases. */
export async function queueVendorSyncForPartner(deps: VendorSyncDeps, partnerId: string): Promise<number> {
  const docs = await deps.db.document.findMany({
    where: { ...eligible, knowledgeBase: { partnerId, deletionRequestedAt: null }, OR: [{ vendorSyncStatus: null }, { vendorSyncStatus: { not: 'synced' } }] },
    select: { id: true },
  });
  return queueDocuments(deps, docs.map((d) => d.id));
}

export async function vendorSyncStatus(db: Db, partner: string, kbName: string) {
  const { partner: p, kb } = await findKnowledgeBase(db, partner, kbName);
  const docs = await db.document.findMany({
    where: { knowledgeBaseId: kb.id, deletionRequestedAt: null },
    orderBy: { name: 'asc' },
    select: { id: true, name: true, fileRewritten: true, vendorSyncStatus: true, vendorSyncError: true, vendorFileId: true, vendorSyncedAt: true },
  });
  const { counts } = await vendorSyncSummary(db, kb.id);
  return {
    enabled: p.vendorSyncEnabled,
    knowledge_base: kb.name,
    vector_store_id: kb.vendorVectorStoreId,
    deletion_pending: kb.deletionRequestedAt !== null,
    counts,
    documents: docs.map((d) => ({
      document_id: d.id,
      name: d.name,
      eligible: d.fileRewritten !== null,
      status: d.vendorSyncStatus,
      error: d.vendorSyncError,
      vendor_file_id: d.vendorFileId,
      synced_at: d.vendorSyncedAt?.toISOString() ?? null,
    })),
  };
}

/**
 * The public `vendor_sync` summary of kb-data (spec 2.6), for a partner with sync enabled: how many
 * of the KB's rewritten documents are mirrored, waiting, failed or never queued, and the last
 * mirroring. The vendor's ids and the per-document errors stay on the administrator's
 * GET /api/vendor-sync. One statement, whatever the document count.
 */
export async function vendorSyncSummary(db: Db, knowledgeBaseId: string) {
  const [row] = await db.$queryRaw<Array<{ eligible: number; pending: number; synced: number; failed: number; not_queued: number; last_synced_at: Date | null }>>`
    SELECT count(*)::int AS eligible,
           count(*) FILTER (WHERE "vendorSyncStatus" = 'pending')::int AS pending,
           count(*) FILTER (WHERE "vendorSyncStatus" = 'synced')::int AS synced,
           count(*) FILTER (WHERE "vendorSyncStatus" = 'failed')::int AS failed,
           count(*) FILTER (WHERE "vendorSyncStatus" IS NULL)::int AS not_queued,
           max("vendorSyncedAt") AS last_synced_at
    FROM "documents"
    WHERE "knowledgeBaseId" = ${knowledgeBaseId}::uuid AND "deletionRequestedAt" IS NULL AND "fileRewritten" IS NOT NULL`;
  return {
    counts: { eligible: row!.eligible, pending: row!.pending, synced: row!.synced, failed: row!.failed, not_queued: row!.not_queued },
    last_synced_at: row!.last_synced_at?.toISOString() ?? null,
  };
}
