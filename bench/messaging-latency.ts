/**
 * The hot paths of issue #19 in one run: what the /v3 gateway adds to a streamed chat completion
 * (time to first token and to the last byte, direct to the provider vs through /v3, at 1, 50 and 200
 * concurrent streams), and budget admissions per second on one KB and across KBs.
 *
 *   npm run bench:messaging
 *
 * Processes, so that nothing measured shares an event loop with what measures it: this one is the
 * client (node:http on a keep-alive agent, reading the bytes as they come); the API is
 * `api/server.ts`, exactly as deployed (LOG_LEVEL=info, its log lines written to a file); the
 * fake provider is bench/support/fake-provider.ts (BENCH_TOKENS word chunks BENCH_TOKEN_MS apart,
 * the first at once). The admissions are measured first, by bench/budget-admission.ts in a process
 * of its own (it writes its own section too), before the other processes start.
 *
 * Paths, side by side in one run: `direct` (the client to the provider), `bare proxy`
 * (bench/support/bare-proxy.ts: one more Node process that only pipes bytes, the floor of any
 * gateway in its own process on this machine), at 1 and 200 streams three more floors
 * (bench/support/floor-gateways.ts: `Express proxy (floor)`, the bare proxy inside Express with the
 * body parsed; `relay (floor)`, no framework, the body parsed, the stream relayed as /v3 relays it
 * and a log line: a gateway that meters nothing; `lean gateway (floor)`, the relay floor plus a
 * database round trip before and after each stream: the work no metered gateway escapes), `/v3` (the API with its settings' defaults, the
 * per-key request rate limit of api/http/rate-limits.ts included: it counts every request, with a
 * limit raised so that the benchmark's own traffic is not refused), `/v3, rate limit off` (a second
 * API process with REQUESTS_PER_MINUTE_MESSAGING=0: the gateway's own work), `/v3, provider after
 * admission` (a third with MESSAGING_CALL_DURING_ADMISSION_SECONDS=0: the provider is called only once
 * the quota hold is made, as before the overlap) and, at 200 streams, `/v3 (one key)` (all streams on
 * one quota key).
 *
 * The paths take turns (one stream each at 1; one burst each at 50 and 200), so that a change of
 * the machine's load during the run falls on all of them alike. Through /v3 every request is
 * admitted on a quota key and settled when its stream ends, as in production: one key per
 * concurrent stream unless said otherwise. The CPU time each process used per stream is read from
 * /proc. A throw-away database is created and dropped; no Temporal or Weaviate is needed (these
 * paths do not use them).
 *
 * Environment: BENCH_RUNS (streams per path at 1, default 150), BENCH_ROUNDS (bursts per path at 50
 * and 200, default 8), BENCH_TOKENS, BENCH_TOKEN_MS, BENCH_SKIP_ADMISSIONS=1, BENCH_NO_WRITE=1,
 * BENCH_LEVELS (default 1,50,200), BENCH_KEEP=1 (keep the API processes' logs and profiles), BENCH_CPU_PROFILE=1 (profile the API processes with --cpu-prof and write the profiles' summaries
 * as the section `hot-path-profile` instead of the results: profiling slows what it measures).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createDb } from '../lib/platform/db.js';
import { createQuotaKey } from '../lib/messaging/quota-keys.js';
import { dropDatabase, ensureDatabase, freePort, migrate, nodeArgs } from '../scripts/stack.js';
import { cpuOf, cpuSpent, describeLoad, fmt, machineLine, percentile, readLoad, writeSection, type LoadReading } from './support/results.js';
import { comparisonTable, profileSummary } from './support/cpu-profile.js';
import type { BudgetSummary } from './budget-admission.js';
import { setting } from '../lib/platform/config.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const baseUrl = setting(process.env, 'DATABASE_BASE_URL');
const databaseUrl = `${baseUrl}/dwb_bench_messaging_${process.pid}`;
const tokens = setting(process.env, 'BENCH_TOKENS');
const tokenMs = setting(process.env, 'BENCH_TOKEN_MS');
const sequentialRuns = Number(process.env.BENCH_RUNS ?? 150);
const rounds = Number(process.env.BENCH_ROUNDS ?? 8);
const profiling = !!process.env.BENCH_CPU_PROFILE;
/** Concurrency levels to run (BENCH_LEVELS=200 for a quick look at one; the goals table needs 1 and 200). */
const levels = (process.env.BENCH_LEVELS ?? '1,50,200').split(',').map(Number);
const goals = {
  single: { p50: 2, p99: 10 },
  c200: { p50: 20, p99: 50 },
  admissions: { oneKb: 500, acrossKbs: 1500 },
  vsBareProxy: { singleExtraMs: 1.5, c200Ratio: 1.5, cpuRatio: 1.3 },
};

/** `plainNode`: without the flags production gives the script (scripts/stack.ts, nodeArgs). */
function startProcess(script: string, env: Record<string, string>, options: { nodeArgs?: string[]; stdout?: number; plainNode?: boolean } = {}): ChildProcess {
  return spawn(process.execPath, [...(options.nodeArgs ?? []), ...(options.plainNode ? ['--import', 'tsx', script] : nodeArgs(script))], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ['ignore', options.stdout ?? 'pipe', 'inherit'],
  });
}

async function firstLine(child: ChildProcess): Promise<string> {
  const lines = readline.createInterface({ input: child.stdout! });
  for await (const line of lines) return line;
  throw new Error('the process ended before it printed its address');
}

async function waitForHealth(url: string) {
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`${url}/health`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not come up`);
}

const stopped = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });

// ------------------------------------------------------------------------------------ the client

interface Sample {
  ttftMs: number;
  totalMs: number;
  /** The API's own account of its time before the provider answered (its Server-Timing header), ms by phase. */
  phases: Record<string, number> | null;
}

const phaseNames = ['arrival', 'auth', 'route', 'admit', 'provider', 'relay'] as const;

function phasesOf(header: string | string[] | undefined): Record<string, number> | null {
  if (typeof header !== 'string') return null;
  const out: Record<string, number> = {};
  for (const part of header.split(',')) {
    const m = /^\s*(\w+);dur=([\d.]+)\s*$/.exec(part);
    if (m) out[m[1]!] = Number(m[2]);
  }
  return out;
}

const requestBody = Buffer.from(JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: 'Say twenty words.' }], stream: true, max_tokens: 64 }));
const firstToken = Buffer.from('tok0');

/** One streamed completion: when its first content token arrives, and its last byte. */
function oneStream(agent: http.Agent, url: URL, key: string | null): Promise<Sample> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let first = 0;
    let tail: Buffer = Buffer.alloc(0);
    const req = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': requestBody.length, ...(key ? { authorization: `Bearer ${key}` } : {}) },
      },
      (res) => {
        if (res.statusCode !== 200) {
          const parts: Buffer[] = [];
          res.on('data', (c: Buffer) => parts.push(c));
          res.on('end', () => reject(new Error(`${res.statusCode} ${Buffer.concat(parts).toString('utf8').slice(0, 300)}`)));
          return;
        }
        res.on('data', (chunk: Buffer) => {
          if (first) return;
          const seen = tail.length ? Buffer.concat([tail, chunk]) : chunk;
          if (seen.includes(firstToken)) first = performance.now();
          else tail = seen.subarray(Math.max(0, seen.length - firstToken.length));
        });
        const phases = phasesOf(res.headers['server-timing']);
        res.on('end', () => (first ? resolve({ ttftMs: first - started, totalMs: performance.now() - started, phases }) : reject(new Error('the stream carried no token'))));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(requestBody);
  });
}

type PathName = 'direct' | 'bare proxy' | 'Express proxy (floor)' | 'relay (floor)' | 'lean gateway (floor)' | '/v3' | '/v3, rate limit off' | '/v3, provider after admission' | '/v3 (one key)' | '/v3, V8 default young generation';

interface Row {
  concurrency: number;
  path: PathName;
  samples: Sample[];
  failures: number;
  /** CPU time per stream (ms) of the client, of the process the path goes through (API or proxy; none direct) and of the provider, while this path ran. */
  cpu: { client: number; middle: number; provider: number };
}

interface Target {
  path: PathName;
  url: URL;
  keys: Array<string | null>;
  /** The process between the client and the provider on this path, if any. */
  pid: number | null;
}

async function measure(targets: Target[], concurrency: number, providerPid: number): Promise<Row[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency, maxFreeSockets: concurrency });
  const rows = targets.map((t) => ({ concurrency, path: t.path, samples: [] as Sample[], failures: 0, cpuMs: { client: 0, middle: 0, provider: 0 } }));
  const runBurst = async (i: number, record: boolean) => {
    const t = targets[i]!;
    const row = rows[i]!;
    const pids = [providerPid, ...(t.pid ? [t.pid] : [])];
    const before = { client: process.cpuUsage(), others: cpuOf(pids) };
    await Promise.all(
      Array.from({ length: concurrency }, async (_, s) => {
        try {
          const sample = await oneStream(agent, t.url, t.keys[s % t.keys.length]!);
          if (record) row.samples.push(sample);
        } catch (err) {
          if (!record) throw err;
          if (row.failures++ === 0) console.error(`${concurrency} × ${t.path}: ${(err as Error).message}`);
        }
      }),
    );
    if (!record) return;
    const client = process.cpuUsage(before.client);
    const after = cpuOf(pids);
    const spent = (pid: number) => cpuSpent(new Map([[pid, before.others.get(pid)!]]), new Map([[pid, after.get(pid)!]]));
    row.cpuMs.client += (client.user + client.system) / 1000;
    row.cpuMs.provider += spent(providerPid);
    if (t.pid) row.cpuMs.middle += spent(t.pid);
  };
  // Warm-up (connections, JIT, the API's key cache), not recorded.
  for (let i = 0; i < targets.length; i++) await runBurst(i, false);
  const turns = concurrency === 1 ? sequentialRuns : rounds;
  for (let r = 0; r < turns; r++) for (let i = 0; i < targets.length; i++) await runBurst(i, true);
  agent.destroy();
  return rows.map((r) => {
    const n = Math.max(1, r.samples.length + r.failures);
    return { concurrency, path: r.path, samples: r.samples, failures: r.failures, cpu: { client: r.cpuMs.client / n, middle: r.cpuMs.middle / n, provider: r.cpuMs.provider / n } };
  });
}

// ------------------------------------------------------------------------------------ admissions

async function runAdmissions(): Promise<BudgetSummary | null> {
  if (process.env.BENCH_SKIP_ADMISSIONS || profiling) return null;
  const file = path.join(os.tmpdir(), `dwb-bench-admissions-${process.pid}.json`);
  const child = startProcess('bench/budget-admission.ts', { BENCH_SUMMARY_FILE: file }, { stdout: 1 });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`bench/budget-admission.ts failed (exit ${code})`);
  const summary = JSON.parse(fs.readFileSync(file, 'utf8')) as BudgetSummary;
  fs.rmSync(file, { force: true });
  return summary;
}

// ------------------------------------------------------------------------------------ the floor

interface RoundTrips {
  gapMs: number;
  select1: number;
  reserve: number;
}

/**
 * What one admission round trip costs on this machine by itself: `SELECT 1` and `quota_reserve`
 * on a plain connection, back to back and after the connection sat idle (as between one
 * stream's admission and the next at one stream at a time), p50 of 40 each.
 */
async function roundTripFloor(keyId: string): Promise<RoundTrips[]> {
  const conn = new pg.Client({ connectionString: databaseUrl });
  await conn.connect();
  try {
    const out: RoundTrips[] = [];
    for (const gapMs of [0, 400]) {
      const time = async (run: () => Promise<unknown>) => {
        const xs: number[] = [];
        for (let i = 0; i < 40; i++) {
          if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
          const t = performance.now();
          await run();
          xs.push(performance.now() - t);
        }
        return percentile(xs, 50);
      };
      const select1 = await time(() => conn.query('SELECT 1'));
      let n = 0;
      const reserve = await time(() => conn.query('SELECT * FROM quota_reserve($1, $2, $3, $4, $5)', [keyId, `floor-${process.pid}-${gapMs}-${n++}`, 'chat', 1, 60_000]));
      out.push({ gapMs, select1, reserve });
    }
    return out;
  } finally {
    await conn.end();
  }
}

// ------------------------------------------------------------------------------------- reporting

const of = (r: Row, k: 'ttftMs' | 'totalMs', p: number) => percentile(r.samples.map((s) => s[k]), p);

function latencyTable(rows: Row[]): string {
  const direct = (c: number) => rows.find((r) => r.path === 'direct' && r.concurrency === c)!;
  return [
    '| Concurrent streams | Path | Streams | Failures | TTFT p50 | TTFT p99 | Last byte p50 | Last byte p99 | Added TTFT p50 | Added TTFT p99 | Added last byte p50 | Added last byte p99 | CPU per stream: client / API or proxy / provider (ms) |',
    '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map((r) => {
      const d = direct(r.concurrency);
      const added = r.path === 'direct' ? ['', '', '', ''] : [of(r, 'ttftMs', 50) - of(d, 'ttftMs', 50), of(r, 'ttftMs', 99) - of(d, 'ttftMs', 99), of(r, 'totalMs', 50) - of(d, 'totalMs', 50), of(r, 'totalMs', 99) - of(d, 'totalMs', 99)].map((x) => fmt(x));
      return `| ${r.concurrency} | ${r.path} | ${r.samples.length} | ${r.failures} | ${fmt(of(r, 'ttftMs', 50))} | ${fmt(of(r, 'ttftMs', 99))} | ${fmt(of(r, 'totalMs', 50))} | ${fmt(of(r, 'totalMs', 99))} | ${added.join(' | ')} | ${fmt(r.cpu.client, 2)} / ${r.path === 'direct' ? '-' : fmt(r.cpu.middle, 2)} / ${fmt(r.cpu.provider, 2)} |`;
    }),
  ].join('\n');
}

/** The /v3 rows' Server-Timing phases at p50 and p99, and what they leave of the added time to first token. */
function phasesTable(rows: Row[]): string {
  const direct = (c: number) => rows.find((r) => r.path === 'direct' && r.concurrency === c)!;
  const withPhases = rows.filter((r) => r.samples.some((x) => x.phases));
  const lines = [
    '| Concurrent streams | Path | ' + phaseNames.map((p) => `${p} p50 / p99`).join(' | ') + ' | in the API, p50 | rest of the added TTFT, p50 |',
    '|---:|---|' + phaseNames.map(() => '---:|').join('') + '---:|---:|',
  ];
  for (const r of withPhases) {
    const ph = (name: string, p: number) => percentile(r.samples.map((x) => x.phases?.[name] ?? 0), p);
    const inApi = percentile(r.samples.map((x) => phaseNames.reduce((a, n) => a + (n === 'provider' ? 0 : (x.phases?.[n] ?? 0)), 0)), 50);
    const provider = ph('provider', 50);
    const addedTtft = of(r, 'ttftMs', 50) - of(direct(r.concurrency), 'ttftMs', 50);
    lines.push(`| ${r.concurrency} | ${r.path} | ${phaseNames.map((n) => `${fmt(ph(n, 50), 2)} / ${fmt(ph(n, 99), 2)}`).join(' | ')} | ${fmt(inApi, 2)} | ${fmt(addedTtft - inApi - (provider - of(direct(r.concurrency), 'ttftMs', 50)), 2)} |`);
  }
  return lines.join('\n');
}

function goalsTable(rows: Row[], admissions: BudgetSummary | null): string {
  const added = (c: number, p: number, pathName: PathName = '/v3') => {
    const v = rows.find((r) => r.path === pathName && r.concurrency === c);
    const d = rows.find((r) => r.path === 'direct' && r.concurrency === c);
    return v && d ? of(v, 'ttftMs', p) - of(d, 'ttftMs', p) : NaN;
  };
  /** CPU per stream at 200 streams of the process a path goes through. */
  const cpu = (pathName: PathName) => rows.find((r) => r.path === pathName && r.concurrency === 200)?.cpu.middle ?? NaN;
  const verdict = (value: number, goal: number, atMost = true) => (!Number.isFinite(value) ? 'not measured' : (atMost ? value <= goal : value >= goal) ? 'met' : '**not met**');
  const lines = ['| Goal | Target | Achieved | |', '|---|---:|---:|---|'];
  lines.push(`| Added TTFT, 1 stream, p50 | ≤ ${goals.single.p50} ms | ${fmt(added(1, 50))} ms | ${verdict(added(1, 50), goals.single.p50)} |`);
  lines.push(`| Added TTFT, 1 stream, p99 | ≤ ${goals.single.p99} ms | ${fmt(added(1, 99))} ms | ${verdict(added(1, 99), goals.single.p99)} |`);
  lines.push(`| Added TTFT, 200 streams, p50 | ≤ ${goals.c200.p50} ms | ${fmt(added(200, 50))} ms | ${verdict(added(200, 50), goals.c200.p50)} |`);
  lines.push(`| Added TTFT, 200 streams, p99 | ≤ ${goals.c200.p99} ms | ${fmt(added(200, 99))} ms | ${verdict(added(200, 99), goals.c200.p99)} |`);
  const off: PathName = '/v3, rate limit off';
  if (rows.some((r) => r.path === off)) {
    lines.push(`| (rate limit off) added TTFT, 1 stream, p50 / p99 | ≤ ${goals.single.p50} / ≤ ${goals.single.p99} ms | ${fmt(added(1, 50, off))} / ${fmt(added(1, 99, off))} ms | ${verdict(added(1, 50, off), goals.single.p50)} / ${verdict(added(1, 99, off), goals.single.p99)} |`);
    lines.push(`| (rate limit off) added TTFT, 200 streams, p50 / p99 | ≤ ${goals.c200.p50} / ≤ ${goals.c200.p99} ms | ${fmt(added(200, 50, off))} / ${fmt(added(200, 99, off))} ms | ${verdict(added(200, 50, off), goals.c200.p50)} / ${verdict(added(200, 99, off), goals.c200.p99)} |`);
  }
  const sequential: PathName = '/v3, provider after admission';
  if (rows.some((r) => r.path === sequential)) {
    lines.push(`| (provider called after the admission, MESSAGING_CALL_DURING_ADMISSION_SECONDS=0) added TTFT, 1 / 200 streams, p50 | | ${fmt(added(1, 50, sequential))} / ${fmt(added(200, 50, sequential))} ms | |`);
  }
  if (rows.some((r) => r.path === 'bare proxy')) {
    lines.push(`| (floor: bare proxy) added TTFT, 1 stream / 200 streams, p50 | | ${fmt(added(1, 50, 'bare proxy'))} / ${fmt(added(200, 50, 'bare proxy'))} ms | |`);
    // Issue #47's goals, relative to the bare proxy measured in the same run.
    const bare = (c: number, p: number) => added(c, p, 'bare proxy');
    const single = bare(1, 50) + goals.vsBareProxy.singleExtraMs;
    lines.push(`| Added TTFT, 1 stream, p50, at most the bare proxy's + ${goals.vsBareProxy.singleExtraMs} ms | ≤ ${fmt(single)} ms | ${fmt(added(1, 50))} ms | ${verdict(added(1, 50), single)} |`);
    for (const p of [50, 99]) {
      const bound = bare(200, p) * goals.vsBareProxy.c200Ratio;
      lines.push(`| Added TTFT, 200 streams, p${p}, at most ${goals.vsBareProxy.c200Ratio}× the bare proxy's | ≤ ${fmt(bound)} ms | ${fmt(added(200, p))} ms (${fmt(added(200, p) / bare(200, p), 2)}×) | ${verdict(added(200, p), bound)} |`);
    }
    const cpuBound = cpu('bare proxy') * goals.vsBareProxy.cpuRatio;
    lines.push(`| API CPU per stream at 200 streams, at most ${goals.vsBareProxy.cpuRatio}× the bare proxy's | ≤ ${fmt(cpuBound, 2)} ms | ${fmt(cpu('/v3'), 2)} ms (${fmt(cpu('/v3') / cpu('bare proxy'), 2)}×) | ${verdict(cpu('/v3'), cpuBound)} |`);
    for (const floor of ['Express proxy (floor)', 'relay (floor)', 'lean gateway (floor)'] as const) {
      if (rows.some((r) => r.path === floor && r.concurrency === 1)) lines.push(`| (${floor}) added TTFT, 1 stream, p50 | | ${fmt(added(1, 50, floor))} ms (the bare proxy's + ${fmt(added(1, 50, floor) - bare(1, 50))} ms) | |`);
      if (!rows.some((r) => r.path === floor && r.concurrency === 200)) continue;
      lines.push(`| (${floor}) CPU per stream / added TTFT p50, p99 at 200 streams | | ${fmt(cpu(floor), 2)} ms (${fmt(cpu(floor) / cpu('bare proxy'), 2)}×) / ${fmt(added(200, 50, floor))}, ${fmt(added(200, 99, floor))} ms (${fmt(added(200, 50, floor) / bare(200, 50), 2)}×, ${fmt(added(200, 99, floor) / bare(200, 99), 2)}×) | |`);
    }
  }
  const defaultHeap: PathName = '/v3, V8 default young generation';
  if (rows.some((r) => r.path === defaultHeap)) {
    lines.push(`| (the API without its Node flags, V8's default young generation) CPU per stream / added TTFT p50, p99 at 200 streams | | ${fmt(cpu(defaultHeap), 2)} ms (${fmt(cpu(defaultHeap) / cpu('bare proxy'), 2)}×) / ${fmt(added(200, 50, defaultHeap))}, ${fmt(added(200, 99, defaultHeap))} ms | |`);
  }
  if (rows.some((r) => r.path === '/v3 (one key)')) {
    lines.push(`| (200 streams on one quota key, p50 / p99) | (same) | ${fmt(added(200, 50, '/v3 (one key)'))} / ${fmt(added(200, 99, '/v3 (one key)'))} ms | ${verdict(added(200, 50, '/v3 (one key)'), goals.c200.p50)} / ${verdict(added(200, 99, '/v3 (one key)'), goals.c200.p99)} |`);
  }
  if (admissions) {
    const best = (scenario: string) => admissions.results.filter((r) => r.scenario === scenario).reduce((m, r) => (r.perSecondRate > m.rate ? { rate: r.perSecondRate, clients: r.clients } : m), { rate: 0, clients: 0 });
    const one = best('one KB');
    const across = best('across KBs');
    lines.push(`| Admissions, one contended KB (best of C = 1, 8, 32, 64) | ≥ ${goals.admissions.oneKb} pairs/s | ${fmt(one.rate, 0)}/s (C = ${one.clients}) | ${verdict(one.rate, goals.admissions.oneKb, false)} |`);
    lines.push(`| Admissions across KBs (C = 32 on 32 KBs, 64 on 64) | ≥ ${goals.admissions.acrossKbs} pairs/s | ${fmt(across.rate, 0)}/s (C = ${across.clients}) | ${verdict(across.rate, goals.admissions.acrossKbs, false)} |`);
    lines.push(`| Zero overspend (64 clients racing for the last capacity, ${admissions.trials} trials) | exactly 100 of 100 | ${admissions.lastCapacityExact ? 'exactly 100 in every trial' : 'violated'} | ${admissions.lastCapacityExact ? 'met' : '**not met**'} |`);
  }
  return lines.join('\n');
}

function admissionsTable(a: BudgetSummary): string {
  return [
    '| Scenario | Clients | KBs | Admissions/s (pairs) | reserve p50 / p99 (ms) | settle p50 / p99 (ms) | Round trips per pair | CPU per pair: Node / PostgreSQL (µs) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
    ...a.results.map((r) => `| ${r.scenario} | ${r.clients} | ${r.kbs} | ${fmt(r.perSecondRate, 0)} | ${fmt(r.reserveP50)} / ${fmt(r.reserveP99)} | ${fmt(r.settleP50)} / ${fmt(r.settleP99)} | ${fmt(r.roundTripsPerPair, 2)} | ${fmt(r.nodeCpuUs, 0)} / ${fmt(r.pgCpuUs, 0)} |`),
  ].join('\n');
}

// ------------------------------------------------------------------------------------------ main

async function main() {
  const started = Date.now();
  const loadBefore = await readLoad();
  console.log(`before: ${describeLoad(loadBefore)}`);
  const admissions = await runAdmissions();

  await ensureDatabase(databaseUrl);
  await migrate(databaseUrl);
  const db = createDb(databaseUrl, 4);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'dwb-bench-messaging-'));
  const provider = startProcess('bench/support/fake-provider.ts', { BENCH_TOKENS: String(tokens), BENCH_TOKEN_MS: String(tokenMs) });
  const providerUrl = (JSON.parse(await firstLine(provider)) as { baseUrl: string }).baseUrl;
  /** With BENCH_CPU_PROFILE, a process's profile goes to a folder of its own under `work`. */
  const profiledAs = (name: string) => (profiling ? ['--cpu-prof', `--cpu-prof-dir=${path.join(work, `${name}-profile`)}`] : []);
  const middleStartedAt = performance.now();
  const proxy = startProcess('bench/support/bare-proxy.ts', { BENCH_PROVIDER_URL: providerUrl }, { nodeArgs: profiledAs('bare-proxy') });
  const proxyUrl = (JSON.parse(await firstLine(proxy)) as { url: string }).url;
  // The floors' log lines go to a file, as the API's do.
  const floors = ['express', 'relay', 'lean'].map((floor) =>
    startProcess('bench/support/floor-gateways.ts', { BENCH_PROVIDER_URL: providerUrl, BENCH_FLOOR: floor, DATABASE_URL: databaseUrl, BENCH_FLOOR_LOG: path.join(work, `${floor}-floor.log`) }, { nodeArgs: profiledAs(`${floor}-floor`) }),
  );
  const [expressFloorUrl, relayFloorUrl, leanFloorUrl] = await Promise.all(floors.map(async (f) => (JSON.parse(await firstLine(f)) as { url: string }).url));
  /** An API process; `name` tells its log file and profile apart. */
  const startApi = async (name: string, env: Record<string, string>, plainNode = false) => {
    const port = await freePort();
    const log = fs.openSync(path.join(work, `${name}.log`), 'w');
    const profileDir = path.join(work, `${name}-profile`);
    const child = startProcess(
      'api/server.ts',
      { PORT: String(port), DATABASE_URL: databaseUrl, ADMIN_API_KEY: 'bench-admin-key-0123456789', OPENAI_BASE_URL: providerUrl, OPENAI_API_KEY: 'bench', LOG_LEVEL: 'info', ...env },
      { nodeArgs: profiledAs(name), stdout: log, plainNode },
    );
    return { name, child, url: `http://127.0.0.1:${port}`, log, profileDir, startedAt: performance.now() };
  };
  // The /v3 judged by the goals runs as production does (Server-Timing off, its default); the
  // rate-limit-off and provider-after-admission processes tell their phases.
  const apis = [
    await startApi('api', { REQUESTS_PER_MINUTE_MESSAGING: process.env.REQUESTS_PER_MINUTE_MESSAGING ?? '1000000' }),
    await startApi('api-no-rate-limit', { REQUESTS_PER_MINUTE_MESSAGING: '0', MESSAGING_SERVER_TIMING: 'true' }),
    await startApi('api-no-overlap', { REQUESTS_PER_MINUTE_MESSAGING: process.env.REQUESTS_PER_MINUTE_MESSAGING ?? '1000000', MESSAGING_CALL_DURING_ADMISSION_SECONDS: '0', MESSAGING_SERVER_TIMING: 'true' }),
    // The /v3 of the goals as Node runs it without the API's flags (its young generation), at 200 streams.
    await startApi('api-default-heap', { REQUESTS_PER_MINUTE_MESSAGING: process.env.REQUESTS_PER_MINUTE_MESSAGING ?? '1000000' }, true),
  ];
  const [api, apiOff, apiSequential, apiDefaultHeap] = apis as [(typeof apis)[0], (typeof apis)[0], (typeof apis)[0], (typeof apis)[0]];
  const rows: Row[] = [];
  let loadAfter: LoadReading;
  let measuringFrom = 0;
  let floor: RoundTrips[] | undefined;
  try {
    for (const a of apis) await waitForHealth(a.url);
    const keys = (await Promise.all(Array.from({ length: 200 }, (_, i) => createQuotaKey(db, { name: `bench-${i}`, quota_type: 'chat', token_amount: 1e12 })))).map((k) => k.api_key);
    const shared = (await createQuotaKey(db, { name: 'bench-shared', quota_type: 'chat', token_amount: 1e12 })).api_key;
    floor = await roundTripFloor((await createQuotaKey(db, { name: 'bench-floor', quota_type: 'chat', token_amount: 1e12 })).id);
    measuringFrom = performance.now();
    for (const c of levels) {
      const targets: Target[] = [
        { path: 'direct', url: new URL(`${providerUrl}/chat/completions`), keys: [null], pid: null },
        { path: 'bare proxy', url: new URL(`${proxyUrl}/chat/completions`), keys: [null], pid: proxy.pid! },
        { path: '/v3', url: new URL(`${api.url}/v3/chat/completions`), keys, pid: api.child.pid! },
        { path: '/v3, rate limit off', url: new URL(`${apiOff.url}/v3/chat/completions`), keys, pid: apiOff.child.pid! },
        { path: '/v3, provider after admission', url: new URL(`${apiSequential.url}/v3/chat/completions`), keys, pid: apiSequential.child.pid! },
      ];
      // The floors where issue #47's goals are judged: one stream and 200.
      if (c === 1 || c === 200) {
        targets.splice(2, 0,
          { path: 'Express proxy (floor)', url: new URL(`${expressFloorUrl}/chat/completions`), keys: [null], pid: floors[0]!.pid! },
          { path: 'relay (floor)', url: new URL(`${relayFloorUrl}/chat/completions`), keys: [null], pid: floors[1]!.pid! },
          { path: 'lean gateway (floor)', url: new URL(`${leanFloorUrl}/chat/completions`), keys: [null], pid: floors[2]!.pid! },
        );
      }
      if (c === 200) {
        targets.push({ path: '/v3 (one key)', url: new URL(`${api.url}/v3/chat/completions`), keys: [shared], pid: api.child.pid! });
        targets.push({ path: '/v3, V8 default young generation', url: new URL(`${apiDefaultHeap.url}/v3/chat/completions`), keys, pid: apiDefaultHeap.child.pid! });
      }
      const measured = await measure(targets, c, provider.pid!);
      rows.push(...measured);
      for (const r of measured) console.log(`${c} × ${r.path}: TTFT p50 ${fmt(of(r, 'ttftMs', 50))} p99 ${fmt(of(r, 'ttftMs', 99))}, last byte p50 ${fmt(of(r, 'totalMs', 50))} p99 ${fmt(of(r, 'totalMs', 99))} ms (${r.failures} failures)`);
    }
    loadAfter = await readLoad();
  } finally {
    await Promise.all([...apis.map((a) => stopped(a.child)), stopped(provider), stopped(proxy), ...floors.map(stopped)]);
    for (const a of apis) fs.closeSync(a.log);
    await db.$disconnect();
    await dropDatabase(databaseUrl);
  }
  console.log(`after: ${describeLoad(loadAfter)}`);

  const method = `Provider: ${tokens} chunks ${tokenMs} ms apart, the first at once. 1 stream: ${sequentialRuns} streams per path, one at a time, the paths taking turns; 50 and 200: ${rounds} bursts per path, taking turns. /v3: one quota key per concurrent stream; "(one key)": all 200 streams on one key. Times in ms; "added" = the path minus direct at the same percentile. CPU per stream: CPU time (user + system) each process used while that path ran, divided by its streams.`;
  if (profiling) {
    const summaries = apis.map((a) => {
      const files = fs.existsSync(a.profileDir) ? fs.readdirSync(a.profileDir).filter((f) => f.endsWith('.cpuprofile')) : [];
      // Start-up (module loading, the tokenizer, the language detector) is left out.
      const summary = files.length ? profileSummary(path.join(a.profileDir, files[0]!), { sinceUs: (measuringFrom - a.startedAt) * 1000, topFunctions: 25 }) : 'no profile was written';
      const title = { api: '/v3 as configured (rate limit on)', 'api-no-rate-limit': '/v3, rate limit off', 'api-no-overlap': '/v3, provider after admission', 'api-default-heap': '/v3, V8 default young generation' }[a.name] ?? a.name;
      return [`## ${title}`, '', summary].join('\n');
    });
    // The same accounting for the floors and /v3, per stream served: where /v3 pays beyond them.
    const profileOf = (name: string) => {
      const dir = path.join(work, `${name}-profile`);
      const file = fs.existsSync(dir) ? fs.readdirSync(dir).find((f) => f.endsWith('.cpuprofile')) : undefined;
      return file ? path.join(dir, file) : null;
    };
    const streamsOf = (...paths: PathName[]) => rows.filter((r) => paths.includes(r.path)).reduce((n, r) => n + r.samples.length, 0);
    const compared = [
      { title: 'bare proxy', name: 'bare-proxy', streams: streamsOf('bare proxy'), sinceUs: (measuringFrom - middleStartedAt) * 1000 },
      { title: 'Express floor', name: 'express-floor', streams: streamsOf('Express proxy (floor)'), sinceUs: (measuringFrom - middleStartedAt) * 1000 },
      { title: 'relay floor', name: 'relay-floor', streams: streamsOf('relay (floor)'), sinceUs: (measuringFrom - middleStartedAt) * 1000 },
      { title: 'lean floor', name: 'lean-floor', streams: streamsOf('lean gateway (floor)'), sinceUs: (measuringFrom - middleStartedAt) * 1000 },
      { title: '/v3', name: 'api', streams: streamsOf('/v3', '/v3 (one key)'), sinceUs: (measuringFrom - api.startedAt) * 1000 },
    ].flatMap((p) => {
      const file = profileOf(p.name);
      return file && p.streams > 0 ? [{ ...p, file }] : [];
    });
    writeSection(
      'hot-path-profile',
      [
        '# Where the API processes spend their CPU (`BENCH_CPU_PROFILE=1 npm run bench:messaging`)',
        '',
        `Run ${new Date().toISOString()} on ${machineLine()}. Before: ${describeLoad(loadBefore)}. After: ${describeLoad(loadAfter!)}. The run of the results above, with the API processes under \`node --cpu-prof\` (sampling slows them a little, so these latencies are only context). Self time of every sample from the first measured stream on (start-up left out). The profiler samples wall time: a thread descheduled inside a system call (on 2 cores shared by six processes and PostgreSQL) counts as that call's time, which is why \`writev\` (the socket writes of every relayed chunk) looks larger than its CPU cost. ${method}`,
        '',
        latencyTable(rows),
        '',
        '## Per stream, beside the floors',
        '',
        'Busy self time per stream served, by component, in the bare proxy, the three floors and the /v3 API process (its /v3 and "(one key)" streams), the rows where /v3 spends most beyond the bare proxy first. Wall-time sampling inflates socket writes alike in every process.',
        '',
        compared.length === 5 ? comparisonTable(compared) : 'a profile was not written',
        '',
        ...summaries.flatMap((x) => [x, '']),
      ].join('\n'),
    );
  } else {
    const body = [
      '# Hot paths: the /v3 gateway and budget admission (`npm run bench:messaging`)',
      '',
      `Run ${new Date().toISOString()} (${((Date.now() - started) / 1000).toFixed(0)} s) on ${machineLine()}. Before: ${describeLoad(loadBefore)}. After: ${describeLoad(loadAfter!)}. Client, fake provider, bare proxy, the three floors and the four API processes (\`api/server.ts\` with the flags scripts/start gives it, one without them; LOG_LEVEL=info to a file) each in its own process; the admissions in a process of their own (bench/budget-admission.ts, its full section below), before the others started.`,
      '',
      '## Goals',
      '',
      goalsTable(rows, admissions),
      '',
      '## Gateway latency',
      '',
      method,
      '',
      latencyTable(rows),
      '',
      '## Where /v3 spends the time before the first token (its Server-Timing header)',
      '',
      'The /v3 process of the goals runs with Server-Timing off, as production does by default (MESSAGING_SERVER_TIMING); these phases are those of the two other API processes, the same code with the rate limit off, and with the provider called after the admission. Measured by the API itself from the moment its first middleware sees the request: `arrival` (the middleware before the quota gate), `auth` (the quota key, cached), `route` (the rate limit, reading and validating the body), `admit` (the admission, usually from the key\'s escrow slice; the provider call is sent meanwhile when it may be), `provider` (from the admission to the provider\'s answer headers: the provider call on a kept-alive connection, and the provider\'s own time to answer, which the direct path has too), `relay` (from those headers to the first events written). "In the API" = all of them but `provider`. "Rest" = the added TTFT p50 minus that and minus what the provider phase takes beyond the direct TTFT: the extra hops (client → API, API → client) and waiting for a CPU; negative provider excess (the call was sent during the admission) makes it larger. Phase percentiles are taken separately, so they do not add up exactly.',
      '',
      phasesTable(rows),
      '',
      'The floor of the admit phase, measured in the same run on a plain connection (p50 of 40):',
      '',
      '| Connection | `SELECT 1` (ms) | `quota_reserve` (ms) |',
      '|---|---:|---:|',
      ...(floor ?? []).map((f) => `| ${f.gapMs ? `idle ${f.gapMs} ms before each call` : 'back to back'} | ${fmt(f.select1, 2)} | ${fmt(f.reserve, 2)} |`),
      ...(admissions
        ? ['', '## Admissions (same run)', '', `Load before: ${describeLoad(admissions.loadBefore)}; after: ${describeLoad(admissions.loadAfter)}.`, '', admissionsTable(admissions)]
        : []),
    ].join('\n');
    writeSection('messaging-latency', body);
  }
  // BENCH_KEEP=1 keeps the API processes' logs and profiles for a closer look.
  if (process.env.BENCH_KEEP) console.log(`kept: ${work}`);
  else fs.rmSync(work, { recursive: true, force: true });
}

await main();
