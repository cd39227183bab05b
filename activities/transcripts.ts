import { heartbeating } from './heartbeating.js';
import type { SegmentRef, TranscriptPlan, TranscriptRef } from '../lib/contracts/transcript.js';
import { completeTranscript, deleteTranscript, failTranscript, prepareTranscript, transcribeSegment, type TranscriptDeps } from '../lib/transcripts/processing.js';

/** Activities of the `transcript` workflow (lib/transcripts/processing.ts does the work). */
export function createTranscriptActivities(deps: TranscriptDeps) {
  return {
    prepareTranscript: ({ transcriptId }: TranscriptRef): Promise<TranscriptPlan> => heartbeating((signal) => prepareTranscript(deps, transcriptId, signal)),
    /** Runs on the audio task queue (TEMPORAL_AUDIO_TASK_QUEUE). */
    transcribeTranscriptSegment: ({ transcriptId, index }: SegmentRef): Promise<void> => heartbeating((signal) => transcribeSegment(deps, transcriptId, index, signal)),
    completeTranscript: ({ transcriptId, retentionSeconds }: TranscriptRef & { retentionSeconds: number }) => completeTranscript(deps, transcriptId, retentionSeconds),
    failTranscript: ({ transcriptId, message, retentionSeconds }: TranscriptRef & { message: string; retentionSeconds: number }) =>
      failTranscript(deps, transcriptId, message, retentionSeconds),
    deleteTranscript: ({ transcriptId }: TranscriptRef) => deleteTranscript(deps, transcriptId),
  };
}
