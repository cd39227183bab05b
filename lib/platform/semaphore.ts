/**
 * At most `size` holders at once; the others wait in arrival order. For work whose cost is memory or
 * a whole core each (a thread, a child process), where the number running at once, not the number
 * asked for, must be bounded.
 */
export class Semaphore {
  private used = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly size: number) {}

  /** Resolves with the release function once a place is free; release is idempotent. */
  async acquire(): Promise<() => void> {
    if (this.used < this.size) this.used++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next(); // the place passes on
      else this.used--;
    };
  }

  /** Runs `task` in a place. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    const release = await this.acquire();
    try {
      return await task();
    } finally {
      release();
    }
  }
}
