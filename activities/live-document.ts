import { ApplicationFailure } from '@temporalio/activity';
import type { Db } from '../lib/platform/db.js';
import { pipelineFailure } from '../lib/contracts/document-pipeline.js';

/**
 * The document a pipeline activity works on, with its knowledge base and partner. A document that
 * was deleted (or is being deleted) ends the workflow quietly: `DocumentGone` is not retried.
 */
export async function loadLiveDocument(db: Db, documentId: string) {
  const doc = await db.document.findUnique({ where: { id: documentId }, include: { knowledgeBase: { include: { partner: true } } } });
  if (!doc || doc.deletionRequestedAt) throw ApplicationFailure.nonRetryable(`document ${documentId} no longer exists`, pipelineFailure.documentGone);
  return doc;
}

/** A failure that retrying cannot fix; its message becomes the document's processing_error. */
export const permanentFailure = (message: string) => ApplicationFailure.nonRetryable(message, pipelineFailure.permanent);
