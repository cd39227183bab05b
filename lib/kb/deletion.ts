import type { Client } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Db, Prisma } from '../db.js';
import { conflict, notFound } from '../errors.js';
import { isWorkflowRunning, workflowIds } from '../temporal.js';
import { findDocument, findKnowledgeBase } from './lookup.js';
import type { DeletionInput } from '../../workflows/deletion.js';

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
 * in Temporal whatever happens to this request.
 */
async function runDeletion(deps: DeletionDeps, workflowId: string, input: DeletionInput, activeWorkflows: number) {
  try {
    await deps.temporal.workflow.start('deletion', { taskQueue: deps.taskQueue, workflowId, args: [input] });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
  // Poll with short, bounded calls: a long-poll for the result would outlive the request.
  const handle = deps.temporal.workflow.getHandle(workflowId);
  const deadline = Date.now() + WAIT_FOR_CLEANUP_MS;
  for (;;) {
    const status = (await handle.describe()).status.name;
    if (status === 'COMPLETED') return { status: 'deleted' as const };
    if (status !== 'RUNNING' || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 150));
  }
  return {
    status: 'delete_pending' as const,
    deletion_workflow_id: workflowId,
    pending_cleanup: { documents: input.documentIds.length, active_processing_workflows: activeWorkflows, vectors: true, files: true },
  };
}

export async function deleteDocument(deps: DeletionDeps, partner: string, kb: string, documentId: string, force: boolean) {
  const { document } = await findDocument(deps.db, partner, kb, documentId);
  const active = await isWorkflowRunning(deps.temporal, workflowIds.document(documentId));
  if (active && !force) throw conflict('the document is being processed; delete with force=true (the default) to cancel its processing', { active_queues: document.inQueues });
  await deps.db.document.update({ where: { id: documentId }, data: { deletionRequestedAt: document.deletionRequestedAt ?? new Date() } });
  return { id: documentId, ...(await runDeletion(deps, workflowIds.deleteDocument(documentId), { documentIds: [documentId] }, active ? 1 : 0)) };
}

/**
 * Deletes a container (folder or knowledge base) with its documents: marks them all as being
 * deleted (hidden from search at once), then runs the deletion workflow for them.
 */
async function deleteContainer(
  deps: DeletionDeps,
  mark: (now: Date) => Prisma.PrismaPromise<unknown>,
  documentsWhere: Prisma.DocumentWhereInput,
  workflowId: string,
  target: Omit<DeletionInput, 'documentIds'>,
) {
  const now = new Date();
  await deps.db.$transaction([mark(now), deps.db.document.updateMany({ where: { ...documentsWhere, deletionRequestedAt: null }, data: { deletionRequestedAt: now } })]);
  const docs = await deps.db.document.findMany({ where: documentsWhere, select: { id: true } });
  const active = (await Promise.all(docs.map((d) => isWorkflowRunning(deps.temporal, workflowIds.document(d.id))))).filter(Boolean).length;
  return runDeletion(deps, workflowId, { documentIds: docs.map((d) => d.id), ...target }, active);
}

export async function deleteFolder(deps: DeletionDeps, partner: string, kbName: string, folderName: string) {
  const { kb } = await findKnowledgeBase(deps.db, partner, kbName);
  const folder = await deps.db.folder.findUnique({ where: { knowledgeBaseId_name: { knowledgeBaseId: kb.id, name: folderName } } });
  if (!folder) throw notFound(`folder ${JSON.stringify(folderName)} does not exist in knowledge base ${JSON.stringify(kbName)}`);
  const mark = (now: Date) => deps.db.folder.update({ where: { id: folder.id }, data: { deletionRequestedAt: folder.deletionRequestedAt ?? now } });
  return { name: folderName, ...(await deleteContainer(deps, mark, { folderId: folder.id }, workflowIds.deleteFolder(folder.id), { folderId: folder.id })) };
}

export async function deleteKnowledgeBase(deps: DeletionDeps, partner: string, kbName: string) {
  const { kb } = await findKnowledgeBase(deps.db, partner, kbName);
  const mark = (now: Date) => deps.db.knowledgeBase.update({ where: { id: kb.id }, data: { deletionRequestedAt: kb.deletionRequestedAt ?? now } });
  return { name: kbName, ...(await deleteContainer(deps, mark, { knowledgeBaseId: kb.id }, workflowIds.deleteKnowledgeBase(kb.id), { knowledgeBaseId: kb.id })) };
}
