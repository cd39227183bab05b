import { defineQuery, defineSignal } from '@temporalio/workflow';

/**
 * Contract of the `transcript` workflow: one execution per transcript (ID `transcript-<uuid>`, the
 * uuid of `/v2/transcript/<uuid>`). It prepares the audio (download or upload, probe, 16 kHz WAV,
 * pauses, segment plan), transcribes the segments on the audio task queue, joins and formats the
 * text, announces the end to the transcript's webhook (if any), then keeps the finished transcript
 * for the retention period and deletes it.
 */
export const transcriptWorkflowType = 'transcript';
export const transcriptWorkflowId = (transcriptId: string) => `transcript-${transcriptId}`;
/** A transcript's id as the API answers it (spec 2.2: path form). */
export const transcriptPath = (transcriptId: string) => `/v2/transcript/${transcriptId}`;

export interface TranscriptWorkflowInput {
  transcriptId: string;
  /** Task queue of the CPU-heavy segment activities (TEMPORAL_AUDIO_TASK_QUEUE). */
  audioTaskQueue: string;
  /** Segments transcribed at once (TRANSCRIPT_SEGMENT_CONCURRENCY). */
  segmentConcurrency: number;
  /** How long a segment may go without a heartbeat before Temporal hands it to another worker. */
  heartbeatTimeoutSeconds: number;
  /** How long the finished transcript is kept before the workflow deletes it (TRANSCRIPT_RETENTION_SECONDS). */
  retentionSeconds: number;
  /** The transcript has a webhook_url to announce its end to (absent in executions started before webhooks). */
  webhook?: boolean;
}

export const transcriptSteps = ['prepare', 'transcribe', 'finish', 'notify', 'retain'] as const;
export type TranscriptStep = (typeof transcriptSteps)[number];

/** The transcript statuses of spec 2.2. */
export type TranscriptStatus = 'queued' | 'processing' | 'completed' | 'error';

export interface TranscriptProgress {
  status: TranscriptStatus;
  step: TranscriptStep;
  segmentsDone: number;
  /** null until the segment plan exists. */
  segmentsTotal: number | null;
  lastError: string | null;
}

/** What the prepare step found: the segment plan, a transcript that is gone (deleted with its partner), or one already finished. */
export type TranscriptPlan = { kind: 'ready'; segmentCount: number } | { kind: 'gone' } | { kind: 'finished' };

export interface TranscriptRef {
  transcriptId: string;
}

export interface SegmentRef {
  transcriptId: string;
  index: number;
}

export const transcriptProgressQuery = defineQuery<TranscriptProgress>('progress');
/** Stops the transcript: it ends in `error` ("cancelled by an operator: <reason>") and its audio is removed. */
export const cancelTranscriptSignal = defineSignal<[reason?: string]>('cancel');

/** Failure types the activities raise that retrying cannot fix (the transcript ends in `error`). */
export const transcriptFailure = {
  /** The audio cannot be used: unreadable, no audio stream, too long, the URL refused. */
  input: 'TranscriptInputError',
  /** The configured engine cannot do the language. */
  unsupportedLanguage: 'UnsupportedLanguage',
  /** The provider refused the request (4xx). */
  refused: 'ProviderRefused',
} as const;
