import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import { Context } from '@temporalio/activity';
import type { Db } from '../lib/platform/db.js';
import type { FileStorage } from '../lib/platform/storage.js';
import { documentFiles } from '../lib/platform/storage.js';
import type { VectorIndex } from '../lib/providers/vector-index.js';
import { isWorkflowRunning } from '../lib/platform/temporal.js';
import { documentWorkflowId } from '../lib/contracts/document-pipeline.js';
import { vendorSyncWorkflowId } from '../lib/contracts/vendor-sync.js';
import { channelSourceWorkflowId } from '../lib/contracts/channel-source.js';
import type { DeletionTarget } from '../lib/contracts/deletion.js';
import { partnerVoiceFilesPrefix } from '../lib/partners/partners.js';
import { audioUploadFiles } from '../lib/transcripts/files.js';
import { freeDocumentCharacters } from '../lib/budget/operations.js';
import { refreshKnowledgeBaseEmbeddingStatus } from '../lib/knowledge/embedding-queue.js';
import type { VendorVectorStore } from '../lib/providers/vector-store.js';

export interface DeletionActivityDeps {
  db: Db;
  storage: FileStorage;
  index: VectorIndex;
  temporal: Client;
  vendorStore: VendorVectorStore | null;
}

/** The rows of a deletion target. */
function containerWhere(target: DeletionTarget) {
  switch (target.kind) {
    case 'document':
      return { id: target.documentId };
    case 'folder':
      return { folderId: target.folderId };
    case 'knowledgeBase':
      return { knowledgeBaseId: target.knowledgeBaseId };
    case 'partner':
      return { knowledgeBase: { partnerId: target.partnerId } };
  }
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
      await stopWorkflow(documentWorkflowId(documentId));
      await stopWorkflow(vendorSyncWorkflowId(documentId));
    },

    /**
     * Cancels the channel sources of a folder or knowledge base and waits until their workflows
     * have closed: an import in flight finishes or aborts first (its activities wait for their
     * cancellation), so the container's document list cannot grow afterwards.
     */
    async stopChannelSources({ target }: { target: DeletionTarget }): Promise<void> {
      const sources = await db.channelSource.findMany({ where: containerWhere(target), select: { id: true } });
      for (const { id } of sources) await stopWorkflow(channelSourceWorkflowId(id));
    },

    /** The next documents of the target that the API marked for deletion (the purged ones are gone). */
    async markedDocumentsPage({ target, limit }: { target: DeletionTarget; limit: number }): Promise<string[]> {
      const rows = await db.document.findMany({
        where: { ...containerWhere(target), deletionRequestedAt: { not: null } },
        select: { id: true },
        orderBy: { id: 'asc' },
        take: limit,
      });
      return rows.map((r) => r.id);
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

    /**
     * The partner's row goes with everything that hangs on it (knowledge bases, voices,
     * transcripts, dialog analyses, uploads; a voice job still running finds its voice gone, cancels
     * its GPU job and removes what it wrote), then the voices' and the uploads' files. Its
     * documents are gone already.
     */
    async removePartner({ partnerId }: { partnerId: string }): Promise<void> {
      const left = await db.document.count({ where: { knowledgeBase: { partnerId } } });
      if (left > 0) throw new Error(`partner ${partnerId} still has ${left} document(s)`);
      await db.partner.deleteMany({ where: { id: partnerId } });
      await storage.removePrefix(partnerVoiceFilesPrefix(partnerId));
      await storage.removePrefix(audioUploadFiles.prefixOf(partnerId));
    },
  };
}
