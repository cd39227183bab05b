import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import { Context } from '@temporalio/activity';
import type { Db } from '../lib/db.js';
import type { FileStorage } from '../lib/storage.js';
import { documentFiles } from '../lib/storage.js';
import type { VectorIndex } from '../lib/providers/vector-index.js';
import { isWorkflowRunning, workflowIds } from '../lib/temporal.js';
import { freeDocumentCharacters } from '../lib/budget/operations.js';
import { refreshKnowledgeBaseEmbeddingStatus } from '../lib/kb/embedding-status.js';
import { vendorSyncWorkflowId } from '../lib/kb/vendor-sync.js';
import type { VendorVectorStore } from '../lib/providers/vector-store.js';

export interface DeletionActivityDeps {
  db: Db;
  storage: FileStorage;
  index: VectorIndex;
  temporal: Client;
  vendorStore: VendorVectorStore | null;
}

/** Deletion steps; each is idempotent, so a retried or resumed deletion finishes the job. */
export function createDeletionActivities({ db, storage, index, temporal, vendorStore }: DeletionActivityDeps) {
  /** Cancels a workflow if it runs and waits until it has closed. */
  async function stopWorkflow(workflowId: string): Promise<void> {
    if (!(await isWorkflowRunning(temporal, workflowId))) return;
    try {
      await temporal.workflow.getHandle(workflowId).cancel();
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return;
      throw err;
    }
    while (await isWorkflowRunning(temporal, workflowId)) {
      Context.current().heartbeat();
      await Context.current().sleep(250);
    }
  }

  return {
    /**
     * Cancels the document's processing and vendor-sync workflows and waits until both have
     * closed, so nothing is written (or uploaded) after the cleanup.
     */
    async stopDocumentPipeline({ documentId }: { documentId: string }): Promise<void> {
      await stopWorkflow(workflowIds.document(documentId));
      await stopWorkflow(vendorSyncWorkflowId(documentId));
    },

    /** Removes a document's vectors, characters, holds, files and row. */
    async purgeDocument({ documentId }: { documentId: string }): Promise<void> {
      const doc = await db.document.findUnique({ where: { id: documentId } });
      await index.deleteDocumentChunks(documentId, 0);
      if (!doc) return;
      if (doc.vendorFileId) {
        // The mirrored copy goes too; until the vector-store API can be reached the document stays
        // delete_pending (this activity is retried).
        const kb = await db.knowledgeBase.findUnique({ where: { id: doc.knowledgeBaseId } });
        if (!vendorStore) throw new Error(`document ${documentId} has a vendor file but no vector-store API is configured to remove it`);
        if (kb?.vendorVectorStoreId) await vendorStore.removeDocument(kb.vendorVectorStoreId, doc.vendorFileId);
        await db.document.update({ where: { id: documentId }, data: { vendorFileId: null, vendorSyncStatus: null } });
      }
      await freeDocumentCharacters(db, temporal, documentId);
      await db.budgetReservation.updateMany({
        where: { documentId, status: 'pending' },
        data: { status: 'released', note: 'document deleted before the operation ran', resolvedAt: new Date() },
      });
      await storage.removePrefix(documentFiles.prefix(documentId));
      await db.document.deleteMany({ where: { id: documentId } });
      await refreshKnowledgeBaseEmbeddingStatus(db, doc.knowledgeBaseId);
    },

    async removeFolder({ folderId }: { folderId: string }): Promise<void> {
      await db.folder.deleteMany({ where: { id: folderId, documents: { none: {} } } });
    },

    async removeKnowledgeBase({ knowledgeBaseId }: { knowledgeBaseId: string }): Promise<void> {
      await db.knowledgeBase.deleteMany({ where: { id: knowledgeBaseId, documents: { none: {} } } });
    },
  };
}
