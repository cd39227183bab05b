import {
  CancellationScope,
  condition,
  continueAsNew,
  isCancellation,
  patched,
  proxyActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  type RetryPolicy,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import {
  retryVoiceJobSignal,
  voiceJobFailure,
  voiceJobProgressQuery,
  wakeVoiceJobSignal,
  type VoiceJobInput,
  type VoiceJobProgress,
  type VoiceJobStatus,
  type VoiceStepPlan,
} from '../lib/contracts/voice-job.js';
import { searchAttributes } from '../lib/contracts/search-attributes.js';
import { activityFailureMessage, outageWaitMs, serviceOutageOf } from '../lib/contracts/activity-failure.js';

const finalTypes = Object.values(voiceJobFailure);

/** Steps one execution runs before it continues as new (bounded history for voices worked on for months). */
const STEPS_PER_RUN = 100;

/**
 * How long a step that finds a service down (`ServiceUnavailable`: the file storage, the GPU job
 * service) is tried again before it fails, when the failure does not say. Runs started before the
 * patch fail such a step at once, as any other.
 */
const MAX_OUTAGE_SECONDS = 3600;
const waitsOutOutages = 'voice-job-waits-out-outages';

const { nextVoiceStep, failVoiceStep, retryFailedVoiceSteps, abandonVoiceSteps, cancelVoiceGpuJob } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1s', maximumInterval: '30s' },
});

/**
 * The jobs of one voice (contract: lib/contracts/voice-job.ts). Loop: ask Postgres which step is
 * wanted (a split before an embedding), run it, and record a failure; when nothing is left, end.
 * After a failure the run waits for the operator's `retry` (the failed steps run again as new
 * generations) or for new work from the API (`wake`), at most the retry window; then it ends with
 * the voice `failed`, and the next request starts a new run. Cancelling the workflow stops its GPU
 * job and fails whatever was in progress.
 */
export async function voiceJob(input: VoiceJobInput): Promise<string> {
  const ref = { voiceId: input.voiceId };
  const progress: VoiceJobProgress = { state: 'running', step: null, generation: null, gpuJobId: null, lastError: null, stepsRun: 0 };
  let woken = false;
  let retryAsked = false;
  setHandler(voiceJobProgressQuery, () => progress);
  setHandler(wakeVoiceJobSignal, () => {
    woken = true;
  });
  setHandler(retryVoiceJobSignal, () => {
    // A retry means something only once a step has failed; sent while all is well it is ignored.
    if (progress.lastError === null) return;
    retryAsked = true;
    woken = true;
  });
  const setStatus = (status: VoiceJobStatus) => upsertSearchAttributes([{ key: searchAttributes.jobStatus, value: status }]);
  /** Since when (workflow time) the current step has found a service down, and how many waits so far. */
  let outageSince: number | null = null;
  let outageRounds = 0;

  const heartbeatTimeout = `${input.heartbeatTimeoutSeconds}s` as const;
  const retry: RetryPolicy = { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 5, nonRetryableErrorTypes: finalTypes };
  const audio = proxyActivities<Activities>({ taskQueue: input.audioTaskQueue, startToCloseTimeout: '2 hours', heartbeatTimeout, retry });
  // Submitting to the GPU job service: an outage of it (5xx, refused) is waited out for about 15
  // minutes (2 s doubling to 1 minute, 20 attempts), as its status endpoint's is; a refusal fails at once.
  const main = proxyActivities<Activities>({ startToCloseTimeout: '10 minutes', heartbeatTimeout, retry: { ...retry, maximumAttempts: 20 } });
  const polling = proxyActivities<Activities>({
    startToCloseTimeout: `${input.gpuJobTimeoutSeconds + 600}s`,
    heartbeatTimeout,
    retry: { ...retry, maximumAttempts: 20 },
  });

  const runStep = async (plan: Extract<VoiceStepPlan, { kind: 'split' | 'embed' }>): Promise<void> => {
    const step = { voiceId: input.voiceId, generation: plan.generation };
    if (plan.kind === 'split') {
      await audio.splitVoiceRecording(step);
      return;
    }
    if (plan.engine === 'local') {
      await audio.embedVoiceLocally(step);
      return;
    }
    const submitted = await main.submitVoiceGpuJob(step);
    if (submitted.kind !== 'submitted') return;
    progress.gpuJobId = submitted.jobId;
    const outcome = await polling.awaitVoiceGpuJob({ ...step, jobId: submitted.jobId, timeoutSeconds: input.gpuJobTimeoutSeconds });
    progress.gpuJobId = null;
    if (outcome.kind === 'completed') await audio.storeVoiceGpuResult({ ...step, output: outcome.output });
  };

  try {
    for (;;) {
      if (progress.stepsRun >= STEPS_PER_RUN) await continueAsNew<typeof voiceJob>(input);
      woken = false;
      const plan = await nextVoiceStep(ref);
      if (plan.kind === 'gone') {
        progress.state = 'done';
        return 'gone';
      }
      if (plan.kind === 'split' || plan.kind === 'embed') {
        progress.state = 'running';
        progress.step = plan.kind;
        progress.generation = plan.generation;
        progress.lastError = null;
        retryAsked = false;
        setStatus(plan.kind === 'split' ? 'splitting' : 'embedding');
        try {
          await runStep(plan);
          outageSince = null;
          outageRounds = 0;
        } catch (err) {
          if (isCancellation(err)) throw err;
          const outage = serviceOutageOf(err, MAX_OUTAGE_SECONDS);
          if (outage && patched(waitsOutOutages)) {
            // An outage delays the voice rather than failing it: the step is planned and run again
            // (its work is idempotent), 2 s ... 5 min apart, until the outage has lasted its window.
            outageSince ??= Date.now();
            const lasted = Date.now() - outageSince;
            const windowMs = outage.maxOutageSeconds * 1000;
            if (lasted < windowMs) {
              const wait = outageWaitMs(outageRounds++, lasted, windowMs);
              progress.lastError = `${outage.message}; trying again in ${Math.round(wait / 1000)} s`;
              await sleep(wait);
              progress.stepsRun++;
              continue;
            }
          }
          outageSince = null;
          outageRounds = 0;
          progress.lastError = activityFailureMessage(err);
          progress.gpuJobId = null;
          await failVoiceStep({ ...ref, step: plan.kind, generation: plan.generation, message: progress.lastError });
        }
        progress.stepsRun++;
        continue;
      }
      progress.step = null;
      progress.generation = null;
      if (retryAsked) {
        retryAsked = false;
        await retryFailedVoiceSteps(ref);
        continue;
      }
      // New work signalled after Postgres was read: read it again rather than end without it.
      if (woken) continue;
      if (!plan.failed) {
        progress.state = 'done';
        setStatus('completed');
        return 'completed';
      }
      // A step failed: wait for the operator's retry or new work, for the retry window at most.
      progress.state = 'waiting_for_retry';
      progress.lastError ??= 'a step failed (see the voice)';
      setStatus('failed');
      if (!(await condition(() => woken, input.retryWindowSeconds * 1000))) {
        progress.state = 'done';
        return 'failed';
      }
    }
  } catch (err) {
    if (!isCancellation(err)) throw err;
    // Cancelled (by an operator, or the voice's deletion): stop the GPU job, fail what was in progress.
    await CancellationScope.nonCancellable(async () => {
      if (progress.gpuJobId) await cancelVoiceGpuJob({ jobId: progress.gpuJobId });
      await abandonVoiceSteps({ ...ref, message: 'cancelled by an operator (workflow cancelled)' });
    });
    progress.state = 'done';
    setStatus('failed');
    return 'cancelled';
  }
}
