import { Worker } from 'node:worker_threads';
import type { ExtractionLimits } from '../../platform/config.js';
import { Semaphore } from '../../platform/semaphore.js';
import { UnreadableDocument, type Extracted } from './types.js';

/**
 * The formats parsed in this process (DOCX, XLSX, PPTX, EPUB, HTML, CSV, JSON, XML, YAML) are
 * read in a worker thread, one document at a time per thread, with a JavaScript heap limit
 * (EXTRACT_MAX_HEAP_MB) and a wall-time limit (EXTRACT_TIMEOUT_SECONDS): a file whose parsing would
 * exhaust memory (a decompression bomb, an XML entity bomb, a gigantic spreadsheet) or never end
 * ends that thread, not the worker process, and fails its document with a clear reason. The bytes
 * the parsers work on outside the heap are bounded where they come from (the ZIP budget of
 * lib/digitization/zip-reader.ts; the upload limit for the others). At most EXTRACT_MAX_THREADS
 * such threads run at once in a process (each is a JavaScript runtime of its own with the parsers
 * loaded, ~100 MB before it reads anything, and keeps a core busy): the other documents wait for a
 * thread, so that 32 concurrent activities cannot become 32 threads and gigabytes.
 */
export interface ThreadRequest {
  filePath: string;
  ext: string;
  limits: ExtractionLimits;
}

export type ThreadAnswer = { extracted: Extracted } | { unreadable: string } | { error: string };

const threadFile = new URL('./extract-thread.mjs', import.meta.url);

const formatNames: Record<string, string> = {
  docx: 'the Word (.docx) file', xlsx: 'the Excel (.xlsx) file', pptx: 'the PowerPoint (.pptx) file', epub: 'the EPUB book',
  html: 'the HTML page', htm: 'the HTML page', csv: 'the CSV file', json: 'the JSON file', xml: 'the XML file', yaml: 'the YAML file', yml: 'the YAML file',
};
const whatOf = (ext: string) => formatNames[ext] ?? `the .${ext} file`;

/**
 * Threads are kept and reused: starting one (a JavaScript runtime, the TypeScript loader and the
 * parsers) costs ~0.7 s of CPU here, far more than reading a typical document. A thread reads one
 * document at a time; one that ran out of memory, timed out or failed in any way other than
 * answering is ended and never reused, and each is retired after THREAD_DOCUMENTS documents, so
 * nothing one document leaves behind lasts. Idle threads do not keep the process alive.
 */
const THREAD_DOCUMENTS = 200;

interface PooledThread {
  worker: Worker;
  documents: number;
}

class ThreadPool {
  private readonly idle: PooledThread[] = [];
  readonly slots: Semaphore;

  constructor(private readonly limits: ExtractionLimits) {
    this.slots = new Semaphore(limits.maxThreads);
  }

  private start(): PooledThread {
    const worker = new Worker(threadFile, {
      resourceLimits: { maxOldGenerationSizeMb: this.limits.maxHeapMb, maxYoungGenerationSizeMb: Math.min(64, Math.max(8, Math.floor(this.limits.maxHeapMb / 16))) },
      stdout: false,
      stderr: false,
    });
    // A thread that ends while idle (it should not) is simply not handed out again.
    worker.on('exit', () => {
      const i = this.idle.findIndex((t) => t.worker === worker);
      if (i >= 0) this.idle.splice(i, 1);
    });
    return { worker, documents: 0 };
  }

  /** Reads one document in a thread of the pool (the caller holds one of `slots`); `limits` bound its reading (the ZIP budget). */
  read(filePath: string, ext: string, limits: ExtractionLimits): Promise<Extracted> {
    const thread = this.idle.pop() ?? this.start();
    const { worker } = thread;
    worker.ref();
    return new Promise<Extracted>((resolve, reject) => {
      let settled = false;
      const settle = (reusable: boolean, fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        worker.off('message', onMessage);
        worker.off('error', onError);
        worker.off('exit', onExit);
        thread.documents++;
        if (reusable && thread.documents < THREAD_DOCUMENTS) {
          worker.unref();
          this.idle.push(thread);
        } else void worker.terminate();
        fn();
      };
      const timer = setTimeout(
        () => settle(false, () => reject(new UnreadableDocument(`${whatOf(ext)} took too long to read (over ${Math.round(limits.timeoutMs / 1000)} s, EXTRACT_TIMEOUT_SECONDS)`))),
        limits.timeoutMs,
      );
      const onMessage = (answer: ThreadAnswer) =>
        settle(true, () => {
          if ('extracted' in answer) resolve(answer.extracted);
          else if ('unreadable' in answer) reject(new UnreadableDocument(answer.unreadable));
          else reject(new Error(`reading ${whatOf(ext)} failed: ${answer.error}`));
        });
      const onError = (err: Error & { code?: string }) =>
        settle(false, () => {
          if (err.code === 'ERR_WORKER_OUT_OF_MEMORY') {
            reject(new UnreadableDocument(`${whatOf(ext)} needs more than the ${limits.maxHeapMb} MiB of memory reading one document may use (EXTRACT_MAX_HEAP_MB); it is far too large or a decompression bomb`));
          } else reject(err);
        });
      const onExit = (code: number) => settle(false, () => reject(new Error(`reading ${whatOf(ext)} stopped unexpectedly (thread exit ${code})`)));
      worker.on('message', onMessage);
      worker.on('error', onError);
      worker.on('exit', onExit);
      worker.postMessage({ filePath, ext, limits } satisfies ThreadRequest);
    });
  }
}

/** One pool per thread count and heap limit (the configuration's, in practice: one per process). */
const pools = new Map<string, ThreadPool>();
const poolFor = (limits: ExtractionLimits) => {
  const id = `${limits.maxThreads}:${limits.maxHeapMb}`;
  let pool = pools.get(id);
  if (!pool) pools.set(id, (pool = new ThreadPool(limits)));
  return pool;
};

let running = 0;
/** Documents being read in extraction threads in this process now. */
export const runningExtractionThreads = () => running;

export function extractIsolated(filePath: string, ext: string, limits: ExtractionLimits): Promise<Extracted> {
  const pool = poolFor(limits);
  return pool.slots.run(async () => {
    running++;
    try {
      return await pool.read(filePath, ext, limits);
    } finally {
      running--;
    }
  });
}
