/**
 * Waiting in tests: on observable state, with a deadline, never on a fixed sleep for work to happen.
 * Shared by every test (test/support/system.ts re-exports `eventually`).
 */

const pollMs = 200;
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` until it returns a truthy value (returned), or fails after `timeoutMs` with the last error. */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value) return value;
    } catch (err) {
      last = err;
    }
    await pause(pollMs);
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
}

/**
 * Proves that something does not happen: `probe` must stay true for all of `ms` (checked at once,
 * then every 100 ms, and at the end), and fails as soon as it is not. `why` says why watching that
 * long is enough; it is part of the failure message, and reads as the proof at the call site.
 */
export async function holdsFor(what: string, watch: { ms: number; why: string }, probe: () => boolean | Promise<boolean>): Promise<void> {
  const end = Date.now() + watch.ms;
  for (;;) {
    const last = Date.now() >= end;
    if (!(await probe())) throw new Error(`${what} stopped holding after ${watch.ms - Math.max(0, end - Date.now())} ms of ${watch.ms} ms watched (${watch.why})`);
    if (last) return;
    await pause(Math.min(100, Math.max(0, end - Date.now())));
  }
}
