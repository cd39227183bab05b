import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Db } from '../db.js';
import { workflowIds } from '../temporal.js';

/**
 * Sends `budgetChanged` to the workflow of every budget-blocked document of a KB, after a limit was
 * raised or capacity freed. Blocked documents are found in Postgres (the workflow marks the
 * document before it waits); a workflow that missed the signal re-checks on its own timer anyway.
 */
export async function wakeBudgetBlockedWork(db: Db, temporal: Client, knowledgeBaseId: string): Promise<number> {
  const blocked = await db.document.findMany({
    where: { knowledgeBaseId, processingError: { startsWith: 'BUDGET_BLOCKED:' }, deletionRequestedAt: null },
    select: { id: true },
  });
  let signalled = 0;
  await Promise.all(
    blocked.map(async ({ id }) => {
      try {
        await temporal.workflow.getHandle(workflowIds.document(id)).signal('budgetChanged');
        signalled++;
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
    }),
  );
  return signalled;
}
