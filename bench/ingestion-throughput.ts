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
import pg from 'pg';
import { LocalSentenceEncoder } from '../lib/providers/embeddings.js';
import { VectorIndex, chunkClassFor, type ChunkRecord } from '../lib/providers/vector-index.js';
import { chunkRecord, prepareDocument, type PreparedDocument } from '../lib/retrieval/indexing.js';
import { extractFile } from '../lib/digitization/extractors/index.js';
import { loadConfig } from '../lib/platform/config.js';
import { connectTemporalClient } from '../lib/platform/temporal.js';
import { startDocumentPipeline } from '../lib/knowledge/pipeline-runs.js';
import { systemEnv, testStack } from '../test/support/stack.js';
import { percentile, startApiProcess, startBenchStack, startWorker, stopTestStack, writeSection, type BenchApi, type RunningWorker } from './audio-system.js';
import { generateCorpus } from './support/corpus.js';
import { leanPoster, multipartBody, type FormPart, type LeanResponse } from './support/lean-client.js';

const DOCUMENTS = Number(process.env.BENCH_DOCUMENTS ?? 1000);
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 32);
const LISTED = Number(process.env.BENCH_LISTED ?? 10_000);
/**
 * Length of each creation row. 30 s, not 10: at 300 documents a second a 10 s row's p99 is decided
 * by the one or two Temporal dev-server collections that fall into it (a 100 ms stall holds 1 % of
 * its requests), and it can end before a rate the machine cannot sustain has built a queue (on a
 * slower machine, 10 s rows at 300/s showed p50 20-35 ms; 30 s rows, 117 ms).
 */
const CREATE_SECONDS = Number(process.env.BENCH_CREATE_SECONDS ?? 30);
const UPLOAD_BATCH = 20;
/** The offered rate of the paced creation rows (the issue's goal: 300 documents/s with p99 under 100 ms). */
const PACED_RATE = Number(process.env.BENCH_PACED_RATE ?? 300);
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
/** The share of requests slower than the creation goal's 100 ms (p99 < 100 ms is this under 1 %): steadier from run to run than the p99 itself. */
const overGoal = (latencies: number[]) => `${fmt((100 * latencies.filter((ms) => ms > 100).length) / Math.max(1, latencies.length), 2)} %`;
const load = () => os.loadavg().map((x) => x.toFixed(2)).join(' / ');

/** The machine's CPU time so far (all cores, from /proc/stat): busy and total, in clock ticks. */
function machineTicks() {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  return { idle: f[3]! + f[4]!, total: f.slice(0, 8).reduce((a, b) => a + b, 0) };
}
/** /proc/stat counts in USER_HZ, 100 a second on Linux. */
const TICKS_PER_SECOND = 100;

/** A process's CPU time so far (ms), from /proc/<pid>/stat (utime + stime); NaN when it cannot be read. */
function processCpuMs(pid: number | null): number {
  if (pid === null) return NaN;
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
  } catch {
    return NaN;
  }
}

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

interface Partner {
  name: string;
  key: string;
}

async function newKnowledgeBase(api: BenchApi, settings: Record<string, string> = {}): Promise<Partner & { kb: string; kbId: string; folder: string }> {
  const name = `bench-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const admin = testStack().adminApiKey;
  const form = new FormData();
  for (const [k, v] of Object.entries(settings)) form.append(k, v);
  const p = await fetch(`${api.url}/api/partners/${name}`, { method: 'POST', headers: { 'X-API-Key': admin }, body: form });
  if (p.status !== 201) throw new Error(`partner: ${p.status} ${await p.text()}`);
  const key = ((await p.json()) as { api_key: string }).api_key;
  const kbForm = new FormData();
  kbForm.append('name', 'kb');
  const k = await fetch(`${api.url}/api/knowledgebases/${name}`, { method: 'POST', headers: { 'X-API-Key': key }, body: kbForm });
  if (k.status !== 201) throw new Error(`kb: ${k.status} ${await k.text()}`);
  const folderForm = new FormData();
  folderForm.append('name', 'docs');
  const f = await fetch(`${api.url}/api/folders/${name}/kb`, { method: 'POST', headers: { 'X-API-Key': key }, body: folderForm });
  if (f.status !== 201) throw new Error(`folder: ${f.status} ${await f.text()}`);
  const db = new pg.Client({ connectionString: testStack().databaseUrl });
  await db.connect();
  const { rows } = await db.query<{ id: string }>('SELECT kb.id FROM knowledge_bases kb JOIN partners p ON p.id = kb."partnerId" WHERE p.name = $1', [name]);
  await db.end();
  return { name, key, kb: 'kb', kbId: rows[0]!.id, folder: 'docs' };
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
async function throughSystem(api: BenchApi, worker: RunningWorker, corpus: Array<{ name: string; text: string }>): Promise<{ ms: number; acceptedMs: number; chunks: number; failed: number }> {
  const kb = await newKnowledgeBase(api);
  const db = new pg.Client({ connectionString: testStack().databaseUrl });
  await db.connect();
  const started = performance.now();
  let acceptedMs = 0;
  const batches: Array<typeof corpus> = [];
  for (let i = 0; i < corpus.length; i += UPLOAD_BATCH) batches.push(corpus.slice(i, i + UPLOAD_BATCH));
  let next = 0;
  const uploading = Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < batches.length) {
        const batch = batches[next++]!;
        const fd = new FormData();
        fd.append('folder', kb.folder);
        fd.append('use_original_as_rewritten', 'true');
        for (const d of batch) fd.append('files', new Blob([d.text]), `${d.name}.md`);
        const res = await fetch(`${api.url}/api/documents/${kb.name}/${kb.kb}/files/batch`, { method: 'POST', headers: { 'X-API-Key': kb.key }, body: fd });
        const body = (await res.json()) as { summary?: { succeeded: number } };
        if (res.status !== 200 || body.summary?.succeeded !== batch.length) throw new Error(`upload: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
      }
    }),
  ).then(() => (acceptedMs = performance.now() - started));
  let failed: number;
  let lastProgress = performance.now();
  for (;;) {
    const { rows } = await db.query<{ done: number; failed: number }>(
      `SELECT count(*) FILTER (WHERE "embeddingStatus" = 'success')::int AS done, count(*) FILTER (WHERE "processingError" IS NOT NULL OR "embeddingStatus" = 'failed')::int AS failed FROM documents WHERE "knowledgeBaseId" = $1`,
      [kb.kbId],
    );
    failed = rows[0]!.failed;
    if (rows[0]!.done + failed >= corpus.length) break;
    // A worker that dies would leave this loop waiting for ever: say so, with its last words.
    if (worker.child.exitCode !== null || worker.child.signalCode !== null) {
      throw new Error(`the worker exited (${worker.child.exitCode ?? worker.child.signalCode}) with ${rows[0]!.done} documents embedded:\n${worker.output.slice(-30).join('\n')}`);
    }
    if (performance.now() - lastProgress > 30_000) {
      lastProgress = performance.now();
      console.error(`through the system: ${rows[0]!.done} of ${corpus.length} embedded after ${fmt((lastProgress - started) / 1000, 0)} s; worker ${residentMb(worker.child.pid)} MB resident`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  const ms = performance.now() - started;
  await uploading;
  const { rows } = await db.query<{ chunks: number }>('SELECT coalesce(sum("embeddingChunkCount"), 0)::int AS chunks FROM documents WHERE "knowledgeBaseId" = $1', [kb.kbId]);
  const errors = await db.query<{ error: string; n: number }>(
    `SELECT coalesce("processingError", "embeddingError") AS error, count(*)::int AS n FROM documents WHERE "knowledgeBaseId" = $1 AND ("processingError" IS NOT NULL OR "embeddingStatus" = 'failed') GROUP BY 1`,
    [kb.kbId],
  );
  for (const e of errors.rows) console.error(`failed: ${e.n} x ${e.error}`);
  await db.end();
  return { ms, acceptedMs, chunks: rows[0]!.chunks, failed };
}

interface CreationResult {
  label: string;
  documents: number;
  requests: number;
  seconds: number;
  latencies: number[];
  failures: number;
  /** CPU time of the API process per document created (/proc). */
  apiCpuMsPerDocument: number;
  /** CPU time of the Temporal dev server per document (its workflow starts). */
  temporalCpuMsPerDocument: number;
  /** CPU time of this benchmark's own process (the clients) per document. */
  clientCpuMsPerDocument: number;
  /** CPU time of the whole machine per document (every process: the API, PostgreSQL, Temporal, the client, and anything else running). */
  machineCpuMsPerDocument: number;
}

/**
 * (b) `CLIENTS` clients sending `request` for CREATE_SECONDS after a warm-up second: back to back
 * (the most the system accepts; a closed loop, so a request's time is the clients' queue too), or,
 * with `documentsPerSecond`, each at its turn of a fixed schedule that offers that many documents a
 * second in all (the time a request takes at that rate). A paced request's time counts from its
 * turn, not from when it was sent, so a client held up by a slow answer does not hide the delay.
 */
async function creation(api: BenchApi, label: string, docsPerRequest: number, request: () => Promise<LeanResponse>, documentsPerSecond?: number): Promise<CreationResult> {
  const latencies: number[] = [];
  /** Each measured request's turn (performance.now()) and time, for BENCH_SLOW_TRACE. */
  const turns: Array<[number, number]> = [];
  let failures = 0;
  let firstFailure = '';
  /** The API's and the machine's CPU time when the warm-up ended. */
  const atWarm: { api?: number; machine?: ReturnType<typeof machineTicks>; temporal?: number; client?: NodeJS.CpuUsage } = {};
  const temporalPid = temporalServerPid();
  const startedAt = performance.now();
  const warmUntil = startedAt + 1000;
  const endAt = warmUntil + CREATE_SECONDS * 1000;
  const requestInterval = documentsPerSecond ? (1000 * docsPerRequest) / documentsPerSecond : 0;
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, client) => {
      for (let k = 0; ; k++) {
        let t = performance.now();
        if (requestInterval) {
          const turn = startedAt + (k * CLIENTS + client) * requestInterval;
          if (turn > t) await new Promise((resolve) => setTimeout(resolve, turn - t));
          t = turn;
        }
        if (t >= endAt) break;
        if (t >= warmUntil) {
          atWarm.api ??= processCpuMs(api.pid);
          atWarm.machine ??= machineTicks();
          atWarm.temporal ??= processCpuMs(temporalPid);
          atWarm.client ??= process.cpuUsage();
        }
        const res = await request();
        const ms = performance.now() - t;
        if (t >= warmUntil) {
          if (res.status === 200 || res.status === 201) {
            latencies.push(ms);
            if (SLOW_TRACE) turns.push([t, ms]);
          } else {
            failures++;
            firstFailure ||= `${res.status} ${res.body.toString('utf8').slice(0, 300)}`;
          }
        }
      }
    }),
  );
  const machineEnd = machineTicks();
  const clientCpu = process.cpuUsage(atWarm.client);
  const temporalMs = processCpuMs(temporalPid) - (atWarm.temporal ?? NaN);
  const apiMs = processCpuMs(api.pid) - (atWarm.api ?? NaN);
  const busyTicks = atWarm.machine ? machineEnd.total - machineEnd.idle - (atWarm.machine.total - atWarm.machine.idle) : NaN;
  const machineBusyMs = (busyTicks * 1000) / TICKS_PER_SECOND;
  if (firstFailure) console.error(`${label}: ${failures} failed, the first: ${firstFailure}`);
  if (SLOW_TRACE) {
    const slowest = [...turns].sort((a, b) => b[1] - a[1]).slice(0, Math.ceil(turns.length / 100));
    const at = (turn: number) => ((performance.timeOrigin + turn) / 1000).toFixed(3);
    console.error(`${label}: row from ${at(warmUntil)}; slowest 1 % (s into row: ms) ${slowest.sort((a, b) => a[0] - b[0]).map(([turn, ms]) => `${((turn - warmUntil) / 1000).toFixed(2)}:${ms.toFixed(0)}`).join(' ')}`);
  }
  const seconds = CREATE_SECONDS;
  const documents = latencies.length * docsPerRequest;
  return { label, documents, requests: latencies.length, seconds, latencies, failures, apiCpuMsPerDocument: apiMs / documents, clientCpuMsPerDocument: (clientCpu.user + clientCpu.system) / 1000 / documents, temporalCpuMsPerDocument: temporalMs / documents, machineCpuMsPerDocument: machineBusyMs / documents };
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
  const kbB = await newKnowledgeBase(api);
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

  const creationRow = (r: CreationResult) =>
    `| ${r.label} | ${r.requests} | ${r.documents} | ${fmt(r.documents / r.seconds, 0)} | ${fmt(percentile(r.latencies, 50))} | ${fmt(percentile(r.latencies, 99))} | ${overGoal(r.latencies)} | ${fmt(r.apiCpuMsPerDocument, 2)} | ${fmt(r.temporalCpuMsPerDocument, 2)} | ${fmt(r.clientCpuMsPerDocument, 2)} | ${fmt(r.machineCpuMsPerDocument, 2)} | ${r.failures} |`;
  return [
    '| Request | Requests | Documents | Documents/s | p50 (ms) | p99 (ms) | Over 100 ms | API CPU per document (ms) | Temporal server CPU per document (ms) | Clients (this process) CPU per document (ms) | Machine CPU per document (ms) | Failed |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    creationRow(single),
    creationRow(singlePaced),
    creationRow(singleUrl),
    creationRow(singleUrlPaced),
    creationRow(empty),
    creationRow(batched),
    creationRow(batchedPaced),
    creationRow(startsAlone),
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
    const kbC = await newKnowledgeBase(api);
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
