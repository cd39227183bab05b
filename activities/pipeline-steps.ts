import type { Db } from '../lib/platform/db.js';
import type { FileStorage } from '../lib/platform/storage.js';
import type { DocumentPipelineInput, DocumentRef, PipelineStep } from '../lib/contracts/document-pipeline.js';
import { recordStepFailure, requeueStep } from '../lib/knowledge/state.js';
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

    /** Makes a failed step visible on the document; the workflow then waits for a retry signal. */
    recordStepFailure: ({ documentId, step, message }: DocumentRef & { step: PipelineStep; message: string }) => recordStepFailure(db, documentId, step, message),

    /** On retry: the step is queued again and its old error cleared. */
    requeueStep: ({ documentId, step }: DocumentRef & { step: PipelineStep }) => requeueStep(db, documentId, step),
  };
}
