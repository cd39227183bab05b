import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Db } from '../platform/db.js';
import { budgetChangedSignal, documentWorkflowId } from '../contracts/document-pipeline.js';
import { budgetChangedSignal as channelBudgetChangedSignal, channelSourceWorkflowId } from '../contracts/channel-source.js';
import { reconcileNowSignal, reconcilerWorkflowId, type ReconcileRequest } from '../contracts/reconciler.js';

/**
 * Sends `budgetChanged` to the workflow of every budget-blocked document and channel source of a
 * KB, after a limit was raised or capacity freed. Blocked work is found in Postgres (the workflow
 * marks its document or source before it waits); a workflow that missed the signal re-checks on
 * its own timer anyway. Blocked work whose workflow is gone (terminated, lost) is handed to the
 * reconciler, which starts it again at once.
 */
export async function wakeBudgetBlockedWork(db: Db, temporal: Client, knowledgeBaseId: string): Promise<number> {
  const [documents, sources] = await Promise.all([
    db.document.findMany({ where: { knowledgeBaseId, processingState: 'budget_blocked', deletionRequestedAt: null }, select: { id: true } }),
    db.channelSource.findMany({ where: { knowledgeBaseId, status: 'budget_blocked', deletionRequestedAt: null }, select: { id: true } }),
  ]);
  const targets = [
    ...documents.map(({ id }) => ({ id, kind: 'document' as const, workflowId: documentWorkflowId(id), signal: budgetChangedSignal })),
    ...sources.map(({ id }) => ({ id, kind: 'source' as const, workflowId: channelSourceWorkflowId(id), signal: channelBudgetChangedSignal })),
  ];
  let signalled = 0;
  const stranded: Required<ReconcileRequest> = { documentIds: [], channelSourceIds: [] };
  await Promise.all(
    targets.map(async ({ id, kind, workflowId, signal }) => {
      try {
        await temporal.workflow.getHandle(workflowId).signal(signal);
        signalled++;
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
        (kind === 'document' ? stranded.documentIds : stranded.channelSourceIds).push(id);
      }
    }),
  );
  if (stranded.documentIds.length + stranded.channelSourceIds.length > 0) {
    try {
      await temporal.workflow.getHandle(reconcilerWorkflowId).signal(reconcileNowSignal, stranded);
    } catch (err) {
      // No reconciler runs (none is configured): its periodic scan is not there either, nothing to hand over.
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
  }
  return signalled;
}
