import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';

export async function connectTemporalClient(address: string, namespace: string): Promise<Client> {
  const connection = await Connection.connect({ address, connectTimeout: '10s' });
  return new Client({ connection, namespace });
}

/**
 * A client that connects on its first call: the API starts (and serves what needs no workflow,
 * e.g. /v3) while Temporal is still coming up; /health/deep reports whether it is reachable.
 */
export function lazyTemporalClient(address: string, namespace: string): Client {
  return new Client({ connection: Connection.lazy({ address, connectTimeout: '10s' }), namespace });
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

/**
 * Waits, with short bounded calls, until the workflow is no longer running; false when it still
 * runs after `timeoutMs`. (A long-poll for its result would outlive the request that waits.)
 */
export async function waitUntilClosed(client: Client, workflowId: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!(await isWorkflowRunning(client, workflowId))) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
}
