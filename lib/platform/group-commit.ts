/**
 * Group commit, as databases do it for their logs: requests for the same key that arrive while a
 * batch of that key is in flight wait and go together as the next batch, one round trip and one
 * durable commit for all of them. Nothing is delayed to fill a batch: a lone request goes at once.
 * Used where each request would otherwise hold a row lock through its own commit's WAL flush
 * (budget admission of one knowledge base), so that the flush, not the lock, is shared.
 */
export interface GroupCommitOptions {
  /** Most requests in one batch (default 256); more wait for the next. */
  maxBatch?: number;
  /**
   * When a batch of several fails, run each of its requests again alone, so that one faulty
   * request cannot fail the others. Only for batches that are atomic (one statement, one
   * transaction: a failed batch applied nothing) and requests that may be repeated.
   */
  retryAlone?: boolean;
}

export class GroupCommit<K, Req, Res> {
  private readonly waiting = new Map<K, Array<{ req: Req; resolve: (r: Res) => void; reject: (e: unknown) => void }>>();
  private readonly running = new Set<K>();
  private readonly maxBatch: number;
  private readonly retryAlone: boolean;

  constructor(
    /** Runs one batch; answers one result per request, in order. */
    private readonly runBatch: (key: K, batch: Req[]) => Promise<Res[]>,
    options: GroupCommitOptions = {},
  ) {
    this.maxBatch = Math.max(1, options.maxBatch ?? 256);
    this.retryAlone = options.retryAlone ?? false;
  }

  submit(key: K, req: Req): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      const queue = this.waiting.get(key) ?? [];
      queue.push({ req, resolve, reject });
      this.waiting.set(key, queue);
      if (!this.running.has(key)) void this.drain(key);
    });
  }

  private async drain(key: K): Promise<void> {
    this.running.add(key);
    try {
      for (let queue = this.waiting.get(key); queue?.length; queue = this.waiting.get(key)) {
        const batch = queue.splice(0, this.maxBatch);
        if (queue.length === 0) this.waiting.delete(key);
        try {
          const results = await this.runBatch(key, batch.map((b) => b.req));
          batch.forEach((b, i) => b.resolve(results[i]!));
        } catch (err) {
          if (!this.retryAlone || batch.length === 1) {
            for (const b of batch) b.reject(err);
            continue;
          }
          // In order, one at a time: the same order the batch would have decided them in.
          for (const b of batch) {
            try {
              b.resolve((await this.runBatch(key, [b.req]))[0]!);
            } catch (alone) {
              b.reject(alone);
            }
          }
        }
      }
    } finally {
      this.running.delete(key);
    }
  }
}
