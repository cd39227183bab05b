import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { Db } from '../platform/db.js';
import { isWorkflowRunning } from '../platform/temporal.js';
import { documentWorkflowId, queueOfStep, type DocumentPipelineInput, type PipelineStep } from '../contracts/document-pipeline.js';
import { deletionWorkflowIdOf, type DeletionTarget } from '../contracts/deletion.js';
import { reconcilerWorkflowId, reconcilerWorkflowType, type ReconcilerInput } from '../contracts/reconciler.js';
import { startDocumentPipeline, stepsAfterDigitizing } from './pipeline-runs.js';
import { startDeletion } from './deletion.js';

/**
 * The knowledge side of the reconciler (contract: lib/contracts/reconciler.ts): documents queued
 * without a running pipeline, and deletions without a running deletion workflow, are started again.
 * Starting is idempotent (fixed workflow IDs), so a reconciler racing a request does no harm.
 */
export interface ReconcileDeps {
  db: Db;
  temporal: Client;
  taskQueue: string;
}

interface QueuedDocument {
  id: string;
  knowledgeBaseId: string;
  inQueues: string[];
  pipelineRequest: unknown;
  autoRewrite: boolean;
  useOriginalAsRewritten: boolean;
}

/**
 * What a stranded document runs again: its recorded request from the first step whose queue is
 * still marked; without a usable record, the steps its markers and flags imply. Null: nothing.
 */
export function resumeRequest(doc: QueuedDocument, partner: string): DocumentPipelineInput | null {
  const recorded = doc.pipelineRequest as DocumentPipelineInput | null;
  const queued = (step: PipelineStep) => doc.inQueues.includes(queueOfStep[step]);
  let steps: PipelineStep[] = [];
  const from = recorded?.steps.findIndex(queued) ?? -1;
  if (recorded && from >= 0) steps = recorded.steps.slice(from);
  else if (doc.inQueues.includes('digitize')) steps = ['digitize', ...stepsAfterDigitizing(doc)];
  else if (doc.inQueues.includes('rewrite')) steps = ['rewrite', 'embed'];
  else if (doc.inQueues.includes('embedding')) steps = ['embed'];
  if (steps.length === 0) return null;
  return {
    documentId: doc.id,
    knowledgeBaseId: doc.knowledgeBaseId,
    partner,
    steps,
    requestCharacterLimit: recorded?.requestCharacterLimit ?? null,
    ...(recorded?.rewrite ? { rewrite: recorded.rewrite } : {}),
  };
}

/** Starts the pipeline of a document that is queued without one; false when it runs, needs none, or is being deleted. */
export async function restartStrandedDocument(deps: ReconcileDeps, documentId: string): Promise<boolean> {
  const doc = await deps.db.document.findUnique({ where: { id: documentId }, include: { knowledgeBase: { include: { partner: true } } } });
  if (!doc || doc.deletionRequestedAt || doc.knowledgeBase.deletionRequestedAt || doc.inQueues.length === 0) return false;
  if (await isWorkflowRunning(deps.temporal, documentWorkflowId(doc.id))) return false;
  const request = resumeRequest(doc, doc.knowledgeBase.partner.name);
  if (!request) return false;
  try {
    await startDocumentPipeline(deps, request);
    return true;
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return false;
    throw err;
  }
}

/**
 * One page of queued documents untouched for `graceSeconds`, from `cursor` on (keyset by id, so a
 * large backlog is covered over several rounds); each one without a running pipeline is started.
 */
export async function reconcileQueuedDocuments(deps: ReconcileDeps, opts: { graceSeconds: number; cursor: string | null; limit: number; onProgress?: () => void }) {
  const cutoff = new Date(Date.now() - opts.graceSeconds * 1000);
  const page = await deps.db.document.findMany({
    where: { NOT: { inQueues: { isEmpty: true } }, deletionRequestedAt: null, updatedAt: { lt: cutoff }, ...(opts.cursor ? { id: { gt: opts.cursor } } : {}) },
    select: { id: true },
    orderBy: { id: 'asc' },
    take: opts.limit,
  });
  let restarted = 0;
  for (const { id } of page) {
    if (await restartStrandedDocument(deps, id)) restarted++;
    opts.onProgress?.();
  }
  return { restarted, cursor: page.length === opts.limit ? page.at(-1)!.id : null };
}

/** Starts the deletion of a target again when its rows are still marked and no deletion runs. */
async function restartDeletion(deps: ReconcileDeps, target: DeletionTarget): Promise<boolean> {
  if (await isWorkflowRunning(deps.temporal, deletionWorkflowIdOf(target))) return false;
  await startDeletion(deps, target);
  return true;
}

/**
 * Deletions whose workflow is gone (a crash between marking and start, a terminated run): the
 * largest marked container wins, so a document of a folder being deleted is left to the folder's
 * (and a knowledge base of a partner being deleted to the partner's).
 */
export async function reconcileDeletions(deps: ReconcileDeps, opts: { graceSeconds: number; limit: number }): Promise<number> {
  const cutoff = { lt: new Date(Date.now() - opts.graceSeconds * 1000) };
  const [partners, kbs, folders, documents] = await Promise.all([
    deps.db.partner.findMany({ where: { deletionRequestedAt: cutoff }, select: { id: true }, take: opts.limit }),
    deps.db.knowledgeBase.findMany({ where: { deletionRequestedAt: cutoff, partner: { deletionRequestedAt: null } }, select: { id: true }, take: opts.limit }),
    deps.db.folder.findMany({ where: { deletionRequestedAt: cutoff, knowledgeBase: { deletionRequestedAt: null } }, select: { id: true }, take: opts.limit }),
    deps.db.document.findMany({
      where: { deletionRequestedAt: cutoff, knowledgeBase: { deletionRequestedAt: null }, folder: { deletionRequestedAt: null } },
      select: { id: true },
      take: opts.limit,
    }),
  ]);
  const targets: DeletionTarget[] = [
    ...partners.map(({ id }) => ({ kind: 'partner' as const, partnerId: id })),
    ...kbs.map(({ id }) => ({ kind: 'knowledgeBase' as const, knowledgeBaseId: id })),
    ...folders.map(({ id }) => ({ kind: 'folder' as const, folderId: id })),
    ...documents.map(({ id }) => ({ kind: 'document' as const, documentId: id })),
  ];
  let restarted = 0;
  for (const target of targets) if (await restartDeletion(deps, target)) restarted++;
  return restarted;
}

/**
 * Starts the deployment's reconciler (every worker calls this at start). The one run lives on the
 * deployment's task queue: a run left on another queue (a test run's, an old deployment's) is
 * replaced, since no worker may be serving it.
 */
export async function ensureReconciler(client: Client, taskQueue: string, input: ReconcilerInput): Promise<void> {
  const start = () => client.workflow.start(reconcilerWorkflowType, { taskQueue, workflowId: reconcilerWorkflowId, args: [input] });
  try {
    await start();
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    const handle = client.workflow.getHandle(reconcilerWorkflowId);
    if ((await handle.describe()).taskQueue === taskQueue) return;
    await handle.terminate('replaced by the reconciler of the current task queue');
    await start();
  }
}
