import type { ServerResponse } from 'node:http';

type Response = ServerResponse;

/**
 * A server-sent-events answer. Writes wait for 'drain' when the client reads slower than the
 * model produces (the caller stops pulling from the provider meanwhile, so back-pressure reaches
 * the provider's connection); a comment line keeps a quiet stream open through proxies.
 */
export class SseWriter {
  private keepAlive: NodeJS.Timeout | null = null;
  private started = false;
  /** True while a write waits for the client to read (observable for tests and metrics). */
  waitingForDrain = false;

  constructor(
    private readonly res: Response,
    private readonly keepAliveMs: number,
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
    if (flush) this.res.flushHeaders();
    this.armKeepAlive();
  }

  /** (Re)starts the quiet-time clock; refreshing the one timer costs no allocation per write. */
  private armKeepAlive() {
    if (this.keepAlive) {
      this.keepAlive.refresh();
      return;
    }
    this.keepAlive = setTimeout(() => {
      if (this.closed || !this.keepAlive) return;
      this.res.write(': keep-alive\n\n');
      this.keepAlive.refresh();
    }, this.keepAliveMs);
    this.keepAlive.unref();
  }

  /** Resolves once the chunk is handed to the socket, or buffered below the high-water mark. */
  async write(chunk: string): Promise<void> {
    this.start();
    if (this.closed || chunk === '') return;
    this.armKeepAlive();
    if (this.res.write(chunk)) return;
    this.waitingForDrain = true;
    await new Promise<void>((resolve) => {
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
  event(type: string, data: unknown) {
    return this.write(`event: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  /** `data: <json>`: the chat-completions stream format. */
  data(data: unknown) {
    return this.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
  }

  end(): void {
    if (this.keepAlive) clearTimeout(this.keepAlive);
    this.keepAlive = null;
    if (!this.closed) this.res.end();
  }
}

/** An AbortSignal that fires when the client goes away before the answer is complete. */
export function clientGone(res: Response): AbortController {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller;
}
