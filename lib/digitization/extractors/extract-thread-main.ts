import { parentPort, workerData } from 'node:worker_threads';
import { extractDocumentText } from './documents.js';
import { UnreadableDocument } from './types.js';
import type { ThreadRequest, ThreadAnswer } from './isolated.js';

/** Reads one document (extractors/isolated.ts starts a thread per document) and answers once. */
const request = workerData as ThreadRequest;
let answer: ThreadAnswer;
try {
  answer = { extracted: await extractDocumentText(request.filePath, request.ext, request.limits) };
} catch (err) {
  answer = err instanceof UnreadableDocument ? { unreadable: err.message } : { error: (err as Error)?.message ?? String(err) };
}
parentPort!.postMessage(answer);
