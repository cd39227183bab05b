import { Client, Connection, WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';

/**
 * Workflow IDs are predictable so that an operator can find and signal any job by the ID of the
 * thing it works on (README, "Operator guide").
 */
export const workflowIds = {
  document: (documentId: string) => `document-${documentId}`,
  budgetSweeper: () => 'budget-sweeper',
  deleteDocument: (documentId: string) => `delete-document-${documentId}`,
  deleteFolder: (folderId: string) => `delete-folder-${folderId}`,
  deleteKnowledgeBase: (knowledgeBaseId: string) => `delete-knowledge-base-${knowledgeBaseId}`,
};

export async function connectTemporalClient(address: string, namespace: string): Promise<Client> {
  const connection = await Connection.connect({ address, connectTimeout: '10s' });
  return new Client({ connection, namespace });
}

/** Starts the reservation sweeper unless it already runs (every worker calls this at start). */
export async function ensureBudgetSweeper(client: Client, taskQueue: string, input: { intervalSeconds: number; graceSeconds: number }) {
  try {
    await client.workflow.start('budgetSweeper', { taskQueue, workflowId: workflowIds.budgetSweeper(), args: [input] });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

/** Whether Temporal reports the workflow running (an unknown workflow is not). */
export async function isWorkflowRunning(client: Client, workflowId: string): Promise<boolean> {
  try {
    return (await client.workflow.getHandle(workflowId).describe()).status.name === 'RUNNING';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}
