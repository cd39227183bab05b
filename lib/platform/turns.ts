import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * Long synchronous work in a shared process (a worker's steps on a large document) gives the event
 * loop a turn every `sliceMs`, so heartbeats, timers and other activities' I/O are not held up
 * while it runs: a document of tens of megabytes otherwise held a worker's event loop longer than
 * its heartbeat timeout, every attempt of the step timed out, and the worker's other documents
 * stalled meanwhile. Call `await turns.give()` between units of work; it costs a clock read until a
 * slice is used up.
 */
export class EventLoopTurns {
  private since = performance.now();

  constructor(private readonly sliceMs = 20) {}

  async give(): Promise<void> {
    if (performance.now() - this.since < this.sliceMs) return;
    await nextTurn();
    this.since = performance.now();
  }
}
