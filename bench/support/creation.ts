/**
 * What the creation and ingestion benchmarks share (bench/ingestion-throughput.ts on the test
 * stack, bench/cluster-profile.ts on both profiles): a partner with a knowledge base made through
 * the API, document creation by concurrent clients (back to back, or paced on a fixed schedule)
 * with the CPU time of the system's processes per document, and the ingestion of a corpus through
 * the API and the workflows until every document is embedded.
 */
import fs from 'node:fs';
import pg from 'pg';
import { cpuOf, cpuSpent, fmt, percentile } from './results.js';
import type { LeanResponse } from './lean-client.js';

/** The machine's CPU time so far (all cores, from /proc/stat): busy and total, in clock ticks (100 a second). */
export function machineTicks() {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  return { idle: f[3]! + f[4]!, total: f.slice(0, 8).reduce((a, b) => a + b, 0) };
}
export const TICKS_PER_SECOND = 100;

/** The share of requests slower than the creation goal's 100 ms (p99 < 100 ms is this under 1 %): steadier from run to run than the p99 itself. */
export const overGoal = (latencies: number[]) => `${fmt((100 * latencies.filter((ms) => ms > 100).length) / Math.max(1, latencies.length), 2)} %`;

export interface BenchKnowledgeBase {
  name: string;
  key: string;
  kb: string;
  kbId: string;
  folder: string;
}

/** A partner with a knowledge base `kb` and a folder `docs`, made through the API; its id read from the database. */
export async function newBenchKnowledgeBase(apiUrl: string, adminKey: string, databaseUrl: string): Promise<BenchKnowledgeBase> {
  const name = `bench-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const post = async (url: string, key: string, fields: Record<string, string>) => {
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) form.append(k, v);
    const res = await fetch(url, { method: 'POST', headers: { 'X-API-Key': key }, body: form });
    if (res.status !== 201) throw new Error(`${url}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<{ api_key?: string }>;
  };
  const key = (await post(`${apiUrl}/api/partners/${name}`, adminKey, {})).api_key!;
  await post(`${apiUrl}/api/knowledgebases/${name}`, key, { name: 'kb' });
  await post(`${apiUrl}/api/folders/${name}/kb`, key, { name: 'docs' });
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  const { rows } = await db.query<{ id: string }>('SELECT kb.id FROM knowledge_bases kb JOIN partners p ON p.id = kb."partnerId" WHERE p.name = $1', [name]);
  await db.end();
  return { name, key, kb: 'kb', kbId: rows[0]!.id, folder: 'docs' };
}

export interface CreationResult {
  label: string;
  documents: number;
  requests: number;
  seconds: number;
  latencies: number[];
  failures: number;
  /** CPU time per document created of each group of processes measured (/proc), e.g. the API and the Temporal server. */
  cpuMsPerDocument: Record<string, number>;
  /** CPU time of this benchmark's own process (the clients) per document. */
  clientCpuMsPerDocument: number;
  /** CPU time of the whole machine per document (every process). */
  machineCpuMsPerDocument: number;
}

export interface CreationOptions {
  label: string;
  clients: number;
  /** Length of the measured row, after a warm-up second. */
  seconds: number;
  docsPerRequest: number;
  request: () => Promise<LeanResponse>;
  /** Paced: the clients offer this many documents a second in all, on a fixed schedule. */
  documentsPerSecond?: number;
  /**
   * The processes whose CPU time is reported, by name; a function is asked again at the row's end,
   * and a process that appeared meanwhile (a new PostgreSQL backend) counts all of its time.
   */
  cpu: Record<string, number[] | (() => number[])>;
  /** After the row, the wall-clock time of its slowest 1 % of requests' turns, on stderr. */
  slowTrace?: boolean;
}

/**
 * `clients` clients sending `request` for `seconds` after a warm-up second: back to back (the most
 * the system accepts; a closed loop, so a request's time is the clients' queue too), or, with
 * `documentsPerSecond`, each at its turn of a fixed schedule that offers that many documents a
 * second in all (the time a request takes at that rate). A paced request's time counts from its
 * turn, not from when it was sent, so a client held up by a slow answer does not hide the delay.
 */
export async function measureCreation(o: CreationOptions): Promise<CreationResult> {
  const latencies: number[] = [];
  /** Each measured request's turn (performance.now()) and time, for slowTrace. */
  const turns: Array<[number, number]> = [];
  let failures = 0;
  let firstFailure = '';
  const groupPids = (group: number[] | (() => number[])) => (typeof group === 'function' ? group() : group);
  let groups: Record<string, number[]> = {};
  const atWarm: { cpu?: Map<number, number>; machine?: ReturnType<typeof machineTicks>; client?: NodeJS.CpuUsage } = {};
  const startedAt = performance.now();
  const warmUntil = startedAt + 1000;
  const endAt = warmUntil + o.seconds * 1000;
  const requestInterval = o.documentsPerSecond ? (1000 * o.docsPerRequest) / o.documentsPerSecond : 0;
  await Promise.all(
    Array.from({ length: o.clients }, async (_, client) => {
      for (let k = 0; ; k++) {
        let t = performance.now();
        if (requestInterval) {
          const turn = startedAt + (k * o.clients + client) * requestInterval;
          if (turn > t) await new Promise((resolve) => setTimeout(resolve, turn - t));
          t = turn;
        }
        if (t >= endAt) break;
        if (t >= warmUntil) {
          if (!atWarm.cpu) {
            groups = Object.fromEntries(Object.entries(o.cpu).map(([name, group]) => [name, groupPids(group)]));
            atWarm.cpu = cpuOf(Object.values(groups).flat());
          }
          atWarm.machine ??= machineTicks();
          atWarm.client ??= process.cpuUsage();
        }
        const res = await o.request();
        const ms = performance.now() - t;
        if (t >= warmUntil) {
          if (res.status === 200 || res.status === 201) {
            latencies.push(ms);
            if (o.slowTrace) turns.push([t, ms]);
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
  for (const [name, group] of Object.entries(o.cpu)) groups[name] = [...new Set([...(groups[name] ?? []), ...groupPids(group)])];
  const cpuEnd = cpuOf(Object.values(groups).flat());
  const busyTicks = atWarm.machine ? machineEnd.total - machineEnd.idle - (atWarm.machine.total - atWarm.machine.idle) : NaN;
  if (firstFailure) console.error(`${o.label}: ${failures} failed, the first: ${firstFailure}`);
  if (o.slowTrace) {
    const slowest = [...turns].sort((a, b) => b[1] - a[1]).slice(0, Math.ceil(turns.length / 100));
    const at = (turn: number) => ((performance.timeOrigin + turn) / 1000).toFixed(3);
    console.error(`${o.label}: row from ${at(warmUntil)}; slowest 1 % (s into row: ms) ${slowest.sort((a, b) => a[0] - b[0]).map(([turn, ms]) => `${((turn - warmUntil) / 1000).toFixed(2)}:${ms.toFixed(0)}`).join(' ')}`);
  }
  const documents = latencies.length * o.docsPerRequest;
  // A process not there at the warm-up counts from zero.
  const spentBy = (group: number[]) => cpuSpent(new Map(group.map((p) => [p, atWarm.cpu?.get(p) ?? 0])), new Map(group.map((p) => [p, cpuEnd.get(p) ?? NaN])));
  return {
    label: o.label,
    documents,
    requests: latencies.length,
    seconds: o.seconds,
    latencies,
    failures,
    cpuMsPerDocument: Object.fromEntries(Object.keys(o.cpu).map((name) => [name, spentBy(groups[name] ?? []) / documents])),
    clientCpuMsPerDocument: (clientCpu.user + clientCpu.system) / 1000 / documents,
    machineCpuMsPerDocument: (busyTicks * 1000) / TICKS_PER_SECOND / documents,
  };
}

/** A creation row of the benchmark tables: requests, documents, rate, p50, p99, share over 100 ms, then `cpuColumns` and the rest. */
export function creationRow(r: CreationResult, cpuColumns: string[]): string {
  const cpu = cpuColumns.map((name) => fmt(r.cpuMsPerDocument[name] ?? NaN, 2));
  return `| ${r.label} | ${r.requests} | ${r.documents} | ${fmt(r.documents / r.seconds, 0)} | ${fmt(percentile(r.latencies, 50))} | ${fmt(percentile(r.latencies, 99))} | ${overGoal(r.latencies)} | ${cpu.join(' | ')} | ${fmt(r.clientCpuMsPerDocument, 2)} | ${fmt(r.machineCpuMsPerDocument, 2)} | ${r.failures} |`;
}

export interface IngestionResult {
  ms: number;
  /** When the last upload was accepted. */
  acceptedMs: number;
  chunks: number;
  failed: number;
}

/**
 * A corpus through the system: batch uploads of `uploadBatch` files (4 at a time,
 * use_original_as_rewritten=true) to a new knowledge base, until every document is embedded or
 * failed. `alive` says why the system cannot finish (a dead worker), or null.
 */
export async function ingestThroughApi(o: {
  apiUrl: string;
  adminKey: string;
  databaseUrl: string;
  corpus: Array<{ name: string; text: string }>;
  uploadBatch: number;
  alive: () => string | null;
  progress?: (line: string) => void;
}): Promise<IngestionResult> {
  const kb = await newBenchKnowledgeBase(o.apiUrl, o.adminKey, o.databaseUrl);
  const db = new pg.Client({ connectionString: o.databaseUrl });
  await db.connect();
  const started = performance.now();
  let acceptedMs = 0;
  const batches: Array<typeof o.corpus> = [];
  for (let i = 0; i < o.corpus.length; i += o.uploadBatch) batches.push(o.corpus.slice(i, i + o.uploadBatch));
  let next = 0;
  const uploading = Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < batches.length) {
        const batch = batches[next++]!;
        const fd = new FormData();
        fd.append('folder', kb.folder);
        fd.append('use_original_as_rewritten', 'true');
        for (const d of batch) fd.append('files', new Blob([d.text]), `${d.name}.md`);
        const res = await fetch(`${o.apiUrl}/api/documents/${kb.name}/${kb.kb}/files/batch`, { method: 'POST', headers: { 'X-API-Key': kb.key }, body: fd });
        const body = (await res.json()) as { summary?: { succeeded: number } };
        if (res.status !== 200 || body.summary?.succeeded !== batch.length) throw new Error(`upload: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
      }
    }),
  ).then(() => (acceptedMs = performance.now() - started));
  let failed: number;
  let lastProgress = performance.now();
  for (;;) {
    const { rows } = await db.query<{ done: number; failed: number }>(
      `SELECT count(*) FILTER (WHERE "embeddingStatus" = 'success')::int AS done, count(*) FILTER (WHERE "processingState" IS NOT NULL OR "embeddingStatus" = 'failed')::int AS failed FROM documents WHERE "knowledgeBaseId" = $1`,
      [kb.kbId],
    );
    failed = rows[0]!.failed;
    if (rows[0]!.done + failed >= o.corpus.length) break;
    // A system that cannot finish would leave this loop waiting for ever: say why.
    const dead = o.alive();
    if (dead) throw new Error(`${dead}, with ${rows[0]!.done} documents embedded`);
    if (performance.now() - lastProgress > 30_000) {
      lastProgress = performance.now();
      o.progress?.(`${rows[0]!.done} of ${o.corpus.length} embedded after ${fmt((lastProgress - started) / 1000, 0)} s`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  const ms = performance.now() - started;
  await uploading;
  const { rows } = await db.query<{ chunks: number }>('SELECT coalesce(sum("embeddingChunkCount"), 0)::int AS chunks FROM documents WHERE "knowledgeBaseId" = $1', [kb.kbId]);
  const errors = await db.query<{ error: string; n: number }>(
    `SELECT coalesce("failureMessage", 'BUDGET_BLOCKED:' || "budgetBlockReason", "embeddingError") AS error, count(*)::int AS n FROM documents WHERE "knowledgeBaseId" = $1 AND ("processingState" IS NOT NULL OR "embeddingStatus" = 'failed') GROUP BY 1`,
    [kb.kbId],
  );
  for (const e of errors.rows) console.error(`failed: ${e.n} x ${e.error}`);
  await db.end();
  return { ms, acceptedMs, chunks: rows[0]!.chunks, failed };
}
