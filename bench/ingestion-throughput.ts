/**
 * Ingestion, creation and listing throughput (issue #20), side by side in one run:
 *
 *   npm run bench:ingestion
 *
 * (a) The same 1,000 generated documents (a few KB of English prose each; BENCH_DOCUMENTS) ingested
 *     twice: in one process without Temporal (the digitize step's extraction, lib/retrieval/indexing.ts
 *     chunking and analysis, the local encoder in batches of 64 with the worker's threads, Weaviate
 *     batch writes, one wait for indexing), and through the system: batch uploads of 20 files with
 *     use_original_as_rewritten=true to the API process, documentPipeline workflows in the worker
 *     process, from the first upload to the last document `success`. Goal: at most 1.3x.
 * (b) Document creation with 32 concurrent clients (BENCH_CLIENTS), each request timed from send to
 *     answer (the answer comes after the workflow has started): single file uploads, single URL
 *     documents, empty documents, batch file uploads of 20, one batch URL import of 1,000 URLs;
 *     with the CPU time per document of the API process and of the Temporal dev server (/proc, not
 *     the API's /metrics: its workflow gauges count Temporal's visibility, which holds up every
 *     workflow start meanwhile), and of the whole machine (/proc/stat: the API, PostgreSQL,
 *     Temporal, the client and whatever else runs). No worker runs meanwhile, so only creation is
 *     measured. Each kind that starts workflows runs twice: back to back (the most accepted; the
 *     32 clients' own queue is in every request's time) and paced, the 32 clients offering 300
 *     documents/s in all (BENCH_PACED_RATE) on a fixed schedule, each request timed from its
 *     turn. Goal: >= 300 documents/s, p99 < 100 ms. A last paced row starts the same workflow from
 *     this process straight to Temporal (no API, HTTP or database): the floor the Temporal dev
 *     server alone sets under the paced rows.
 * (c) GET /api/documents and /api/kb-data of a knowledge base of 10,000 documents (BENCH_LISTED),
 *     whole and a page of 100, p50 and p99 (one request at a time).
 *
 * The API and the worker are their own processes; the client is this process. The system is the
 * test stack (Temporal dev server, Weaviate, a throw-away database) started by the benchmark.
 * Writes the `ingestion-throughput` section of bench/RESULTS.md, except with BENCH_ONLY=system (the
 * ingestion through the system alone, its progress and time on stderr) or BENCH_ONLY=creation
 * (part (b) alone, its table on stderr). BENCH_API_CPU_PROF=<dir> runs the API under
 * `node --cpu-prof` and leaves its profile in that directory when it stops (open it in Chrome's
 * DevTools or `npx speedscope`); BENCH_WORKER_CPU_PROF=<dir> does the same for the worker with
 * BENCH_ONLY=system (a profile for its main thread and one for each encoder thread).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalSentenceEncoder } from '../lib/providers/embeddings.js';
import { VectorIndex, chunkClassFor, type ChunkRecord } from '../lib/providers/vector-index.js';
import { chunkRecord, prepareDocument, type PreparedDocument } from '../lib/retrieval/indexing.js';
import { extractFile } from '../lib/digitization/extractors/index.js';
import { loadConfig, setting } from '../lib/platform/config.js';
import { connectTemporalClient } from '../lib/platform/temporal.js';
import { startDocumentPipeline } from '../lib/knowledge/pipeline-runs.js';
import { systemEnv, testStack } from '../test/support/stack.js';
import { percentile, startApiProcess, startBenchStack, startWorker, stopTestStack, writeSection, type BenchApi, type RunningWorker } from './audio-system.js';
import { generateCorpus } from './support/corpus.js';
import { leanPoster, multipartBody, type FormPart, type LeanResponse } from './support/lean-client.js';
import { creationRow, ingestThroughApi, machineTicks, measureCreation, newBenchKnowledgeBase, TICKS_PER_SECOND, type CreationResult, type IngestionResult } from './support/creation.js';
import { processCpuMs } from './support/results.js';

const DOCUMENTS = setting(process.env, 'BENCH_DOCUMENTS');
const CLIENTS = setting(process.env, 'BENCH_CLIENTS');
const LISTED = setting(process.env, 'BENCH_LISTED');
/**
 * Length of each creation row. 30 s, not 10: at 300 documents a second a 10 s row's p99 is decided
 * by the one or two Temporal dev-server collections that fall into it (a 100 ms stall holds 1 % of
 * its requests), and it can end before a rate the machine cannot sustain has built a queue (on a
 * slower machine, 10 s rows at 300/s showed p50 20-35 ms; 30 s rows, 117 ms).
 */
const CREATE_SECONDS = setting(process.env, 'BENCH_CREATE_SECONDS');
const UPLOAD_BATCH = 20;
/** The offered rate of the paced creation rows (the issue's goal: 300 documents/s with p99 under 100 ms). */
const PACED_RATE = setting(process.env, 'BENCH_PACED_RATE');
/** BENCH_ONLY=system: only the ingestion through the system, reported on stderr (e.g. to watch a long run's worker). */
const SYSTEM_ONLY = process.env.BENCH_ONLY === 'system';
/** BENCH_ONLY=creation: only part (b), reported on stderr (e.g. to profile the API while it creates). */
const CREATION_ONLY = process.env.BENCH_ONLY === 'creation';
const API_CPU_PROFILE_DIR = process.env.BENCH_API_CPU_PROF;
const WORKER_CPU_PROFILE_DIR = process.env.BENCH_WORKER_CPU_PROF;
/**
 * BENCH_SLOW_TRACE=1: after each creation row, the wall-clock time (Unix seconds) of its slowest
 * 1 % of requests' turns, on stderr, to line the tail up with another process's log (e.g. the
 * Temporal server's GODEBUG=gctrace=1 collections).
 */
const SLOW_TRACE = process.env.BENCH_SLOW_TRACE === '1';

const fmt = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : 'n/a');
const load = () => os.loadavg().map((x) => x.toFixed(2)).join(' / ');
/** The test stack's Temporal dev server (the process serving its address), to tell its share of the machine's CPU. */
function temporalServerPid(): number | null {
  const port = testStack().temporalAddress.split(':').pop();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (args.includes('start-dev') && args[args.indexOf('--port') + 1] === port) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return null;
}

function cpuBusy(): () => number {
  const a = machineTicks();
  return () => {
    const b = machineTicks();
    return b.total > a.total ? 1 - (b.idle - a.idle) / (b.total - a.total) : NaN;
  };
}

/** Which part of the system a process is, from its command line (the processes of this machine's run). */
function processRole(pid: number, cmdline: string, comm: string): string {
  if (pid === process.pid) return 'benchmark process (the client; in process: the whole pipeline)';
  if (cmdline.includes('api/server.ts')) return 'API';
  if (cmdline.includes('workers/main.ts')) return 'worker (with its encoder threads)';
  if (cmdline.includes('start-dev')) return 'Temporal dev server';
  if (comm.startsWith('weaviate')) return 'Weaviate';
  if (comm === 'postgres') return 'PostgreSQL';
  return 'other';
}

/**
 * CPU time by part of the system since this call, in seconds (/proc: utime + stime of every
 * process, grouped by processRole, and the machine's busy time). Each process counts what it spent
 * since the call (all of it when it started since); one that exits in between is missed, since its
 * time can no longer be read; the machine's total is not.
 */
function cpuByRole(): () => Map<string, number> {
  const snapshot = () => {
    const byPid = new Map<number, { role: string; seconds: number }>();
    for (const entry of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const cpuMs = processCpuMs(Number(entry));
      try {
        const comm = fs.readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
        const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
        if (!Number.isNaN(cpuMs)) byPid.set(Number(entry), { role: processRole(Number(entry), cmdline, comm), seconds: cpuMs / 1000 });
      } catch {
        // gone meanwhile
      }
    }
    const m = machineTicks();
    return { byPid, machine: (m.total - m.idle) / TICKS_PER_SECOND };
  };
  const before = snapshot();
  return () => {
    const after = snapshot();
    const byRole = new Map<string, number>();
    for (const [pid, { role, seconds }] of after.byPid) byRole.set(role, (byRole.get(role) ?? 0) + seconds - (before.byPid.get(pid)?.seconds ?? 0));
    byRole.set('machine', after.machine - before.machine);
    return byRole;
  };
}

async function idleBusy(): Promise<number> {
  const busy = cpuBusy();
  await new Promise((r) => setTimeout(r, 2000));
  return busy();
}

/** (a) in one process: extraction, chunking and analysis, the encoder, Weaviate writes. */
async function inProcess(corpus: Array<{ name: string; text: string }>, threads: number): Promise<{ ms: number; chunks: number; extractMs: number }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-ingest-'));
  const config = loadConfig(systemEnv());
  const encoder = new LocalSentenceEncoder({ threads });
  const index = new VectorIndex(testStack().weaviateUrl);
  const className = chunkClassFor(`bench-in-process-${Date.now()}`);
  await index.ensureClass(className);
  await encoder.embed(['warm up the encoder']);
  const started = performance.now();
  // Extraction and preparation of each document, then its chunks into shared batches of 64, as
  // many batches in flight as the encoder has threads.
  const prepared: Array<{ id: string; name: string; doc: PreparedDocument }> = [];
  let extractMs = 0;
  for (const [i, d] of corpus.entries()) {
    const t = performance.now();
    const file = path.join(dir, `${i}.md`);
    fs.writeFileSync(file, d.text);
    const { text } = await extractFile(file, 'md', { ocrLanguages: null, pdfOcr: { maxPages: 1, concurrency: 1, dpi: 300 }, libreOfficeTimeoutMs: 1000, limits: config.limits.extraction } as Parameters<typeof extractFile>[2]);
    extractMs += performance.now() - t;
    prepared.push({ id: crypto.randomUUID(), name: d.name, doc: await prepareDocument(text) });
  }
  const all = prepared.flatMap((p) => p.doc.chunks.map((_, i) => ({ p, i })));
  const batches: Array<typeof all> = [];
  for (let i = 0; i < all.length; i += 64) batches.push(all.slice(i, i + 64));
  let next = 0;
  await Promise.all(
    Array.from({ length: encoder.parallelism }, async () => {
      while (next < batches.length) {
        const batch = batches[next++]!;
        const vectors = await encoder.embed(batch.map((b) => b.p.doc.embeddedText[b.i]!));
        const records: ChunkRecord[] = batch.map((b, k) =>
          chunkRecord({ partnerId: 'bench', knowledgeBaseId: 'bench', documentId: b.p.id, documentName: b.p.name, embeddingProfile: encoder.profile.name }, b.p.doc, b.i, vectors[k]!),
        );
        await index.upsertChunks(className, records);
      }
    }),
  );
  await index.waitForIndexing(600_000, undefined, [className]);
  const ms = performance.now() - started;
  fs.rmSync(dir, { recursive: true, force: true });
  return { ms, chunks: all.length, extractMs };
}

/** A process's resident memory, from /proc (Linux), for the progress lines. */
function residentMb(pid: number | undefined): string {
  try {
    const kb = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb ? fmt(Number(kb) / 1024, 0) : '?';
  } catch {
    return '?';
  }
}

/** (a) through the system: batch uploads of 20, until every document is embedded. */
function throughSystem(api: BenchApi, worker: RunningWorker, corpus: Array<{ name: string; text: string }>): Promise<IngestionResult> {
  return ingestThroughApi({
    apiUrl: api.url,
    adminKey: testStack().adminApiKey,
    databaseUrl: testStack().databaseUrl,
    corpus,
    uploadBatch: UPLOAD_BATCH,
    // A worker that dies would leave the ingestion waiting for ever: say so, with its last words.
    alive: () => (worker.child.exitCode !== null || worker.child.signalCode !== null ? `the worker exited (${worker.child.exitCode ?? worker.child.signalCode}):\n${worker.output.slice(-30).join('\n')}` : null),
    progress: (line) => console.error(`through the system: ${line}; worker ${residentMb(worker.child.pid)} MB resident`),
  });
}

/** (b) `CLIENTS` clients creating documents for CREATE_SECONDS (bench/support/creation.ts), with the API's and the Temporal dev server's CPU. */
function creation(api: BenchApi, label: string, docsPerRequest: number, request: () => Promise<LeanResponse>, documentsPerSecond?: number): Promise<CreationResult> {
  const temporal = temporalServerPid();
  return measureCreation({ label, clients: CLIENTS, seconds: CREATE_SECONDS, docsPerRequest, request, documentsPerSecond, cpu: { API: [api.pid], 'Temporal server': temporal === null ? [] : [temporal] }, slowTrace: SLOW_TRACE });
}

/**
 * The floor under the paced rows: the same document workflow started the way the API starts it
 * (lib/knowledge/pipeline-runs.ts, a grpc-js client), from this process at the same rate, with no
 * API, HTTP or database in between. On a task queue no worker polls, so none of them ever runs.
 */
async function workflowStartsAlone(api: BenchApi): Promise<CreationResult> {
  const temporal = await connectTemporalClient(testStack().temporalAddress, 'default');
  const deps = { temporal, taskQueue: 'bench-workflow-starts-alone' };
  try {
    return await creation(api, `workflow start alone (this process straight to Temporal, no API)${paced}`, 1, async () => {
      const documentId = crypto.randomUUID();
      await startDocumentPipeline(deps, { documentId, knowledgeBaseId: crypto.randomUUID(), partner: 'bench', steps: ['digitize'] });
      return { status: 201, body: Buffer.from(documentId) };
    }, PACED_RATE);
  } finally {
    await temporal.connection.close();
  }
}

async function timedGets(url: string, key: string, n: number): Promise<{ p50: number; p99: number; bytes: number }> {
  const ms: number[] = [];
  let bytes = 0;
  await (await fetch(url, { headers: { 'X-API-Key': key } })).arrayBuffer();
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const res = await fetch(url, { headers: { 'X-API-Key': key } });
    const body = await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
    ms.push(performance.now() - t);
    bytes = body.byteLength;
  }
  return { p50: percentile(ms, 50), p99: percentile(ms, 99), bytes };
}

const paced = `, paced at ${PACED_RATE} documents/s`;

/** (b) Document creation by CLIENTS concurrent clients, no worker running: the table's rows. */
async function creationRuns(api: BenchApi): Promise<string[]> {
  const kbB = await newBenchKnowledgeBase(api.url, testStack().adminApiKey, testStack().databaseUrl);
  const file = 'A short note of about two hundred characters, created to measure how fast the service accepts new documents and starts their workflows. It is plain text.\n';
  const client = leanPoster(CLIENTS);
  const documentsUrl = `${api.url}/api/documents/${kbB.name}/${kbB.kb}`;
  const send = (url: string, parts: FormPart[]) => {
    const { body, contentType } = multipartBody(parts);
    return client.post(url, { 'X-API-Key': kbB.key }, body, contentType);
  };
  const uploadSingle = () =>
    send(documentsUrl, [
      { name: 'type', value: 'file' },
      { name: 'folder', value: kbB.folder },
      { name: 'use_original_as_rewritten', value: 'true' },
      { name: 'file', filename: 'note.txt', content: file },
    ]);
  let u = 0;
  const createUrl = () =>
    send(documentsUrl, [
      { name: 'type', value: 'url' },
      { name: 'folder', value: kbB.folder },
      { name: 'url', value: `https://example.org/bench/single/${u++}` },
    ]);
  const uploadBatch = () =>
    send(`${documentsUrl}/files/batch`, [
      { name: 'folder', value: kbB.folder },
      { name: 'use_original_as_rewritten', value: 'true' },
      ...Array.from({ length: UPLOAD_BATCH }, (_, i) => ({ name: 'files', filename: `note-${i}.txt`, content: file })),
    ]);
  const single = await creation(api, 'single file upload (POST /api/documents)', 1, uploadSingle);
  const singlePaced = await creation(api, `single file upload${paced}`, 1, uploadSingle, PACED_RATE);
  const singleUrl = await creation(api, 'single URL document (POST /api/documents, type=url)', 1, createUrl);
  const singleUrlPaced = await creation(api, `single URL document${paced}`, 1, createUrl, PACED_RATE);
  let n = 0;
  const empty = await creation(api, 'empty document (POST .../empty)', 1, () =>
    send(`${documentsUrl}/empty`, [
      { name: 'folder', value: kbB.folder },
      { name: 'name', value: `empty-${n++}` },
      { name: 'type', value: 'file' },
    ]),
  );
  const batched = await creation(api, `batch file upload, ${UPLOAD_BATCH} files a request`, UPLOAD_BATCH, uploadBatch);
  const batchedPaced = await creation(api, `batch file upload${paced}`, UPLOAD_BATCH, uploadBatch, PACED_RATE);
  const startsAlone = await workflowStartsAlone(api);
  const urlStarted = performance.now();
  const urlRes = await fetch(`${api.url}/api/documents/${kbB.name}/${kbB.kb}/batch`, {
    method: 'POST',
    headers: { 'X-API-Key': kbB.key, 'content-type': 'application/json' },
    body: JSON.stringify({ folder: kbB.folder, urls: Array.from({ length: 1000 }, (_, i) => `https://example.org/bench/${i}`) }),
  });
  const urlBody = (await urlRes.json()) as { summary: { succeeded: number } };
  const urlMs = performance.now() - urlStarted;
  client.close();

  const row = (r: CreationResult) => creationRow(r, ['API', 'Temporal server']);
  return [
    '| Request | Requests | Documents | Documents/s | p50 (ms) | p99 (ms) | Over 100 ms | API CPU per document (ms) | Temporal server CPU per document (ms) | Clients (this process) CPU per document (ms) | Machine CPU per document (ms) | Failed |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    row(single),
    row(singlePaced),
    row(singleUrl),
    row(singleUrlPaced),
    row(empty),
    row(batched),
    row(batchedPaced),
    row(startsAlone),
    `| batch URL import, one request of 1,000 URLs | 1 | ${urlBody.summary.succeeded} | ${fmt(urlBody.summary.succeeded / (urlMs / 1000), 0)} | ${fmt(urlMs)} (the request) | | | | | | | ${1000 - urlBody.summary.succeeded} |`,
  ];
}

async function main() {
  const runStarted = new Date();
  const stack = await startBenchStack();
  const threads = loadConfig(systemEnv()).embedding.localThreads;
  const corpus = generateCorpus(DOCUMENTS);
  const corpusChars = corpus.reduce((n, d) => n + d.text.length, 0);
  const apiEnv = { REQUESTS_PER_MINUTE_KNOWLEDGE_BASE: '0' };
  const apiNodeArgs = API_CPU_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(API_CPU_PROFILE_DIR)}`] : [];
  let api: BenchApi | null = null;
  let worker: RunningWorker | null = null;
  const lines: string[] = [];
  try {
    const quietBefore = await idleBusy();
    const loadStart = load();
    api = await startApiProcess(apiEnv, apiNodeArgs);

    if (SYSTEM_ONLY) {
      worker = await startWorker({}, WORKER_CPU_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(WORKER_CPU_PROFILE_DIR)}`] : []);
      const s = await throughSystem(api, worker, corpus);
      console.error(`through the system: ${fmt(s.ms / 1000)} s for ${DOCUMENTS} documents, ${s.chunks} chunks, ${s.failed} failed (results not written: BENCH_ONLY=system)`);
      return;
    }
    if (CREATION_ONLY) {
      const rows = await creationRuns(api);
      console.error(`load average ${loadStart} at the start, ${load()} at the end; ${CLIENTS} clients, ${CREATE_SECONDS} s each (results not written: BENCH_ONLY=creation)\n${rows.join('\n')}`);
      return;
    }
    // (a) in process first, then through the system, then in process again: load from outside
    // the benchmark that comes and goes falls on both.
    const cpuInProcess = cpuByRole();
    const a1 = await inProcess(corpus, threads);
    const inProcessCpu = cpuInProcess();
    console.error(`in process: ${fmt(a1.ms / 1000)} s, ${a1.chunks} chunks`);
    worker = await startWorker({});
    const busyStack = cpuBusy();
    const cpuSystem = cpuByRole();
    const s = await throughSystem(api, worker, corpus);
    const systemCpu = cpuSystem();
    const stackBusy = busyStack();
    console.error(`CPU seconds, in process / through the system: ${[...systemCpu.keys()].map((r) => `${r} ${fmt(inProcessCpu.get(r) ?? 0)} / ${fmt(systemCpu.get(r)!)}`).join('; ')}`);
    console.error(`through the system: ${fmt(s.ms / 1000)} s (${s.failed} failed)`);
    await worker.kill();
    worker = null;
    const a2 = await inProcess(corpus, threads);
    console.error(`in process again: ${fmt(a2.ms / 1000)} s`);
    const baseline = (a1.ms + a2.ms) / 2;
    const loadAfterA = load();

    // (b) creation, no worker running.
    const b = await creationRuns(api);
    const loadAfterB = load();

    // (c) listings at LISTED documents: created by batch URL imports (their workflows wait: no worker).
    const kbC = await newBenchKnowledgeBase(api.url, testStack().adminApiKey, testStack().databaseUrl);
    for (let i = 0; i < LISTED; i += 1000) {
      const res = await fetch(`${api.url}/api/documents/${kbC.name}/${kbC.kb}/batch`, {
        method: 'POST',
        headers: { 'X-API-Key': kbC.key, 'content-type': 'application/json' },
        body: JSON.stringify({ folder: kbC.folder, urls: Array.from({ length: Math.min(1000, LISTED - i) }, (_, k) => `https://example.org/listed/${i + k}`) }),
      });
      if (res.status !== 200) throw new Error(`listing corpus: ${res.status}`);
      await res.arrayBuffer();
    }
    const base = `${api.url}/api/documents/${kbC.name}/${kbC.kb}`;
    const data = `${api.url}/api/kb-data/${kbC.name}/${kbC.kb}`;
    const listWhole = await timedGets(base, kbC.key, 20);
    const dataWhole = await timedGets(data, kbC.key, 20);
    const listPage = await timedGets(`${base}?limit=100`, kbC.key, 100);
    const dataPage = await timedGets(`${data}?limit=100`, kbC.key, 100);
    const loadEnd = load();

    lines.push(
      `Run ${runStarted.toISOString()} (\`npm run bench:ingestion\`), ${os.availableParallelism()} cores, Node ${process.version}; Temporal dev server, Weaviate 1.39 and PostgreSQL 15 on the same machine (the test stack); the API and the worker are their own processes, the client is the benchmark's. Encoder: the local USE-lite on the WASM backend in ${threads} worker thread(s) (EMBEDDING_LOCAL_THREADS), worker at its defaults (WORKER_MAX_ACTIVITIES 32, EMBEDDING_BATCH_CHUNKS 64).`,
      `Load: ${Math.round(quietBefore * 100)} % of the cores busy in the 2 s before the run (nothing of the benchmark running); load average ${loadStart} at the start, ${loadAfterA} after (a), ${loadAfterB} after (b), ${loadEnd} at the end; ${Math.round(stackBusy * 100)} % of the cores busy during the ingestion through the system.`,
      '',
      `**(a) Ingestion of ${DOCUMENTS} generated documents** (bench/support/corpus.ts: ${fmt(corpusChars / DOCUMENTS / 1024, 1)} KB of English prose each on average, ${a1.chunks} chunks). In process: extraction (the digitize step's \`extractFile\`), chunking and analysis (lib/retrieval/indexing.ts), the encoder in batches of 64, Weaviate batch writes, one wait for indexing. Through the system: ${DOCUMENTS / UPLOAD_BATCH} batch uploads of ${UPLOAD_BATCH} files (4 at a time, use_original_as_rewritten=true), from the first upload to the last document \`success\`.`,
      '',
      '| Path | Time (s) | Documents/s | Chunks | vs in process |',
      '|---|---:|---:|---:|---:|',
      `| in process, first | ${fmt(a1.ms / 1000)} | ${fmt(DOCUMENTS / (a1.ms / 1000))} | ${a1.chunks} | |`,
      `| in process, after the system's run | ${fmt(a2.ms / 1000)} | ${fmt(DOCUMENTS / (a2.ms / 1000))} | ${a2.chunks} | |`,
      `| **through the API and workflows** (all uploads accepted after ${fmt(s.acceptedMs / 1000)} s; ${s.failed} failed) | ${fmt(s.ms / 1000)} | ${fmt(DOCUMENTS / (s.ms / 1000))} | ${s.chunks} | **${fmt(s.ms / baseline, 2)}x** |`,
      '',
      `CPU time of each part of the system during (a) (/proc; seconds of one core, and per document):`,
      '',
      '| Process | In process, first (s) | Through the system (s) | Through the system, per document (ms) |',
      '|---|---:|---:|---:|',
      ...[...systemCpu.keys()]
        .filter((role) => role !== 'machine')
        .sort((x, y) => systemCpu.get(y)! - systemCpu.get(x)!)
        .map((role) => `| ${role} | ${fmt(inProcessCpu.get(role) ?? 0)} | ${fmt(systemCpu.get(role)!)} | ${fmt((systemCpu.get(role)! * 1000) / DOCUMENTS)} |`),
      `| **the machine** | ${fmt(inProcessCpu.get('machine')!)} | ${fmt(systemCpu.get('machine')!)} | ${fmt((systemCpu.get('machine')! * 1000) / DOCUMENTS)} |`,
      '',
      `Extraction alone took ${fmt(a1.extractMs / DOCUMENTS)} ms a document in process (the corpus is Markdown, decoded without a thread; parsed formats take one bounded thread each, lib/digitization/extractors/isolated.ts).`,
      '',
      `**(b) Document creation, ${CLIENTS} concurrent clients**, ${CREATE_SECONDS} s each after a 1 s warm-up; a request's time is from sending it to its answer, which comes after the document's workflow has started. Rows without a rate: each client sends its next request when the last is answered (the most the system accepts; the clients' own queue is part of every request's time). Paced rows: the clients offer ${PACED_RATE} documents a second in all on a fixed schedule and a request's time counts from its turn. No worker ran. CPU per document: of the API process and of the Temporal dev server (/proc; not the API's /metrics, whose workflow gauges count Temporal's visibility and would hold up the starts being measured), and of the whole machine (the API, PostgreSQL, the Temporal dev server, this client, and whatever else ran meanwhile): ${os.availableParallelism()} cores divided by it is the most documents a second the machine could create.`,
      '',
      ...b,
      '',
      `**(c) Listings of a knowledge base of ${LISTED.toLocaleString('en')} documents** (URL documents whose workflows wait; one request at a time; 20 requests for whole listings, 100 for pages).`,
      '',
      '| Request | p50 (ms) | p99 (ms) | Answer size |',
      '|---|---:|---:|---:|',
      `| GET /api/documents/{partner}/{kb} (all ${LISTED}) | ${fmt(listWhole.p50)} | ${fmt(listWhole.p99)} | ${fmt(listWhole.bytes / 1024 ** 2)} MB |`,
      `| GET /api/kb-data/{partner}/{kb} (all ${LISTED}) | ${fmt(dataWhole.p50)} | ${fmt(dataWhole.p99)} | ${fmt(dataWhole.bytes / 1024 ** 2)} MB |`,
      `| GET /api/documents/{partner}/{kb}?limit=100 | ${fmt(listPage.p50)} | ${fmt(listPage.p99)} | ${fmt(listPage.bytes / 1024)} KB |`,
      `| GET /api/kb-data/{partner}/{kb}?limit=100 | ${fmt(dataPage.p50)} | ${fmt(dataPage.p99)} | ${fmt(dataPage.bytes / 1024)} KB |`,
    );
    writeSection('ingestion-throughput', `## Ingestion, creation and listing throughput (\`npm run bench:ingestion\`)\n\n${lines.join('\n')}`);
  } finally {
    await worker?.kill();
    await api?.stop();
    await stopTestStack();
    void stack;
  }
}

await main();
process.exit(0);
