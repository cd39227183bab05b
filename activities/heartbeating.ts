import { Context } from '@temporalio/activity';

/**
 * Runs `work` while heartbeating every `everyMs`: a model call, a child process or a poll does not
 * heartbeat by itself, and without heartbeats a lost worker is noticed only at the activity's
 * start-to-close timeout. `work` gets the activity's cancellation signal. `details` are sent with
 * each heartbeat (progress a retry resumes from must not be replaced by nothing meanwhile).
 */
export async function heartbeating<T>(work: (signal: AbortSignal) => Promise<T>, everyMs = 2000, details?: unknown): Promise<T> {
  const ctx = Context.current();
  const timer = setInterval(() => ctx.heartbeat(details), everyMs);
  try {
    ctx.heartbeat(details);
    return await work(ctx.cancellationSignal);
  } finally {
    clearInterval(timer);
  }
}
