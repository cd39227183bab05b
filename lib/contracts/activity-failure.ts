import { ActivityFailure, ApplicationFailure, TimeoutFailure, TimeoutType } from '@temporalio/common';

/**
 * The failure type of an activity that found a service it needs unavailable (refused or broken
 * connections, 408, 429, 5xx): the workflow waits the outage out for the details' window, trying
 * again `outageWaitMs` apart, instead of failing the work.
 */
export const serviceUnavailableFailure = 'ServiceUnavailable';

/**
 * The details of a `ServiceUnavailable` failure: the worker's outage window for that service, and
 * optionally where the activity got to, which the workflow hands back to its next try (opaque to it).
 */
export interface ServiceOutageDetails {
  maxOutageSeconds: number;
  resume?: unknown;
}

/** An activity's `ServiceUnavailable` failure: its message, window (`fallbackSeconds` when it has none) and resume point. */
export function serviceOutageOf(err: unknown, fallbackSeconds: number): { message: string; maxOutageSeconds: number; resume?: unknown } | null {
  if (!(err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.type === serviceUnavailableFailure)) return null;
  const details = err.cause.details?.[0] as Partial<ServiceOutageDetails> | undefined;
  return { message: err.cause.message, maxOutageSeconds: details?.maxOutageSeconds ?? fallbackSeconds, ...(details?.resume !== undefined ? { resume: details.resume } : {}) };
}

/** The wait before try `round + 1` of an outage (2 s, 4 s, 8 s ... 5 min), never past the window's end. */
export const outageWaitMs = (round: number, lastedMs: number, windowMs: number) => Math.max(Math.min(2000 * 2 ** round, 5 * 60_000, windowMs - lastedMs), 100);

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
