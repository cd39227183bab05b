import {
  CancellationScope,
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
  cancelTranscriptSignal,
  transcriptFailure,
  transcriptProgressQuery,
  type TranscriptProgress,
  type TranscriptStatus,
  type TranscriptWorkflowInput,
} from '../lib/contracts/transcript.js';
import { searchAttributes } from '../lib/contracts/search-attributes.js';
import { activityFailureMessage } from '../lib/contracts/activity-failure.js';

const finalTypes = Object.values(transcriptFailure);

/**
 * Workflow versioning (`patched`): executions started before this change set JobStatus to
 * `processing` before the prepare step and to `completed` / `error` by the path taken; they replay
 * that way. Newer ones set it from what the activities report of the row: `processing` once prepare
 * has moved it there, then the status the row really ended in.
 */
const jobStatusFollowsRow = 'transcript-job-status-follows-row';

const { completeTranscript, failTranscript, deleteTranscript } = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '2s', maximumInterval: '1 minute' },
});

// AssemblyAI's delivery: 10 attempts in all, a 10 s answer window each (the activity's own bound).
const { notifyTranscriptWebhook } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '5s', backoffCoefficient: 2, maximumInterval: '5 minutes', maximumAttempts: 10 },
});

/**
 * One transcript (contract: lib/contracts/transcript.ts): prepare → transcribe each segment (on the
 * audio task queue, `segmentConcurrency` at a time; a segment already done is never redone, so a
 * worker lost mid-transcript costs one segment) → join and format → keep for the retention period
 * → delete. Any failure that retrying cannot fix ends the transcript in `error` with its message;
 * the `cancel` signal does the same with the operator's reason.
 */
export async function transcript(input: TranscriptWorkflowInput): Promise<TranscriptStatus> {
  const ref = { transcriptId: input.transcriptId };
  const progress: TranscriptProgress = { status: 'queued', step: 'prepare', segmentsDone: 0, segmentsTotal: null, lastError: null };
  const setStatus = (status: TranscriptStatus) => {
    progress.status = status;
    upsertSearchAttributes([{ key: searchAttributes.jobStatus, value: status }]);
  };
  const work = new CancellationScope();
  let cancelReason: string | null = null;
  setHandler(transcriptProgressQuery, () => progress);
  setHandler(cancelTranscriptSignal, (reason) => {
    if (progress.status === 'completed' || progress.status === 'error' || cancelReason !== null) return;
    cancelReason = reason?.trim() || 'no reason given';
    work.cancel();
  });

  // A failure retrying may fix (an outage of the database, the storage, the audio's server or the
  // transcription provider; the provider's 429; a lost worker) is retried for about an hour: after
  // 2, 4, 8, 16 and 32 s, then every minute. The audio is deleted when a transcript ends, so ending
  // one after a short outage or a minute of rate limiting would lose what the user sent.
  const retry: RetryPolicy = { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 64, nonRetryableErrorTypes: finalTypes };
  const { prepareTranscript } = proxyActivities<Activities>({
    startToCloseTimeout: '2 hours',
    heartbeatTimeout: `${input.heartbeatTimeoutSeconds}s`,
    retry,
  });
  const { transcribeTranscriptSegment } = proxyActivities<Activities>({
    taskQueue: input.audioTaskQueue,
    startToCloseTimeout: '1 hour',
    heartbeatTimeout: `${input.heartbeatTimeoutSeconds}s`,
    retry,
  });

  // Decided before the first command, so that a replay of an older history takes the older path.
  const followsRow = patched(jobStatusFollowsRow);
  let gone = false;
  let ended: TranscriptStatus = 'completed';
  try {
    await work.run(async () => {
      if (!followsRow) setStatus('processing');
      const plan = await prepareTranscript(ref);
      if (plan.kind === 'gone') {
        gone = true;
        return;
      }
      if (plan.kind === 'ready') {
        // prepare has moved the row from `queued` to `processing`.
        if (followsRow) setStatus('processing');
        progress.step = 'transcribe';
        progress.segmentsTotal = plan.segmentCount;
        let next = 0;
        const lane = async () => {
          while (next < plan.segmentCount) {
            const index = next++;
            await transcribeTranscriptSegment({ transcriptId: input.transcriptId, index });
            progress.segmentsDone++;
          }
        };
        await Promise.all(Array.from({ length: Math.min(input.segmentConcurrency, plan.segmentCount) }, lane));
      } else if (!followsRow) {
        // Older executions: a transcript found finished was reported `completed`, whatever it was.
        return;
      }
      // A transcript found already finished (`finished`: e.g. ended in error while its workflow was
      // stopped, then the workflow reset) is not changed; completeTranscript reports how it ended.
      progress.step = 'finish';
      const outcome = await completeTranscript({ ...ref, retentionSeconds: input.retentionSeconds });
      if (outcome === 'gone') gone = true;
      else ended = followsRow ? outcome : 'completed';
    });
    // Deleted meanwhile (its partner was deleted): nothing left to do or keep.
    if (gone) {
      await deleteTranscript(ref);
      return progress.status;
    }
    setStatus(ended);
  } catch (err) {
    // Segments still running in other lanes are stopped before the transcript is closed.
    work.cancel();
    const message =
      cancelReason !== null ? `cancelled by an operator: ${cancelReason}` : isCancellation(err) ? 'cancelled by an operator (workflow cancelled)' : activityFailureMessage(err);
    progress.lastError = message;
    progress.step = 'finish';
    const outcome = await CancellationScope.nonCancellable(() => failTranscript({ ...ref, message, retentionSeconds: input.retentionSeconds }));
    // The row may have completed before the failure reached it: report what it says.
    if (!followsRow) setStatus('error');
    else if (outcome !== 'gone') setStatus(outcome);
  }

  // Decided by the input: executions started before webhooks existed have no `webhook` and replay as they ran.
  if (input.webhook === true) {
    progress.step = 'notify';
    try {
      await notifyTranscriptWebhook(ref);
    } catch {
      // Given up after the last attempt (the receiver's last status is on the row), or cancelled by a delete.
    }
  }

  // Kept for the retention period; cancelling the workflow now deletes the transcript at once.
  progress.step = 'retain';
  try {
    await sleep(input.retentionSeconds * 1000);
  } catch (err) {
    if (!isCancellation(err)) throw err;
  }
  await CancellationScope.nonCancellable(() => deleteTranscript(ref));
  return progress.status;
}
