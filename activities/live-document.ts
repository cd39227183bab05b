import { ApplicationFailure } from '@temporalio/activity';
import type { Db } from '../lib/platform/db.js';
import { pipelineFailure, type ServiceOutageDetails } from '../lib/contracts/document-pipeline.js';
import { ServiceRejected, ServiceUnavailable } from '../lib/providers/service-unavailable.js';

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

/**
 * A step's error as the pipeline handles it: a service outage becomes `ServiceUnavailable` carrying
 * the worker's outage window (the workflow waits it out), a provider's refusal a permanent failure;
 * anything else is returned as it is (the step's usual retries).
 */
export function pipelineFailureOf(err: unknown, maxOutageSeconds: number): unknown {
  if (err instanceof ServiceUnavailable) {
    const details: ServiceOutageDetails = { maxOutageSeconds };
    return ApplicationFailure.create({ type: pipelineFailure.unavailable, message: err.message, details: [details] });
  }
  if (err instanceof ServiceRejected) return permanentFailure(err.message);
  return err;
}
