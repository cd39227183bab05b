import type { ServerResponse } from 'node:http';
import type { EventStream } from '../../lib/messaging/answer.js';

type Response = ServerResponse;

/**
 * A server-sent-events answer. Writes wait for 'drain' when the client reads slower than the
 * model produces (the caller stops pulling from the provider meanwhile, so back-pressure reaches
 * the provider's connection); a comment line keeps a quiet stream open through proxies.
 */
export class SseWriter implements EventStream {
  private keepAlive: NodeJS.Timeout | null = null;
  /** When the last bytes went out (performance.now()). */
  private wroteAt = 0;
  private started = false;
  /** True while a write waits for the client to read (observable for tests and metrics). */
  waitingForDrain = false;

  constructor(
    private readonly res: Response,
    private readonly keepAliveMs: number,
    /** Called once before the stream's head goes out, with its first events or comment (the Server-Timing header). */
    private beforeHead: (() => void) | null = null,
  ) {}

  get closed() {
    return this.res.destroyed || this.res.writableEnded;
  }

  /**
   * Sets the stream's headers. They go out with the first event (one write, not two), or with the
   * first keep-alive comment when the stream stays quiet; `flush` sends them at once.
   */
  start(flush = false): void {
    if (this.started) return;
    this.started = true;
    this.res.statusCode = 200;
    this.res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    this.res.setHeader('Cache-Control', 'no-cache, no-transform');
    this.res.setHeader('Connection', 'keep-alive');
    this.res.setHeader('X-Accel-Buffering', 'no');
    if (flush) {
      this.headGoesOut();
      this.res.flushHeaders();
    }
    this.armKeepAlive();
  }

  private headGoesOut() {
    const hook = this.beforeHead;
    this.beforeHead = null;
    hook?.();
  }

  /**
   * Starts the quiet-time clock. Writes only note their time (a timer refreshed per write costs a
   * re-insertion in Node's timer list per relayed chunk); when the timer fires after a write, it
   * waits out the rest of the quiet time from that write.
   */
  private armKeepAlive() {
    if (this.keepAlive) return;
    const fire = () => {
      if (this.closed || !this.keepAlive) return;
      const quiet = performance.now() - this.wroteAt;
      if (quiet < this.keepAliveMs) {
        this.keepAlive = setTimeout(fire, this.keepAliveMs - quiet).unref();
        return;
      }
      this.headGoesOut();
      this.res.write(': keep-alive\n\n');
      this.wroteAt = performance.now();
      this.keepAlive = setTimeout(fire, this.keepAliveMs).unref();
    };
    this.wroteAt = performance.now();
    this.keepAlive = setTimeout(fire, this.keepAliveMs).unref();
  }

  /** Nothing once the chunk is handed to the socket or buffered below the high-water mark; else a promise of the drain. */
  write(chunk: string | Buffer): Promise<void> | void {
    this.start();
    if (this.closed || chunk.length === 0) return;
    this.wroteAt = performance.now();
    if (this.beforeHead) this.headGoesOut();
    if (this.res.write(chunk)) return;
    this.waitingForDrain = true;
    return new Promise<void>((resolve) => {
      const done = () => {
        this.waitingForDrain = false;
        this.res.off('drain', done);
        this.res.off('close', done);
        resolve();
      };
      this.res.once('drain', done);
      this.res.once('close', done);
    });
  }

  /** `event: <type>` + `data: <json>`: the responses stream format. */
  async event(type: string, data: unknown): Promise<void> {
    await this.write(`event: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  /** `data: <json>`: the chat-completions stream format. */
  async data(data: unknown): Promise<void> {
    await this.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
  }

  end(last?: string): void {
    if (this.keepAlive) clearTimeout(this.keepAlive);
    this.keepAlive = null;
    if (this.closed) return;
    if (last && this.beforeHead) this.headGoesOut();
    this.res.end(last);
  }
}
