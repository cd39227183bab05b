import { heartbeating } from './heartbeating.js';
import type { GpuEmbeddingOutput, GpuJobOutcome, VoiceJobStep, VoiceStepOutcome, VoiceStepPlan, VoiceStepRef } from '../lib/contracts/voice-job.js';
import { abandonVoiceSteps, failVoiceStep, nextVoiceStep, retryFailedVoiceSteps, type VoiceJobDeps } from '../lib/voices/job-steps.js';
import { splitVoiceRecording } from '../lib/voices/splitting.js';
import { embedVoiceLocally } from '../lib/voices/local-embedding.js';
import { awaitVoiceGpuJob, cancelVoiceGpuJob, storeVoiceGpuResult, submitVoiceGpuJob, type SubmitOutcome } from '../lib/voices/gpu-embedding.js';

/**
 * Activities of the `voiceJob` workflow (lib/voices does the work). The split, the local embedding
 * and storing a GPU job's result run on the audio task queue (TEMPORAL_AUDIO_TASK_QUEUE); the
 * rest on the main one. Every write is conditional on the step's generation, so a retried or
 * overtaken activity changes nothing it should not.
 */
export function createVoiceActivities(deps: VoiceJobDeps) {
  return {
    nextVoiceStep: ({ voiceId }: { voiceId: string }): Promise<VoiceStepPlan> => nextVoiceStep(deps, voiceId),
    /** Audio task queue. */
    splitVoiceRecording: ({ voiceId, generation }: VoiceStepRef): Promise<VoiceStepOutcome> => heartbeating((signal) => splitVoiceRecording(deps, voiceId, generation, signal)),
    /** Audio task queue. */
    embedVoiceLocally: ({ voiceId, generation }: VoiceStepRef): Promise<VoiceStepOutcome> => heartbeating((signal) => embedVoiceLocally(deps, voiceId, generation, signal)),
    submitVoiceGpuJob: ({ voiceId, generation }: VoiceStepRef): Promise<SubmitOutcome> => heartbeating((signal) => submitVoiceGpuJob(deps, voiceId, generation, signal)),
    awaitVoiceGpuJob: ({ voiceId, generation, jobId, timeoutSeconds }: VoiceStepRef & { jobId: string; timeoutSeconds: number }): Promise<GpuJobOutcome> =>
      heartbeating((signal) => awaitVoiceGpuJob(deps, voiceId, generation, jobId, { timeoutSeconds, signal })),
    /** Audio task queue. */
    storeVoiceGpuResult: ({ voiceId, generation, output }: VoiceStepRef & { output: GpuEmbeddingOutput }): Promise<VoiceStepOutcome> =>
      heartbeating((signal) => storeVoiceGpuResult(deps, voiceId, generation, output, signal)),
    cancelVoiceGpuJob: ({ jobId }: { jobId: string }) => cancelVoiceGpuJob(deps, jobId),
    failVoiceStep: ({ voiceId, step, generation, message }: VoiceStepRef & { step: VoiceJobStep; message: string }) => failVoiceStep(deps, voiceId, step, generation, message),
    retryFailedVoiceSteps: ({ voiceId }: { voiceId: string }) => retryFailedVoiceSteps(deps, voiceId),
    abandonVoiceSteps: ({ voiceId, message }: { voiceId: string; message: string }) => abandonVoiceSteps(deps, voiceId, message),
  };
}
