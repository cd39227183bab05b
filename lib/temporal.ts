import { Client, Connection } from '@temporalio/client';

/**
 * Workflow IDs are predictable so that an operator can find and signal any job by the ID of the
 * thing it works on (README, "Operator guide").
 */
export const workflowIds = {
  document: (documentId: string) => `document-${documentId}`,
};

export async function connectTemporalClient(address: string, namespace: string): Promise<Client> {
  const connection = await Connection.connect({ address, connectTimeout: '10s' });
  return new Client({ connection, namespace });
}
