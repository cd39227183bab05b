import type { Db } from '../lib/platform/db.js';
import type { FileStorage } from '../lib/platform/storage.js';
import { refreshKnowledgeBaseEmbeddingStatus } from '../lib/knowledge/embedding-queue.js';
import { queueOfStep, type DocumentPipelineInput, type DocumentRef, type PipelineStep } from '../lib/contracts/document-pipeline.js';
import { moveQueueMarkers } from '../lib/knowledge/queue-markers.js';
import { beginPipelineRun, finalizeOriginalAsRewritten } from '../lib/knowledge/pipeline-steps.js';
import { loadLiveDocument, permanentFailure } from './live-document.js';

export interface PipelineStepActivityDeps {
  db: Db;
  storage: FileStorage;
}

/** The document pipeline's own bookkeeping: a step's failure and requeue, and finalizing the original. */
export function createPipelineStepActivities({ db, storage }: PipelineStepActivityDeps) {
  const loadDocument = (documentId: string) => loadLiveDocument(db, documentId);

  return {
    /**
     * A new run (not a continuation) takes its document over: the markers become its first step's
     * queue (a replaced run's leftovers go), and its request is recorded for the reconciler.
     */
    async beginPipelineRun({ request }: { request: DocumentPipelineInput }): Promise<void> {
      await beginPipelineRun(db, request);
    },

    /** use_original_as_rewritten: the digitized text becomes the final rewritten content, no LLM. */
    async saveOriginalAsRewritten({ documentId }: DocumentRef): Promise<{ charCount: number }> {
      const doc = await loadDocument(documentId);
      if (!doc.fileDigitized) throw permanentFailure('the document has no digitized content');
      return finalizeOriginalAsRewritten(db, storage, doc);
    },

    /**
     * Makes a failed step visible on the document; the workflow then waits for a retry signal. An
     * embedding failure is the document's embedding_error (embedding_status `failed`); the others are
     * its processing_error, which spec 2.5 keeps for digitization and rewriting (and budget blocks).
     */
    async recordStepFailure({ documentId, step, message }: DocumentRef & { step: PipelineStep; message: string }): Promise<void> {
      const doc = await db.document.findUnique({ where: { id: documentId } });
      if (!doc) return;
      await db.$transaction([
        db.document.updateMany({
          where: { id: documentId },
          data: step === 'embed' ? { embeddingStatus: 'failed', embeddingError: message } : { processingError: message },
        }),
        moveQueueMarkers(db, documentId, { remove: [queueOfStep[step]] }),
      ]);
      await refreshKnowledgeBaseEmbeddingStatus(db, doc.knowledgeBaseId);
    },

    /** On retry: the step is queued again and its old error cleared. */
    async requeueStep({ documentId, step }: DocumentRef & { step: PipelineStep }): Promise<void> {
      await db.$transaction([
        db.document.updateMany({
          where: { id: documentId },
          data: step === 'embed' ? { processingError: null, embeddingStatus: 'pending', embeddingError: null } : { processingError: null },
        }),
        moveQueueMarkers(db, documentId, { add: [queueOfStep[step]] }),
      ]);
      // A retried embedding makes its KB in_progress again at once (not `fail` until the retry ends).
      if (step === 'embed') {
        const doc = await db.document.findUnique({ where: { id: documentId }, select: { knowledgeBaseId: true } });
        if (doc) await refreshKnowledgeBaseEmbeddingStatus(db, doc.knowledgeBaseId);
      }
    },
  };
}
