import { heartbeating } from './heartbeating.js';
import type { SegmentRef, TranscriptPlan, TranscriptRef } from '../lib/contracts/transcript.js';
import { completeTranscript, deleteTranscript, failTranscript, prepareTranscript, transcribeSegment, type TranscriptDeps } from '../lib/transcripts/processing.js';
import { deliverTranscriptWebhook } from '../lib/transcripts/webhooks.js';
import type { Services } from '../lib/services.js';

/** Activities of the `transcript` workflow (lib/transcripts/processing.ts does the work). */
export function createTranscriptActivities(deps: TranscriptDeps & Pick<Services, 'log'>) {
  return {
    prepareTranscript: ({ transcriptId }: TranscriptRef): Promise<TranscriptPlan> => heartbeating((signal) => prepareTranscript(deps, transcriptId, signal)),
    /** Runs on the audio task queue (TEMPORAL_AUDIO_TASK_QUEUE). */
    transcribeTranscriptSegment: ({ transcriptId, index }: SegmentRef): Promise<void> => heartbeating((signal) => transcribeSegment(deps, transcriptId, index, signal)),
    completeTranscript: ({ transcriptId, retentionSeconds }: TranscriptRef & { retentionSeconds: number }) => completeTranscript(deps, transcriptId, retentionSeconds),
    failTranscript: ({ transcriptId, message, retentionSeconds }: TranscriptRef & { message: string; retentionSeconds: number }) =>
      failTranscript(deps, transcriptId, message, retentionSeconds),
    deleteTranscript: ({ transcriptId }: TranscriptRef) => deleteTranscript(deps, transcriptId),
    /** One attempt at the transcript's webhook; throws (retried by the workflow's policy) when another attempt may pass. */
    notifyTranscriptWebhook: ({ transcriptId }: TranscriptRef) => deliverTranscriptWebhook(deps, transcriptId),
  };
}
