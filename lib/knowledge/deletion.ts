import type { Client } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Db, Prisma } from '../platform/db.js';
import { conflict, notFound } from '../platform/errors.js';
import { isWorkflowRunning } from '../platform/temporal.js';
import { findDocument, findKnowledgeBase } from './lookup.js';
import { forgetPartnerKeys } from '../partners/partners.js';
import { documentWorkflowId } from '../contracts/document-pipeline.js';
import { deletionWorkflowIdOf, deletionWorkflowType, type DeletionInput, type DeletionTarget } from '../contracts/deletion.js';

export interface DeletionDeps {
  db: Db;
  temporal: Client;
  taskQueue: string;
}

/** How long a DELETE waits for its cleanup before answering `delete_pending`. */
const WAIT_FOR_CLEANUP_MS = 3000;

/**
 * Runs the deletion workflow and answers `deleted` when it finishes within a few seconds, else
 * `delete_pending` with what is still being cleaned up. The deletion itself is durable: it goes on
 * in Temporal whatever happens to this request, and the reconciler starts it again should its
 * workflow be lost (lib/knowledge/reconcile.ts). Its input names only the target: the workflow reads
 * the marked documents a page at a time, so a deletion of any size starts at once.
 */
export async function startDeletion(deps: DeletionDeps, target: DeletionTarget): Promise<string> {
  const workflowId = deletionWorkflowIdOf(target);
  const input: DeletionInput = { target };
  try {
    await deps.temporal.workflow.start(deletionWorkflowType, { taskQueue: deps.taskQueue, workflowId, args: [input] });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
  return workflowId;
}

async function runDeletion(deps: DeletionDeps, target: DeletionTarget, pending: () => Promise<Record<string, number | boolean>>) {
  const workflowId = await startDeletion(deps, target);
  // Poll with short, bounded calls: a long-poll for the result would outlive the request.
  const handle = deps.temporal.workflow.getHandle(workflowId);
  const deadline = Date.now() + WAIT_FOR_CLEANUP_MS;
  for (;;) {
    const status = (await handle.describe()).status.name;
    if (status === 'COMPLETED') return { status: 'deleted' as const };
    if (status !== 'RUNNING' || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 150));
  }
  return { status: 'delete_pending' as const, deletion_workflow_id: workflowId, pending_cleanup: { ...(await pending()), vectors: true, files: true } };
}

/** What a container's deletion still has to do: its documents, those with processing in flight, and its channel sources. */
async function pendingInContainer(db: Db, where: Prisma.DocumentWhereInput & Prisma.ChannelSourceWhereInput) {
  const [documents, active, channelSources] = await Promise.all([
    db.document.count({ where }),
    db.document.count({ where: { ...where, NOT: { inQueues: { isEmpty: true } } } }),
    db.channelSource.count({ where }),
  ]);
  return { documents, active_processing_workflows: active, channel_sources: channelSources };
}

export async function deleteDocument(deps: DeletionDeps, partner: string, kb: string, documentId: string, force: boolean) {
  const { document } = await findDocument(deps.db, partner, kb, documentId);
  const active = await isWorkflowRunning(deps.temporal, documentWorkflowId(documentId));
  if (active && !force) throw conflict('the document is being processed; delete with force=true (the default) to cancel its processing', { active_queues: document.inQueues });
  const now = new Date();
  // A channel video whose document the user deletes is never imported again while its source exists.
  await deps.db.$transaction([
    deps.db.document.update({ where: { id: documentId }, data: { deletionRequestedAt: document.deletionRequestedAt ?? now } }),
    deps.db.channelVideo.updateMany({ where: { documentId, status: 'imported' }, data: { status: 'suppressed', suppressedAt: now } }),
  ]);
  return { id: documentId, ...(await runDeletion(deps, { kind: 'document', documentId }, async () => ({ documents: 1, active_processing_workflows: active ? 1 : 0 }))) };
}

/**
 * Deletes a container (folder or knowledge base) with its documents: marks them all as being
 * deleted (hidden from search at once) and disables its channel sources in the same transaction
 * (an import holds the folder and KB rows while it creates a document, so every document is
 * either marked here or never created), then runs the deletion workflow, which stops the sources
 * before it purges the documents.
 */
async function deleteContainer(deps: DeletionDeps, mark: (now: Date) => Prisma.PrismaPromise<unknown>, where: Prisma.DocumentWhereInput & Prisma.ChannelSourceWhereInput, target: DeletionTarget) {
  const now = new Date();
  await deps.db.$transaction([
    mark(now),
    deps.db.channelSource.updateMany({ where: { ...where, deletionRequestedAt: null }, data: { enabled: false, deletionRequestedAt: now } }),
    deps.db.document.updateMany({ where: { ...where, deletionRequestedAt: null }, data: { deletionRequestedAt: now } }),
  ]);
  return runDeletion(deps, target, () => pendingInContainer(deps.db, where));
}

export async function deleteFolder(deps: DeletionDeps, partner: string, kbName: string, folderName: string) {
  const { kb } = await findKnowledgeBase(deps.db, partner, kbName);
  const folder = await deps.db.folder.findUnique({ where: { knowledgeBaseId_name: { knowledgeBaseId: kb.id, name: folderName } } });
  if (!folder) throw notFound(`folder ${JSON.stringify(folderName)} does not exist in knowledge base ${JSON.stringify(kbName)}`);
  const mark = (now: Date) => deps.db.folder.update({ where: { id: folder.id }, data: { deletionRequestedAt: folder.deletionRequestedAt ?? now } });
  return { name: folderName, ...(await deleteContainer(deps, mark, { folderId: folder.id }, { kind: 'folder', folderId: folder.id })) };
}

export async function deleteKnowledgeBase(deps: DeletionDeps, partner: string, kbName: string) {
  const { kb } = await findKnowledgeBase(deps.db, partner, kbName);
  const mark = (now: Date) => deps.db.knowledgeBase.update({ where: { id: kb.id }, data: { deletionRequestedAt: kb.deletionRequestedAt ?? now } });
  return { name: kbName, ...(await deleteContainer(deps, mark, { knowledgeBaseId: kb.id }, { kind: 'knowledgeBase', knowledgeBaseId: kb.id })) };
}

/**
 * What keeps a partner from being deleted without force (spec 4.5): vector state (documents with
 * vectors, or being embedded), vendor-sync cleanup (documents copied to a vendor vector store) and
 * unsettled budget reservations of its knowledge bases. Null when nothing does.
 */
async function partnerDeletionBlockers(db: Db, partnerId: string) {
  const owned = { knowledgeBase: { partnerId } };
  const [embedded, vendor, holds] = await Promise.all([
    db.document.count({ where: { ...owned, OR: [{ embeddingChunkCount: { gt: 0 } }, { embeddingStatus: { in: ['pending', 'in_progress'] } }] } }),
    db.document.count({ where: { ...owned, vendorFileId: { not: null } } }),
    db.budgetReservation.count({ where: { ...owned, status: { in: ['pending', 'uncertain'] } } }),
  ]);
  if (!embedded && !vendor && !holds) return null;
  return { documents_with_vectors: embedded, vendor_synced_documents: vendor, unsettled_budget_reservations: holds };
}

/**
 * Deletes a partner with everything it owns, as a workflow like the other deletions
 * (`delete-partner-<id>`): the request marks the partner (its key stops working, nothing new can be
 * created), its knowledge bases, channel sources and documents in one transaction; the workflow
 * stops the sources, stops and purges every document a page at a time (vectors, files, vendor
 * copies, holds), then removes the partner row with its voices, transcripts and analyses. Asking
 * again while it runs answers `delete_pending` again. Without `force`, a partner with vector state,
 * vendor copies or unsettled holds is refused with 409 (spec 4.5) and nothing changes.
 */
export async function deletePartner(deps: DeletionDeps, name: string, force: boolean) {
  const partner = await deps.db.partner.findUnique({ where: { name } });
  if (!partner) throw notFound(`partner ${JSON.stringify(name)} does not exist`);
  if (!force && !partner.deletionRequestedAt) {
    const blocking = await partnerDeletionBlockers(deps.db, partner.id);
    if (blocking) {
      throw conflict(
        `partner ${JSON.stringify(name)} still has vectors, vendor-store copies or unsettled budget reservations; delete its knowledge bases first, or delete with force=true to clean them up with it`,
        { responseFields: { blocking } },
      );
    }
  }
  const now = new Date();
  const owned = { knowledgeBase: { partnerId: partner.id } };
  await deps.db.$transaction([
    deps.db.partner.update({ where: { id: partner.id }, data: { deletionRequestedAt: partner.deletionRequestedAt ?? now } }),
    deps.db.knowledgeBase.updateMany({ where: { partnerId: partner.id, deletionRequestedAt: null }, data: { deletionRequestedAt: now } }),
    deps.db.channelSource.updateMany({ where: { ...owned, deletionRequestedAt: null }, data: { enabled: false, deletionRequestedAt: now } }),
    deps.db.document.updateMany({ where: { ...owned, deletionRequestedAt: null }, data: { deletionRequestedAt: now } }),
  ]);
  // Its key stops working here at once (other replicas: within PARTNER_KEY_CACHE_SECONDS).
  forgetPartnerKeys(partner.id);
  return { name, ...(await runDeletion(deps, { kind: 'partner', partnerId: partner.id }, () => pendingInContainer(deps.db, owned))) };
}
