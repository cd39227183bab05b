import { Worker } from 'node:worker_threads';
import type { ExtractionLimits } from '../../platform/config.js';
import { Semaphore } from '../../platform/semaphore.js';
import { UnreadableDocument, type Extracted } from './types.js';

/**
 * The formats read in this process (DOCX, XLSX, PPTX, EPUB, HTML, CSV, JSON, XML, YAML, text) are
 * read in a worker thread of their own, one per document, with a JavaScript heap limit
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

const threadSlots = new Map<number, Semaphore>();
const slotsFor = (size: number) => {
  let slots = threadSlots.get(size);
  if (!slots) threadSlots.set(size, (slots = new Semaphore(size)));
  return slots;
};

let running = 0;
/** Extraction threads running in this process now. */
export const runningExtractionThreads = () => running;

export function extractIsolated(filePath: string, ext: string, limits: ExtractionLimits): Promise<Extracted> {
  return slotsFor(limits.maxThreads).run(async () => {
    running++;
    try {
      return await extractInThread(filePath, ext, limits);
    } finally {
      running--;
    }
  });
}

function extractInThread(filePath: string, ext: string, limits: ExtractionLimits): Promise<Extracted> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const worker = new Worker(threadFile, {
      workerData: { filePath, ext, limits } satisfies ThreadRequest,
      resourceLimits: { maxOldGenerationSizeMb: limits.maxHeapMb, maxYoungGenerationSizeMb: Math.min(64, Math.max(8, Math.floor(limits.maxHeapMb / 16))) },
      stdout: false,
      stderr: false,
    });
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn();
      void worker.terminate();
    };
    const timer = setTimeout(
      () => settle(() => reject(new UnreadableDocument(`${whatOf(ext)} took too long to read (over ${Math.round(limits.timeoutMs / 1000)} s, EXTRACT_TIMEOUT_SECONDS)`))),
      limits.timeoutMs,
    );
    worker.once('message', (answer: ThreadAnswer) =>
      settle(() => {
        if ('extracted' in answer) resolve(answer.extracted);
        else if ('unreadable' in answer) reject(new UnreadableDocument(answer.unreadable));
        else reject(new Error(`reading ${whatOf(ext)} failed: ${answer.error}`));
      }),
    );
    worker.once('error', (err: Error & { code?: string }) =>
      settle(() => {
        if (err.code === 'ERR_WORKER_OUT_OF_MEMORY') {
          reject(new UnreadableDocument(`${whatOf(ext)} needs more than the ${limits.maxHeapMb} MiB of memory reading one document may use (EXTRACT_MAX_HEAP_MB); it is far too large or a decompression bomb`));
        } else reject(err);
      }),
    );
    worker.once('exit', (code) => settle(() => reject(new Error(`reading ${whatOf(ext)} stopped unexpectedly (thread exit ${code})`))));
  });
}
