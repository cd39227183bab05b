import { condition, continueAsNew, patched, proxyActivities, setHandler, sleep, upsertSearchAttributes } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import {
  progressQuery,
  retrySignal,
  type CallOutcome,
  type DialogAnalysisInput,
  type DialogAnalysisProgress,
  type ResponseMode,
} from '../lib/contracts/dialog-analysis.js';
import { searchAttributes } from '../lib/contracts/search-attributes.js';

/** The model call: long, heartbeating every 2 s, so a lost worker is noticed within 10 s. */
const { callDialogModel } = proxyActivities<Activities>({
  startToCloseTimeout: '15 minutes',
  heartbeatTimeout: '10 seconds',
  // Database or worker hiccups; provider failures come back as outcomes, not as errors.
  retry: { initialInterval: '1 second', maximumAttempts: 3 },
});
const { startDialogAnalysis, failDialogAnalysis, reopenDialogAnalysis, deleteDialogAnalysis } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 10 },
});

/** Transient provider failures (429, 5xx, timeouts, lost workers) tolerated per generation by runs started before the outage window. */
const maxTransientFailures = 5;
/** The outage window of runs started before DIALOG_ANALYSIS_MAX_OUTAGE_SECONDS, and of their retries. */
const defaultMaxOutageSeconds = 1800;
const maxBackoffMs = 5 * 60_000;
const nextMode: Record<ResponseMode, ResponseMode | null> = { json_schema: 'json_object', json_object: 'prompt', prompt: null };

/**
 * One dialog analysis (contract: lib/contracts/dialog-analysis.ts): ask the model until an answer
 * conforms to the caller's schemas, at most `maxAttempts` judged answers, then `completed` or
 * `failed` with the reason; keep the result for the retention period (one durable timer), then
 * delete it. During retention a failed analysis can be run again with the `retry` signal (as the
 * next generation, continue-as-new). Transient provider failures in a row are waited out (1, 2,
 * 4 ... s, at most 5 minutes apart, longer when the provider asks) for up to `maxOutageSeconds`,
 * so a provider outage delays an analysis rather than failing it. Bounded: per generation at most
 * maxAttempts answers, 2 response-format downgrades and the transient failures of one outage window
 * per answer (15 in the default 30 minutes), each call bounded by its timeout.
 */
export async function dialogAnalysis(input: DialogAnalysisInput): Promise<string> {
  const { id, generation, maxAttempts, retentionSeconds } = input;
  const maxOutageMs = (input.maxOutageSeconds ?? defaultMaxOutageSeconds) * 1000;
  const progress: DialogAnalysisProgress = {
    state: 'in-progress',
    step: 'prepare',
    generation,
    responseMode: null,
    attempts: 0,
    maxAttempts,
    calls: 0,
    interruptedCalls: 0,
    transientFailures: 0,
    lastError: null,
    expiresAt: null,
  };
  let retryRequested = false;
  setHandler(progressQuery, () => progress);
  setHandler(retrySignal, () => void (retryRequested = true));
  upsertSearchAttributes([{ key: searchAttributes.jobStatus, value: 'running' }]);

  type Outcome = { state: 'completed' | 'failed'; expiresAt: string | null } | 'gone';
  const fail = async (reason: string): Promise<Outcome> => {
    progress.step = 'finish';
    progress.lastError = reason;
    const { expiresAt } = await failDialogAnalysis({ id, generation, reason, retentionSeconds });
    return { state: 'failed', expiresAt };
  };

  /** Asks the model until an answer conforms, or the bounds are reached. */
  const analyse = async (first: ResponseMode): Promise<Outcome> => {
    let mode = first;
    progress.responseMode = mode;
    // The transient failures since the provider last answered, and when the first of them ended.
    let inARow = 0;
    let outageSince = 0;
    for (let seq = 1; ; seq++) {
      progress.step = 'call_model';
      progress.calls = seq;
      const r: CallOutcome = await callDialogModel({ id, generation, seq, mode, retentionSeconds });
      const transient = r.outcome === 'rate_limited' || r.outcome === 'unavailable' || r.outcome === 'ambiguous' || r.outcome === 'interrupted';
      if (!transient) inARow = 0;
      switch (r.outcome) {
        case 'gone':
          return 'gone';
        case 'valid':
          progress.attempts++;
          return { state: 'completed', expiresAt: r.expiresAt };
        case 'finished':
          return { state: r.state, expiresAt: r.expiresAt };
        case 'invalid':
          progress.attempts++;
          progress.lastError = r.errors;
          if (progress.attempts >= maxAttempts) {
            const s = progress.attempts === 1 ? '' : 's';
            return fail(`the model's answers did not conform to the schemas after ${progress.attempts} attempt${s}: ${r.errors.split('\n').join('; ')}`);
          }
          break;
        case 'response_format_unsupported': {
          // Not the model's fault and not an attempt: ask again without structured outputs / JSON mode.
          const next = nextMode[mode];
          if (!next) return fail(r.message);
          progress.lastError = r.message;
          mode = next;
          progress.responseMode = mode;
          break;
        }
        case 'permanent':
        case 'not_configured':
          return fail(r.message);
        case 'rate_limited':
        case 'unavailable':
        case 'ambiguous':
        case 'interrupted': {
          // Nothing usable came back; asking again may work.
          progress.transientFailures++;
          if (r.outcome === 'interrupted') progress.interruptedCalls++;
          progress.lastError = r.message;
          if (patched('dialog-analysis-outage-window')) {
            if (inARow++ === 0) outageSince = Date.now();
            const lasted = Date.now() - outageSince;
            if (lasted >= maxOutageMs) return fail(`the model API failed ${inARow} times in a row over ${Math.round(lasted / 1000)} seconds: ${r.message}`);
            progress.step = 'backoff';
            // Never sooner than the exponential step, so that the window holds few calls whatever the provider asks.
            const backoff = Math.max(r.retryAfterMs ?? 0, 1000 * 2 ** (inARow - 1));
            await sleep(Math.min(backoff, maxBackoffMs, Math.max(maxOutageMs - lasted, 100)));
            break;
          }
          if (progress.transientFailures > maxTransientFailures) return fail(`the model API failed ${progress.transientFailures} times: ${r.message}`);
          progress.step = 'backoff';
          const backoff = r.retryAfterMs ?? 1000 * 2 ** (progress.transientFailures - 1);
          await sleep(Math.min(Math.max(backoff, 100), maxBackoffMs));
          break;
        }
      }
    }
  };

  const prepared = await startDialogAnalysis({ id, generation });
  const outcome: Outcome =
    prepared.status === 'gone'
      ? 'gone'
      : prepared.status === 'finished'
        ? { state: prepared.state, expiresAt: prepared.expiresAt }
        : prepared.status === 'not_configured'
          ? await fail(prepared.reason)
          : await analyse(prepared.mode);
  // The row is gone (its partner was deleted): nothing to keep or delete.
  if (outcome === 'gone') return 'gone';
  const { expiresAt } = outcome;
  progress.state = outcome.state;

  progress.expiresAt = expiresAt;
  progress.step = 'retained';
  upsertSearchAttributes([{ key: searchAttributes.jobStatus, value: progress.state === 'completed' ? 'completed' : 'failed' }]);
  // A retry sent while the analysis ran is not for this outcome.
  retryRequested = false;
  const remainingMs = Math.max(1, (expiresAt ? Date.parse(expiresAt) : Date.now()) - Date.now());
  const retried = await condition(() => retryRequested && progress.state === 'failed', remainingMs);
  if (retried) {
    const { reopened } = await reopenDialogAnalysis({ id, generation });
    if (reopened) await continueAsNew<typeof dialogAnalysis>({ ...input, generation: generation + 1 });
  }
  progress.step = 'delete';
  await deleteDialogAnalysis({ id });
  return progress.state;
}
