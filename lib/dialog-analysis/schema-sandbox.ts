import { Worker } from 'node:worker_threads';

/**
 * Callers' JSON Schemas are compiled, and answers validated against them, in worker threads with
 * a time limit, never on the event loop of the API or the worker. ajv's own security notes say
 * why: compiling an untrusted schema can take long (a schema at the 100,000-character limit takes
 * up to a second or two here), and a caller's `pattern` such as `^(a|a)*$` backtracks
 * catastrophically on a 40-character string. On the event loop either would stall every tenant's
 * requests; in a thread, a task over the limit is cut off by terminating the thread (a new one is
 * started for the next task) and reported as too slow.
 *
 * A small pool of threads is started on demand, reused (the first task pays about half a second
 * of start-up, later ones a few milliseconds), and stopped after a minute without work; idle
 * threads never keep a process alive. Each thread has a heap limit, so a schema that would exhaust
 * memory ends that thread, not the process.
 */
export type Dialect = 'draft-07' | '2020-12';

export interface AjvError {
  instancePath: string;
  schemaPath: string;
  keyword: string;
  params: Record<string, unknown>;
  message: string | null;
}

export type SandboxTask =
  /** validateSchema against the dialect's meta-schema, then compile. */
  | { op: 'check'; dialect: Dialect; schema: unknown }
  /** Compile each schema and validate `data[name]` against `schemas[name]`. */
  | { op: 'validate'; dialects: Record<string, Dialect>; schemas: Record<string, unknown>; data: Record<string, unknown> };

export interface CompileError {
  name: string;
  message: string;
  missingRef: string | null;
}

export type SandboxResult =
  | { ok: true }
  | { schemaErrors: AjvError[] }
  | { compileError: CompileError }
  | { errors: Record<string, AjvError[]> }
  /** The task took longer than the limit (the thread was stopped). */
  | { timedOut: true }
  /** The thread died (e.g. its heap limit): the task could not be done. */
  | { crashed: string };

interface Slot {
  worker: Worker | null;
  ready: Promise<void> | null;
  busy: boolean;
  idleTimer: NodeJS.Timeout | null;
}

interface Pending {
  task: SandboxTask;
  resolve(result: SandboxResult): void;
}

const threadFile = new URL('./schema-sandbox-thread.mjs', import.meta.url);
const bootTimeoutMs = 30_000;
const idleMs = 60_000;

export class SchemaSandbox {
  private readonly slots: Slot[];
  private readonly queue: Pending[] = [];
  private nextId = 1;

  constructor(private readonly options: { timeoutMs: number; threads?: number; heapMb?: number }) {
    this.slots = Array.from({ length: options.threads ?? 2 }, () => ({ worker: null, ready: null, busy: false, idleTimer: null }));
  }

  run(task: SandboxTask): Promise<SandboxResult> {
    return new Promise((resolve) => {
      this.queue.push({ task, resolve });
      this.dispatch();
    });
  }

  /** Stops every thread (tasks in flight answer `crashed`). */
  async close(): Promise<void> {
    await Promise.all(this.slots.map((slot) => this.stop(slot)));
  }

  private dispatch(): void {
    for (const slot of this.slots) {
      if (!this.queue.length) return;
      if (slot.busy) continue;
      const pending = this.queue.shift()!;
      slot.busy = true;
      if (slot.idleTimer) clearTimeout(slot.idleTimer);
      void this.execute(slot, pending.task).then((result) => {
        slot.busy = false;
        slot.worker?.unref();
        slot.idleTimer = setTimeout(() => void this.stop(slot), idleMs).unref();
        pending.resolve(result);
        this.dispatch();
      });
    }
  }

  private spawn(slot: Slot): void {
    const worker = new Worker(threadFile, {
      // Not the parent's `--import tsx`: the thread is plain JavaScript and starts faster without it.
      execArgv: [],
      resourceLimits: { maxOldGenerationSizeMb: this.options.heapMb ?? 256 },
    });
    worker.unref();
    slot.worker = worker;
    slot.ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the schema sandbox thread did not start')), bootTimeoutMs);
      const onMessage = (m: { ready?: boolean }) => {
        if (!m?.ready) return;
        clearTimeout(timer);
        worker.off('message', onMessage);
        resolve();
      };
      worker.on('message', onMessage);
      worker.once('error', (err) => (clearTimeout(timer), reject(err)));
      worker.once('exit', (code) => (clearTimeout(timer), reject(new Error(`the schema sandbox thread exited (${code})`))));
    });
    // A thread that dies is replaced on its next use.
    worker.once('exit', () => {
      if (slot.worker === worker) {
        slot.worker = null;
        slot.ready = null;
      }
    });
    worker.on('error', () => undefined);
  }

  private async execute(slot: Slot, task: SandboxTask): Promise<SandboxResult> {
    try {
      if (!slot.worker) this.spawn(slot);
      await slot.ready;
    } catch (err) {
      await this.stop(slot);
      return { crashed: (err as Error).message };
    }
    const worker = slot.worker!;
    worker.ref();
    const id = this.nextId++;
    return new Promise<SandboxResult>((resolve) => {
      const done = (result: SandboxResult) => {
        clearTimeout(timer);
        worker.off('message', onMessage);
        worker.off('exit', onExit);
        resolve(result);
      };
      const onMessage = (m: { id?: number; result?: SandboxResult }) => {
        if (m?.id === id && m.result) done(m.result);
      };
      const onExit = (code: number) => done({ crashed: `the schema sandbox thread ended (exit code ${code}; too large for its memory limit?)` });
      // The clock starts once the thread is up, so its start-up never counts against a task.
      const timer = setTimeout(() => {
        done({ timedOut: true });
        void this.stop(slot);
      }, this.options.timeoutMs);
      worker.on('message', onMessage);
      worker.once('exit', onExit);
      worker.postMessage({ id, task });
    });
  }

  private async stop(slot: Slot): Promise<void> {
    const worker = slot.worker;
    slot.worker = null;
    slot.ready = null;
    if (slot.idleTimer) clearTimeout(slot.idleTimer);
    slot.idleTimer = null;
    if (worker) await worker.terminate();
  }
}
