import { parentPort } from 'node:worker_threads';
import { extractDocumentText } from './documents.js';
import { UnreadableDocument } from './types.js';
import type { ThreadRequest, ThreadAnswer } from './isolated.js';

/** Reads the documents extractors/isolated.ts sends this thread, one at a time, answering each. */
parentPort!.on('message', async (request: ThreadRequest) => {
  let answer: ThreadAnswer;
  try {
    answer = { extracted: await extractDocumentText(request.filePath, request.ext, request.limits) };
  } catch (err) {
    answer = err instanceof UnreadableDocument ? { unreadable: err.message } : { error: (err as Error)?.message ?? String(err) };
  }
  parentPort!.postMessage(answer);
});
