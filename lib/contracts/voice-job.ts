import { defineQuery, defineSignal } from '@temporalio/workflow';

/**
 * Contract of the `voiceJob` workflow: the jobs of one voice (ID `voice-<partner>-<voice uuid>`,
 * the partner's name when the voice was created; kept in the voice's row). Postgres says what is
 * wanted: the API records a request (splitting / embedding `in_progress`, a new generation) and
 * wakes the workflow with signal-with-start; the workflow asks which step is next, runs it, and
 * ends when nothing is left. A failed step waits for the operator's `retry` (or a new request from
 * the API) for the retry window, then the workflow closes with the voice `failed`.
 */
export const voiceJobWorkflowType = 'voiceJob';
export const voiceJobWorkflowId = (partnerName: string, voiceId: string) => `voice-${partnerName}-${voiceId}`;

export interface VoiceJobInput {
  voiceId: string;
  /** Task queue of the CPU-heavy audio activities (TEMPORAL_AUDIO_TASK_QUEUE). */
  audioTaskQueue: string;
  /** How long an activity may go without a heartbeat before Temporal hands it to another worker. */
  heartbeatTimeoutSeconds: number;
  /** How long a failed job waits for `retry` before the workflow closes (VOICE_RETRY_WINDOW_SECONDS). */
  retryWindowSeconds: number;
  /** A GPU job not finished this long after submission is cancelled (VOICE_JOB_TIMEOUT_SECONDS). */
  gpuJobTimeoutSeconds: number;
}

export const voiceJobSteps = ['split', 'embed'] as const;
export type VoiceJobStep = (typeof voiceJobSteps)[number];

/** The statuses of spec 3 (splitting and embedding each). */
export type VoiceStepStatus = 'idle' | 'in_progress' | 'completed' | 'failed';

/** What the workflow does next, from the voice's row. */
export type VoiceStepPlan =
  | { kind: 'split'; generation: number }
  | { kind: 'embed'; generation: number; engine: 'local' | 'gpu' }
  /** Nothing in progress; `failed` when a step failed (the job then waits for a retry). */
  | { kind: 'idle'; failed: boolean }
  /** The voice was deleted (with its partner): nothing to do. */
  | { kind: 'gone' };

export interface VoiceStepRef {
  voiceId: string;
  generation: number;
}

/** Outcome of a step: done, or overtaken by a newer request / the voice's deletion (nothing written). */
export type VoiceStepOutcome = 'done' | 'superseded' | 'gone';

/** The output of a finished GPU job, as validated by the worker (docs/api/voices-transcription-speech-dialog.md, "Embedding with a GPU job service"). */
export interface GpuEmbeddingOutput {
  embeddingUrl: string;
  sampleScores: Array<{ sampleIndex: number; score: number }>;
  testSamples: Array<{ sampleIndex: number | null; sentenceIndex: number; url: string }>;
  remoteVoiceId: string | null;
}

export type GpuJobOutcome = { kind: 'completed'; output: GpuEmbeddingOutput } | { kind: 'superseded' } | { kind: 'gone' };

export interface VoiceJobProgress {
  /** `running` a step, `waiting_for_retry` after a failure, `done` when the workflow is about to close. */
  state: 'running' | 'waiting_for_retry' | 'done';
  step: VoiceJobStep | null;
  generation: number | null;
  /** The GPU job being awaited (RunPod id), if any. */
  gpuJobId: string | null;
  lastError: string | null;
  /** Steps run by this execution (continue-as-new starts again at 0). */
  stepsRun: number;
}

export const voiceJobProgressQuery = defineQuery<VoiceJobProgress>('progress');
/** The API recorded new work in Postgres (signal-with-start): look for the next step. */
export const wakeVoiceJobSignal = defineSignal('wake');
/** The operator's retry: a failed split and/or embedding runs again (ignored when nothing failed). */
export const retryVoiceJobSignal = defineSignal('retry');

/** Failure types the activities raise that retrying cannot fix (the step ends `failed`). */
export const voiceJobFailure = {
  /** The recording or a sample cannot be used: unreadable, no audio stream, no speech, too long. */
  input: 'VoiceInputError',
  /** The GPU job service refused the job, or the job ended FAILED / CANCELLED / TIMED_OUT / past its time. */
  gpuJob: 'VoiceGpuJobFailed',
  /** The TTS type cannot be made by the engine that would make it. */
  unsupported: 'VoiceUnsupported',
} as const;

/** Search-attribute `JobStatus` values of voice jobs. */
export type VoiceJobStatus = 'splitting' | 'embedding' | 'failed' | 'completed';
