import { ActivityFailure, TimeoutFailure, TimeoutType } from '@temporalio/common';

/**
 * What a workflow records for the user (`processing_error`, a transcript's `error`, a voice job's
 * error) when an activity has failed for good: the activity's own message, or for a timeout what
 * happened in words (the server's own text, `activity Heartbeat timeout`, tells a partner nothing).
 */
export function activityFailureMessage(err: unknown): string {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof TimeoutFailure) {
    switch (cause.timeoutType) {
      case TimeoutType.HEARTBEAT:
        return 'the step stopped reporting progress (its worker was lost or held up) until its retries ran out';
      case TimeoutType.START_TO_CLOSE:
        return 'the step did not finish within its time limit until its retries ran out';
      default:
        return 'no worker took up the step in time';
    }
  }
  return cause instanceof Error ? cause.message : String(cause);
}
