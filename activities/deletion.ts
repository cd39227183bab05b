import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import { Context } from '@temporalio/activity';
import type { Db } from '../lib/db.js';
import type { FileStorage } from '../lib/storage.js';
import { documentFiles } from '../lib/storage.js';
import type { VectorIndex } from '../lib/providers/vector-index.js';
import { workflowIds } from '../lib/temporal.js';
import { freeDocumentCharacters } from '../lib/budget/operations.js';
import { refreshKnowledgeBaseEmbeddingStatus } from '../lib/kb/embedding-status.js';

export interface DeletionActivityDeps {
  db: Db;
  storage: FileStorage;
  index: VectorIndex;
  temporal: Client;
}

/** Deletion steps; each is idempotent, so a retried or resumed deletion finishes the job. */
export function createDeletionActivities({ db, storage, index, temporal }: DeletionActivityDeps) {
  return {
    /** Cancels the document's processing workflow and waits until it has closed. */
    async stopDocumentPipeline({ documentId }: { documentId: string }): Promise<void> {
      const handle = temporal.workflow.getHandle(workflowIds.document(documentId));
      try {
        if ((await handle.describe()).status.name !== 'RUNNING') return;
        await handle.cancel();
        for (;;) {
          if ((await handle.describe()).status.name !== 'RUNNING') return;
          Context.current().heartbeat();
          await Context.current().sleep(250);
        }
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return;
        throw err;
      }
    },

    /** Removes a document's vectors, characters, holds, files and row. */
    async purgeDocument({ documentId }: { documentId: string }): Promise<void> {
      const doc = await db.document.findUnique({ where: { id: documentId } });
      await index.deleteDocumentChunks(documentId, 0);
      if (!doc) return;
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
