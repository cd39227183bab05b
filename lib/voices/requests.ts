import type { Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import type { Voice } from '../../generated/prisma/client.js';
import type { Services } from '../services.js';
import type { Principal } from '../platform/api-keys.js';
import { AppError, conflict } from '../platform/errors.js';
import { consumeRateLimit } from '../platform/rate-limit.js';
import { isWorkflowRunning } from '../platform/temporal.js';
import { searchAttributes } from '../contracts/search-attributes.js';
import { voiceJobWorkflowType, wakeVoiceJobSignal, type VoiceJobInput, type VoiceJobStatus } from '../contracts/voice-job.js';

/**
 * The API side of voice jobs: admission (the per-partner rate of job-starting requests), the lock
 * (a voice whose splitting or embedding is `in_progress`), and handing work to the voice's
 * workflow. Work is recorded in Postgres first (status `in_progress`, a new generation), then the
 * workflow `voice-<partner>-<voice id>` is woken with signal-with-start: it is started when no run
 * is open, and a run that is open (working, or waiting for a retry) picks the new work up.
 */
export type VoiceApiDeps = Pick<Services, 'db' | 'storage' | 'config' | 'log'> & { temporal: Client };

export const isLocked = (v: Pick<Voice, 'splittingStatus' | 'embeddingStatus'>) => v.splittingStatus === 'in_progress' || v.embeddingStatus === 'in_progress';

export const lockedConflict = (v: Pick<Voice, 'name' | 'splittingStatus' | 'embeddingStatus'>) =>
  conflict(`voice ${JSON.stringify(v.name)} is currently being processed (splitting: ${v.splittingStatus}, embedding: ${v.embeddingStatus}); try again when it is done`);

/** Job-starting requests per partner per minute (VOICE_RATE_LIMIT_PER_MINUTE; `client`: who asks, whose turn a 429 books); the administrator key is not limited. */
export async function admitVoiceRequest(deps: VoiceApiDeps, principal: Principal | null, client: string): Promise<void> {
  const limit = deps.config.voices.rateLimitPerMinute;
  if (!principal?.partnerId || limit === 0) return;
  const decision = await consumeRateLimit(deps.db, { key: `voice-request:${principal.partnerId}`, limit, windowSeconds: 60, client });
  if (!decision.allowed) {
    throw new AppError('rate_limited', `voice rate limit: ${limit} uploads and job requests per minute per partner; retry in ${decision.retryAfterSeconds} s`, { retryAfterSeconds: decision.retryAfterSeconds });
  }
}

export function voiceJobInput(config: VoiceApiDeps['config'], voiceId: string): VoiceJobInput {
  return {
    voiceId,
    audioTaskQueue: config.transcription.audioTaskQueue,
    heartbeatTimeoutSeconds: config.voices.heartbeatTimeoutSeconds,
    retryWindowSeconds: config.voices.retryWindowSeconds,
    gpuJobTimeoutSeconds: config.voices.gpuJobTimeoutSeconds,
  };
}

/** Wakes (or starts) the voice's workflow. Throws a 503 when Temporal cannot be reached. */
export async function wakeVoiceJob(deps: VoiceApiDeps, voice: Pick<Voice, 'id' | 'workflowId' | 'splittingStatus'>, partnerName: string): Promise<void> {
  const status: VoiceJobStatus = voice.splittingStatus === 'in_progress' ? 'splitting' : 'embedding';
  try {
    await deps.temporal.workflow.signalWithStart(voiceJobWorkflowType, {
      workflowId: voice.workflowId,
      taskQueue: deps.config.temporalTaskQueue,
      args: [voiceJobInput(deps.config, voice.id)],
      signal: wakeVoiceJobSignal,
      signalArgs: [],
      typedSearchAttributes: new TypedSearchAttributes([
        { key: searchAttributes.partner, value: partnerName },
        { key: searchAttributes.jobStatus, value: status },
      ]),
    });
  } catch (err) {
    throw new AppError('unavailable', `the voice job could not be queued; retry later (${(err as Error).message})`);
  }
}

/**
 * A voice left `in_progress` by a workflow that no longer runs (terminated by an operator, or
 * never started because the API died between recording the work and starting it) would stay
 * locked forever: when it is read a minute after its last change and its workflow is not running,
 * the steps are failed ("stopped outside the service"), so that it can be retried, renamed or deleted.
 */
export async function releaseStuckVoice(deps: VoiceApiDeps, voice: Voice): Promise<Voice> {
  if (!isLocked(voice) || voice.updatedAt.getTime() > Date.now() - 60_000) return voice;
  if (await isWorkflowRunning(deps.temporal, voice.workflowId).catch(() => true)) return voice;
  const message = 'stopped outside the service (its workflow is no longer running); request it again';
  const now = new Date();
  await deps.db.$transaction([
    deps.db.voice.updateMany({ where: { id: voice.id, splittingStatus: 'in_progress', splitGeneration: voice.splitGeneration }, data: { splittingStatus: 'failed', splittingError: message } }),
    deps.db.voice.updateMany({
      where: { id: voice.id, embeddingStatus: 'in_progress', embedGeneration: voice.embedGeneration },
      data: { embeddingStatus: 'failed', embeddingError: message, embeddingUpdateStatus: 'failed', embeddingUpdatedAt: now },
    }),
  ]);
  return (await deps.db.voice.findUnique({ where: { id: voice.id } })) ?? voice;
}

/** Cancels the voice's workflow if a run is open (the voice was deleted); a missing workflow is fine. */
export async function cancelVoiceJob(deps: VoiceApiDeps, workflowId: string): Promise<void> {
  try {
    if (await isWorkflowRunning(deps.temporal, workflowId)) await deps.temporal.workflow.getHandle(workflowId).cancel();
  } catch (err) {
    deps.log.warn('cancelling the workflow of a deleted voice failed; it ends by itself when it finds the voice gone', { workflow_id: workflowId, err });
  }
}
