import type { ServerResponse } from 'node:http';
import type { Response } from 'express';
import type { AnswerChannel, EventStream, TimingPhase } from '../../lib/messaging/answer.js';
import { SseWriter } from './sse-writer.js';
import { mark, sendTiming } from './timing.js';

/** An AbortController that fires when the client goes away before the answer is complete. */
export function clientGone(res: ServerResponse): AbortController {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller;
}

/** The messaging domain's answer channel over an HTTP response. */
export class HttpAnswer implements AnswerChannel {
  readonly abort: AbortController;
  private events: EventStream | null = null;

  constructor(
    private readonly res: Response,
    private readonly keepAliveMs: number,
  ) {
    this.abort = clientGone(res);
  }

  mark(phase: TimingPhase): void {
    mark(this.res, phase);
  }

  stream(): EventStream {
    return (this.events ??= new SseWriter(this.res, this.keepAliveMs, () => sendTiming(this.res, true)));
  }

  /** Before a JSON answer goes out. */
  finishTiming(): void {
    sendTiming(this.res);
  }
}
