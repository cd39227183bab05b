import { Context, ApplicationFailure } from '@temporalio/activity';
import { CancelledFailure } from '@temporalio/common';
import type { Logger } from '../lib/platform/logger.js';
import { pipelineFailure, type DigitizeAndEmbedOutcome, type DigitizeDocumentInput } from '../lib/contracts/document-pipeline.js';
import type { DigitizationActivities } from './digitization.js';
import type { EmbeddingActivities } from './embedding.js';

/**
 * A new upload whose original text is its final content (use_original_as_rewritten) and whose
 * embedder is the local encoder: digitized and embedded in one activity (docs/architecture.md,
 * "Digitized and embedded in one activity"). Neither step needs its own retry point there: both are
 * idempotent (a retry finds the digitization recorded and resumes the embedding at the last chunk
 * its heartbeat reported), and the local encoder costs nothing to repeat. One activity instead of
 * two saves a workflow task, an activity dispatch and their history events per document, and the
 * document's chunks reach the encoder's batcher as soon as its text is accepted instead of queueing
 * behind every other document's digitization.
 *
 * An embedding that fails here is not retried here: the activity answers `embedded: false` and the
 * workflow runs the `embed` step on its own, with that step's retries and failure reporting.
 * Cancellation (the document is being deleted) and a deleted document end the activity as they
 * would end either step.
 */
export function createIngestionActivities(digitization: DigitizationActivities, embedding: EmbeddingActivities, log?: Logger) {
  return {
    async digitizeAndEmbedDocument(input: DigitizeDocumentInput): Promise<DigitizeAndEmbedOutcome> {
      const digitized = await digitization.digitizeDocument(input);
      if (digitized.outcome !== 'accepted' || !digitized.finalized || digitized.paidEmbedding) return { ...digitized, embedded: false };
      try {
        await embedding.embedDocument({ documentId: input.documentId });
        return { ...digitized, embedded: true };
      } catch (err) {
        if (err instanceof CancelledFailure || Context.current().cancellationSignal.aborted) throw err;
        if (err instanceof ApplicationFailure && err.type === pipelineFailure.documentGone) throw err;
        log?.warn('embedding after digitization failed; the embed step runs on its own', { documentId: input.documentId, error: err instanceof Error ? err.message : String(err) });
        return { ...digitized, embedded: false };
      }
    },
  };
}

export type IngestionActivities = ReturnType<typeof createIngestionActivities>;
