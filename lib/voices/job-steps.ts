import type { Services } from '../services.js';
import { voiceJobFailure, type VoiceJobStep, type VoiceStepPlan } from '../contracts/voice-job.js';

/**
 * The bookkeeping of the `voiceJob` workflow, from the voice's row (Postgres says what is wanted,
 * the workflow does it): which step is next, a step that failed, the operator's retry, and steps
 * abandoned when the workflow is cancelled. Each is safe to repeat (Temporal retries activities):
 * every write is conditional on the step's generation and status.
 */
export type VoiceJobDeps = Pick<Services, 'db' | 'storage' | 'config' | 'log'>;

/** The recording or a sample cannot be used: retrying cannot help, the step ends `failed` with this message. */
export class VoiceInputError extends Error {
  override name = voiceJobFailure.input;
}

/** The GPU job service refused the job, or the job ended without a usable result. */
export class VoiceGpuJobFailed extends Error {
  override name = voiceJobFailure.gpuJob;
}

/** The requested TTS type cannot be made by the engine that would make it. */
export class VoiceUnsupported extends Error {
  override name = voiceJobFailure.unsupported;
}

/** Splitting first (an embedding waits for the samples it is made from), then embedding. */
export async function nextVoiceStep(deps: VoiceJobDeps, voiceId: string): Promise<VoiceStepPlan> {
  const v = await deps.db.voice.findUnique({ where: { id: voiceId } });
  if (!v) return { kind: 'gone' };
  if (v.splittingStatus === 'in_progress') return { kind: 'split', generation: v.splitGeneration };
  if (v.embeddingStatus === 'in_progress') return { kind: 'embed', generation: v.embedGeneration, engine: deps.config.voices.gpuJobs ? 'gpu' : 'local' };
  return { kind: 'idle', failed: v.splittingStatus === 'failed' || v.embeddingStatus === 'failed' };
}

const clip = (message: string) => message.slice(0, 2000);

/**
 * A step failed for good. A failed split also fails the embedding queued behind it (it had no
 * samples to be made from), so that nothing stays `in_progress` (locked).
 */
export async function failVoiceStep(deps: VoiceJobDeps, voiceId: string, step: VoiceJobStep, generation: number, message: string): Promise<void> {
  const now = new Date();
  if (step === 'split') {
    await deps.db.$transaction([
      deps.db.voice.updateMany({
        where: { id: voiceId, embeddingStatus: 'in_progress', splitGeneration: generation, splittingStatus: 'in_progress' },
        data: { embeddingStatus: 'failed', embeddingError: clip(`not run: splitting failed (${message})`), embeddingUpdateStatus: 'failed', embeddingUpdatedAt: now },
      }),
      deps.db.voice.updateMany({ where: { id: voiceId, splitGeneration: generation, splittingStatus: 'in_progress' }, data: { splittingStatus: 'failed', splittingError: clip(message) } }),
    ]);
    return;
  }
  await deps.db.voice.updateMany({
    where: { id: voiceId, embedGeneration: generation, embeddingStatus: 'in_progress' },
    data: { embeddingStatus: 'failed', embeddingError: clip(message), embeddingUpdateStatus: 'failed', embeddingUpdatedAt: now },
  });
}

/**
 * The operator's retry: a failed split runs again (and the embedding after it), or a failed
 * embedding alone; each as a new generation. Returns whether anything was retried.
 */
export async function retryFailedVoiceSteps(deps: VoiceJobDeps, voiceId: string): Promise<boolean> {
  const v = await deps.db.voice.findUnique({ where: { id: voiceId } });
  if (!v) return false;
  if (v.splittingStatus === 'failed' && v.originalFilename) {
    const r = await deps.db.voice.updateMany({
      where: { id: voiceId, splittingStatus: 'failed', splitGeneration: v.splitGeneration },
      data: {
        splittingStatus: 'in_progress', splittingError: null, splitGeneration: { increment: 1 },
        embeddingStatus: 'in_progress', embeddingError: null, embedGeneration: { increment: 1 },
      },
    });
    return r.count > 0;
  }
  if (v.embeddingStatus === 'failed') {
    const r = await deps.db.voice.updateMany({
      where: { id: voiceId, embeddingStatus: 'failed', embedGeneration: v.embedGeneration },
      data: { embeddingStatus: 'in_progress', embeddingError: null, embedGeneration: { increment: 1 } },
    });
    return r.count > 0;
  }
  return false;
}

/** The workflow was cancelled (by an operator, or the voice's deletion): whatever was in progress fails with `message`. */
export async function abandonVoiceSteps(deps: VoiceJobDeps, voiceId: string, message: string): Promise<void> {
  const now = new Date();
  await deps.db.$transaction([
    deps.db.voice.updateMany({ where: { id: voiceId, splittingStatus: 'in_progress' }, data: { splittingStatus: 'failed', splittingError: clip(message) } }),
    deps.db.voice.updateMany({
      where: { id: voiceId, embeddingStatus: 'in_progress' },
      data: { embeddingStatus: 'failed', embeddingError: clip(message), embeddingUpdateStatus: 'failed', embeddingUpdatedAt: now },
    }),
  ]);
}
