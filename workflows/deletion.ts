import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

/**
 * Deletes documents, and then their folder or knowledge base, leaving nothing behind: each
 * document's processing workflow is cancelled and awaited first, so no activity can write vectors
 * or files after the cleanup. IDs: `delete-document-<id>`, `delete-folder-<id>`,
 * `delete-knowledge-base-<id>`.
 */
export interface DeletionInput {
  documentIds: string[];
  folderId?: string;
  knowledgeBaseId?: string;
}

const acts = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1s', maximumInterval: '1 minute' },
});

export async function deletion(input: DeletionInput): Promise<{ deletedDocuments: number }> {
  for (const documentId of input.documentIds) {
    await acts.stopDocumentPipeline({ documentId });
    await acts.purgeDocument({ documentId });
  }
  if (input.folderId) await acts.removeFolder({ folderId: input.folderId });
  if (input.knowledgeBaseId) await acts.removeKnowledgeBase({ knowledgeBaseId: input.knowledgeBaseId });
  return { deletedDocuments: input.documentIds.length };
}
