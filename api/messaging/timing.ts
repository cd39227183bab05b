import type { Response } from 'express';
import type { TimingPhase } from '../../lib/messaging/answer.js';

/**
 * Where a /v3 request's time before the provider's first byte went, as a Server-Timing header when
 * MESSAGING_SERVER_TIMING is set (browsers' developer tools and bench/messaging-latency.ts read
 * it): `arrival` (from the first middleware to the quota gate), `auth` (the quota key), `route`
 * (rate limit, reading and validating the body), `admit` (the quota admission's round trip),
 * `provider` (until the provider's answer began: its headers for a stream, the whole answer
 * otherwise; a chat completion's knowledge search included), `relay` (from the provider's headers
 * to the first events written). Milliseconds.
 */
type Marks = { received?: number; gate: number; authed?: number } & Partial<Record<TimingPhase, number>>;

const marksOf = (res: Pick<Response, 'locals'>) => res.locals.timing as Marks | undefined;

/** Called by the quota gate as a request arrives; nothing is recorded unless `enabled`. */
export function startTiming(res: Pick<Response, 'locals'>, enabled: boolean): void {
  if (enabled) res.locals.timing = { received: res.locals.receivedAt as number | undefined, gate: performance.now() } satisfies Marks;
}

export function mark(res: Pick<Response, 'locals'>, at: Exclude<keyof Marks, 'gate'>): void {
  const marks = marksOf(res);
  if (marks) marks[at] = performance.now();
}

/** Sets the header from the marks so far (before the answer's first byte is written; `firstEvents`: a stream's, with them). */
export function sendTiming(res: Response, firstEvents = false): void {
  const m = marksOf(res);
  if (!m || res.headersSent) return;
  const phases: Array<[string, number | undefined, number | undefined]> = [
    ['arrival', m.received, m.gate],
    ['auth', m.gate, m.authed],
    ['route', m.authed, m.handler],
    ['admit', m.handler, m.admitted],
    ['provider', m.admitted, m.provider],
    ['relay', m.provider, firstEvents ? performance.now() : undefined],
  ];
  const parts = phases.filter(([, a, b]) => a !== undefined && b !== undefined).map(([name, a, b]) => `${name};dur=${(b! - a!).toFixed(3)}`);
  if (parts.length) res.setHeader('Server-Timing', parts.join(', '));
}
