import type { WhereFilter } from 'weaviate-ts-client';
import type { Logger } from '../platform/logger.js';
import type { EmbeddingProvider } from '../providers/embeddings.js';
import type { ChunkRecord, VectorIndex } from '../providers/vector-index.js';
import { chunkRecord, type DocumentIdentity, type PreparedDocument } from './indexing.js';

/**
 * Embedding and index writes batched across documents (docs/architecture.md,
 * "Embeddings batched across documents"). Each document's `embed` activity hands its chunks to its
 * worker's batcher and waits; whenever the encoder can take a batch, the batcher takes up to
 * `batchChunks` chunks of the documents waiting, in turns (a document with chunks left after a
 * batch goes to the back of the queue, so documents behind a large one wait for one batch of it,
 * not for all of it), embeds them in one model call and writes them in one Weaviate batch. While a
 * batch runs, the next documents gather: batching costs no waiting. Once a document's chunks are
 * all written, `finish` removes what is left of an older version (chunks beyond the new count,
 * chunks in another profile's class) and waits until Weaviate has indexed them, again for every
 * document finishing at that moment in one request per class and one wait.
 *
 * Exactly once: a chunk's object ID is derived from (document, chunk index), so a batch written
 * twice overwrites itself. A worker killed mid-batch takes the batch with it; each activity that
 * handed chunks to it stops heartbeating, Temporal retries it on another worker, and that worker
 * embeds the document again from the last chunk it reported written (`onProgress`, kept in the
 * heartbeat). The document's row says `success` only after its activity saw every chunk written
 * and the leftovers removed.
 *
 * Only the local encoder is batched: a paid API reports usage per call, and each document's usage
 * is admitted and settled on its own (activities/embedding.ts keeps the per-document path for it).
 */
export interface BatchedDocument {
  className: string;
  identity: DocumentIdentity;
  prepared: PreparedDocument;
  /** Chunks an earlier attempt wrote already (from its heartbeat): they are not embedded again. */
  from: number;
  /** Called with the number of chunks written so far from the start (a prefix), as it grows. */
  onProgress?: (written: number) => void;
}

interface Job {
  doc: BatchedDocument;
  /** Next chunk to hand to a batch. */
  next: number;
  /** Chunks written, by index (a later batch can finish before an earlier one). */
  done: Set<number>;
  written: number;
  /** Batches of this job in flight. */
  inFlight: number;
  failed: Error | null;
  withdrawn: boolean;
  resolve(): void;
  reject(err: Error): void;
  settled: boolean;
}

interface FinishRequest {
  className: string;
  documentId: string;
  chunkCount: number;
  resolve(): void;
  reject(err: Error): void;
}

export class EmbeddingCancelled extends Error {}

export interface EmbeddingBatcherOptions {
  embedder: EmbeddingProvider;
  index: VectorIndex;
  /** Chunks per model call and Weaviate batch (EMBEDDING_BATCH_CHUNKS). */
  batchChunks: number;
  /** Longest wait for Weaviate's indexing queue after a finish round (then the round fails and is retried). */
  indexingTimeoutMs?: number;
  log?: Logger;
}

export class EmbeddingBatcher {
  private readonly queue: Job[] = [];
  private running = 0;
  private finishing: FinishRequest[] = [];
  private finishLoop: Promise<void> | null = null;
  /** Batches and documents written since start (for logs and benchmarks). */
  readonly stats = { batches: 0, chunks: 0, documents: 0, finishRounds: 0 };

  constructor(private readonly options: EmbeddingBatcherOptions) {}

  private get parallelism() {
    return Math.max(1, this.options.embedder.parallelism ?? 1);
  }

  /**
   * Embeds and writes the document's chunks from `doc.from` on; resolves when all are written.
   * When `signal` aborts (the document is being deleted), its chunks not yet taken are withdrawn
   * and the promise rejects with EmbeddingCancelled only after every batch holding any of its
   * chunks has finished: nothing of it is written after the caller returns.
   */
  write(doc: BatchedDocument, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const job: Job = { doc, next: doc.from, done: new Set(), written: doc.from, inFlight: 0, failed: null, withdrawn: false, resolve, reject, settled: false };
      if (doc.from >= doc.prepared.chunks.length) return resolve();
      if (signal?.aborted) return reject(new EmbeddingCancelled('embedding cancelled'));
      signal?.addEventListener('abort', () => this.withdraw(job), { once: true });
      this.queue.push(job);
      this.pump();
    });
  }

  private withdraw(job: Job): void {
    if (job.settled) return;
    job.withdrawn = true;
    const i = this.queue.indexOf(job);
    if (i >= 0) this.queue.splice(i, 1);
    this.settle(job);
  }

  /** Ends a job once nothing of it is in flight: done, failed or withdrawn. */
  private settle(job: Job): void {
    if (job.settled || job.inFlight > 0) return;
    if (job.failed) {
      job.settled = true;
      job.reject(job.failed);
    } else if (job.withdrawn) {
      job.settled = true;
      job.reject(new EmbeddingCancelled('embedding cancelled: the document is being deleted'));
    } else if (job.written >= job.doc.prepared.chunks.length) {
      job.settled = true;
      this.stats.documents++;
      job.resolve();
    }
  }

  private pump(): void {
    while (this.running < this.parallelism && this.queue.length > 0) {
      const batch: Array<{ job: Job; index: number }> = [];
      while (batch.length < this.options.batchChunks && this.queue.length > 0) {
        const job = this.queue[0]!;
        const take = Math.min(this.options.batchChunks - batch.length, job.doc.prepared.chunks.length - job.next);
        for (let k = 0; k < take; k++) batch.push({ job, index: job.next + k });
        job.next += take;
        job.inFlight++;
        this.queue.shift();
        // Chunks left (the batch is full): the document waits its next turn behind the others.
        if (job.next < job.doc.prepared.chunks.length) this.queue.push(job);
      }
      this.running++;
      void this.run(batch).finally(() => {
        this.running--;
        this.pump();
      });
    }
  }

  private async run(batch: Array<{ job: Job; index: number }>): Promise<void> {
    const jobs = [...new Set(batch.map((b) => b.job))];
    this.options.log?.debug('embedding batch', { documents: jobs.length, chunks: batch.length, ids: jobs.map((j) => j.doc.identity.documentId) });
    let failure: Error | null = null;
    try {
      const vectors = await this.options.embedder.embed(batch.map((b) => b.job.doc.prepared.embeddedText[b.index]!));
      const byClass = new Map<string, ChunkRecord[]>();
      batch.forEach((b, i) => {
        const records = byClass.get(b.job.doc.className) ?? [];
        records.push(chunkRecord(b.job.doc.identity, b.job.doc.prepared, b.index, vectors[i]!));
        byClass.set(b.job.doc.className, records);
      });
      for (const [className, records] of byClass) await this.options.index.upsertChunks(className, records);
      this.stats.batches++;
      this.stats.chunks += batch.length;
    } catch (err) {
      failure = err instanceof Error ? err : new Error(String(err));
    }
    for (const job of jobs) {
      job.inFlight--;
      if (failure) {
        job.failed ??= failure;
        const i = this.queue.indexOf(job);
        if (i >= 0) this.queue.splice(i, 1);
      } else {
        for (const b of batch) if (b.job === job) job.done.add(b.index);
        while (job.done.has(job.written)) job.written++;
        if (!job.failed && !job.withdrawn) job.doc.onProgress?.(job.written);
      }
      this.settle(job);
    }
  }

  /**
   * After a document's chunks are all written: removes its chunks at or beyond `chunkCount` in its
   * class and all of its chunks in other classes, then waits until Weaviate has indexed what was
   * written (so `success` means searchable). Documents finishing at the same moment share one
   * delete request per class and one wait.
   */
  finish(className: string, documentId: string, chunkCount: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.finishing.push({ className, documentId, chunkCount, resolve, reject });
      this.kickFinishing();
    });
  }

  private kickFinishing(): void {
    if (this.finishLoop) return;
    this.finishLoop = this.runFinishRounds().finally(() => {
      this.finishLoop = null;
      if (this.finishing.length) this.kickFinishing();
    });
  }

  private async runFinishRounds(): Promise<void> {
    while (this.finishing.length > 0) {
      const round = this.finishing.splice(0, 100);
      try {
        await this.finishRound(round);
        this.stats.finishRounds++;
        for (const r of round) r.resolve();
      } catch (err) {
        for (const r of round) r.reject(err instanceof Error ? err : new Error(String(err)));
      }
    }
  }

  private async finishRound(round: FinishRequest[]): Promise<void> {
    const { index } = this.options;
    const classes = await index.chunkClasses();
    const written = [...new Set(round.map((r) => r.className))];
    // One batch delete per class for the whole round.
    for (const cls of classes) {
      const operands: WhereFilter[] = [];
      for (const r of round) {
        if (r.className === cls) {
          operands.push({ operator: 'And', operands: [{ path: ['documentId'], operator: 'Equal', valueText: r.documentId }, { path: ['chunkIndex'], operator: 'GreaterThanEqual', valueInt: r.chunkCount }] });
        } else {
          operands.push({ path: ['documentId'], operator: 'Equal', valueText: r.documentId });
        }
      }
      const where: WhereFilter = operands.length === 1 ? operands[0]! : { operator: 'Or', operands };
      await index.deleteWhere(cls, where);
    }
    // As the per-document path does: past the timeout the chunks are written and will be searchable shortly.
    if (!(await index.waitForIndexing(this.options.indexingTimeoutMs ?? 60_000, undefined, written))) {
      this.options.log?.warn('Weaviate indexing queue not drained in time', { classes: written });
    }
  }
}
