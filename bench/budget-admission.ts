/**
 * Benchmark of knowledge-base budget admission (lib/budget/ledger.ts): reserve -> settle pairs
 * against a real PostgreSQL, in a throw-away database that is dropped at the end.
 *
 *   npm run bench:budget
 *
 * The clients are this process, as the worker's activities are the ledger's clients in production;
 * what is measured is the ledger (its group commit and the server-side functions) and PostgreSQL.
 *
 * Scenarios
 *   A  one contended KB: C = 1, 8, 32, 64 clients share one KB, so every decision queues on the
 *      same row lock (SELECT ... FOR UPDATE inside the server-side functions).
 *   B  across KBs: 32 clients on 32 KBs, 64 on 64, so nothing contends on a row lock; only the
 *      connection pool and the machine's cores are shared.
 *   C  last capacity (zero overspend): a KB with character_limit = 1000, 64 concurrent clients
 *      reserving 10 characters at a time until they are refused; exactly 100 admissions must
 *      succeed, and a concurrent monitor checks consumed + reserved <= limit throughout.
 *
 * Besides throughput and latency, each setting reports the round trips per pair and the batch
 * size (group commit), and the CPU time per pair of this process and of the PostgreSQL backends
 * serving it (from /proc), so that a result on a shared machine can be read as cost, not only as
 * speed.
 *
 * Environment: DATABASE_BASE_URL (default postgresql://postgres@127.0.0.1:5432), BENCH_POOL_SIZE
 * (default 10, the application's createDb default), BENCH_SECONDS (measured seconds per setting,
 * default 5), BENCH_WARMUP_SECONDS (default 1), BENCH_SUMMARY_FILE (also write the numbers as JSON
 * there: bench/messaging-latency.ts runs this benchmark as part of its run), BENCH_NO_WRITE=1 (print
 * only). Writes its section of bench/RESULTS.md.
 */
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { createDb, type Db } from '../lib/platform/db.js';
import { reserve, settle } from '../lib/budget/ledger.js';
import type { ReserveResult } from '../lib/contracts/budget-admission.js';
import { dropDatabase, ensureDatabase, migrate } from '../scripts/stack.js';
import { cpuOf, cpuSpent, describeLoad, fmt, machineLine, percentile, readLoad, writeSection, type LoadReading } from './support/results.js';
import { setting } from '../lib/platform/config.js';

const baseUrl = setting(process.env, 'DATABASE_BASE_URL');
const databaseUrl = `${baseUrl}/dwb_bench_${process.pid}`;
const ownDb = new URL(databaseUrl).pathname.slice(1);
const poolSize = setting(process.env, 'BENCH_POOL_SIZE');
const measureMs = positiveInt(process.env.BENCH_SECONDS, 5) * 1000;
const warmupMs = setting(process.env, 'BENCH_WARMUP_SECONDS') * 1000;
const contendedClients = [1, 8, 32, 64];
const acrossKbs = [32, 64];
const lastCapacity = { limit: 1000, chunk: 10, clients: 64, trials: 5 };
const goals = { oneKb: 500, acrossKbs: 1500 };

function positiveInt(value: string | undefined, fallback: number): number {
  const n = Number(value);
  return Number.isInteger(n) && n > 0 ? n : fallback;
}

// ------------------------------------------------------------------------------------- setup

async function createPartner(db: Db): Promise<string> {
  const partner = await db.partner.create({ data: { name: `bench-${process.pid}`, keyHash: `bench-${process.pid}-${Date.now()}` } });
  return partner.id;
}

async function createKb(db: Db, partnerId: string, name: string, characterLimit: bigint | null): Promise<string> {
  return (await db.knowledgeBase.create({ data: { partnerId, name, characterLimit } })).id;
}

/** Counts the ledger's round trips (its calls of pool.query) and the requests they carried. */
function countRoundTrips(db: Db) {
  const counts = { calls: 0, items: 0 };
  const query = db.pool.query.bind(db.pool) as (...args: unknown[]) => Promise<unknown>;
  (db.pool as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = (...args: unknown[]) => {
    counts.calls++;
    const params = args[1];
    const batch = Array.isArray(params) && typeof params[0] === 'string' && params[0].startsWith('[') ? (JSON.parse(params[0]) as unknown[]).length : 1;
    counts.items += batch;
    return query(...args);
  };
  return counts;
}

/** The PostgreSQL backends serving this benchmark's database, and the CPU they have used. */
async function backendCpu(monitor: pg.Client): Promise<Map<number, number>> {
  const { rows } = await monitor.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [ownDb]);
  return cpuOf(rows.map((r) => r.pid));
}

// ------------------------------------------------------------------------ throughput scenarios

export interface RunResult {
  scenario: 'one KB' | 'across KBs';
  clients: number;
  kbs: number;
  pairs: number;
  seconds: number;
  reserveMs: number[];
  settleMs: number[];
  perSecond: number[];
  /** Round trips of the ledger per completed pair, and requests per round trip (group commit). */
  roundTripsPerPair: number;
  batchSize: number;
  /** CPU time per pair (µs): this process, and the PostgreSQL backends of the benchmark's database. */
  nodeCpuUs: number;
  pgCpuUs: number;
}

/**
 * Each client loops reserve -> settle on its KB until the window closes. Pairs that start in the
 * warm-up are run but not counted; a pair counts when it started at or after the window opened and
 * finished before it closed.
 */
async function runLoop(db: Db, monitor: pg.Client, counts: { calls: number; items: number }, scenario: RunResult['scenario'], kbFor: (client: number) => string, clients: number): Promise<RunResult> {
  const tag = `${scenario.replace(/\W/g, '')}-c${clients}-${Date.now()}`;
  const start = performance.now();
  const windowStart = start + warmupMs;
  const windowEnd = windowStart + measureMs;
  const reserveMs: number[] = [];
  const settleMs: number[] = [];
  let pairs = 0;
  const perSecond = new Array<number>(Math.max(1, Math.floor(measureMs / 1000))).fill(0);
  let opened: { node: NodeJS.CpuUsage; pg: Map<number, number>; calls: number; items: number } | null = null;
  let closed: { node: NodeJS.CpuUsage; pg: Map<number, number>; calls: number; items: number } | null = null;
  const snapshot = async () => ({ node: process.cpuUsage(), pg: await backendCpu(monitor), calls: counts.calls, items: counts.items });
  const windowOpens = new Promise<void>((resolve) => setTimeout(() => void snapshot().then((s) => ((opened = s), resolve())), warmupMs));
  const windowCloses = new Promise<void>((resolve) => setTimeout(() => void snapshot().then((s) => ((closed = s), resolve())), warmupMs + measureMs));

  const client = async (c: number) => {
    const knowledgeBaseId = kbFor(c);
    for (let i = 0; performance.now() < windowEnd; i++) {
      const operationKey = `${tag}-${c}-${i}`;
      const t0 = performance.now();
      const r = await reserve(db, { knowledgeBaseId, operationKey, workflowId: `bench-${tag}-${c}`, category: 'digitization', bound: { characters: 10 } });
      const t1 = performance.now();
      if (!r.admitted) throw new Error(`${scenario}: reserve refused unexpectedly: ${r.reason} (${r.detail})`);
      const outcome = await settle(db, operationKey, { characters: 10 });
      const t2 = performance.now();
      if (outcome !== 'settled') throw new Error(`${scenario}: settle returned ${outcome}`);
      if (t0 >= windowStart && t2 <= windowEnd) {
        pairs++;
        const second = Math.floor((t2 - windowStart) / 1000);
        if (second < perSecond.length) perSecond[second]!++;
        reserveMs.push(t1 - t0);
        settleMs.push(t2 - t1);
      }
    }
  };
  await Promise.all([...Array.from({ length: clients }, (_, c) => client(c)), windowOpens, windowCloses]);
  const a = opened!;
  const b = closed!;
  const node = (b.node.user + b.node.system - a.node.user - a.node.system) / Math.max(1, pairs);
  return {
    scenario,
    clients,
    kbs: new Set(Array.from({ length: clients }, (_, c) => kbFor(c))).size,
    pairs,
    seconds: measureMs / 1000,
    reserveMs,
    settleMs,
    perSecond,
    roundTripsPerPair: (b.calls - a.calls) / Math.max(1, pairs),
    batchSize: (b.items - a.items) / Math.max(1, b.calls - a.calls),
    nodeCpuUs: node,
    pgCpuUs: (cpuSpent(a.pg, b.pg) * 1000) / Math.max(1, pairs),
  };
}

// ------------------------------------------------------------------------------ last capacity

interface CapacityTrial {
  admitted: number;
  refused: number;
  otherRefusals: number;
  settled: number;
  finalConsumed: bigint;
  finalHeld: bigint;
  monitorSamples: number;
  monitorMax: bigint;
  confirmRoundAdmitted: number;
}

async function committedUse(db: Db, kbId: string): Promise<bigint> {
  // One statement, one snapshot: settle moves characters from the hold to the counter in one
  // transaction, so this sum is never torn.
  const rows = await db.$queryRaw<Array<{ used: bigint }>>`
    SELECT kb."charactersConsumed" + COALESCE((
      SELECT SUM(r.characters) FROM budget_reservations r
      WHERE r."knowledgeBaseId" = kb.id AND r.status IN ('pending', 'uncertain')), 0)::bigint AS used
    FROM knowledge_bases kb WHERE kb.id = ${kbId}::uuid`;
  return BigInt(rows[0]!.used);
}

/**
 * 64 clients reserve 10 characters at a time until they are refused. Even-numbered clients settle
 * each admission at once (capacity moves to charactersConsumed), odd ones leave it pending (capacity
 * stays held), so the limit check has to add both. A monitor samples consumed + held meanwhile.
 * After everyone has been refused, one more round of 64 concurrent reserves must admit none.
 */
async function lastCapacityTrial(db: Db, partnerId: string, trial: number): Promise<CapacityTrial> {
  const { limit, chunk, clients } = lastCapacity;
  const kbId = await createKb(db, partnerId, `last-capacity-${trial}`, BigInt(limit));
  const tag = `cap-${trial}-${Date.now()}`;
  let admitted = 0;
  let refused = 0;
  let otherRefusals = 0;
  let settled = 0;
  let running = true;
  let monitorSamples = 0;
  let monitorMax = 0n;

  const monitor: Promise<unknown> = (async () => {
    while (running) {
      const used = await committedUse(db, kbId);
      monitorSamples++;
      if (used > monitorMax) monitorMax = used;
      if (used > BigInt(limit)) throw new Error(`invariant broken: consumed + reserved = ${used} > ${limit}`);
    }
  })().then(
    () => null,
    (err: unknown) => err, // handled here so a failure cannot become an unhandled rejection
  );

  const note = (r: ReserveResult) => {
    if (r.admitted) admitted++;
    else if (r.reason === 'character_limit_exhausted') refused++;
    else otherRefusals++;
  };
  const client = async (c: number) => {
    for (let i = 0; ; i++) {
      const operationKey = `${tag}-${c}-${i}`;
      const r = await reserve(db, { knowledgeBaseId: kbId, operationKey, workflowId: `bench-${tag}-${c}`, category: 'digitization', bound: { characters: chunk } });
      note(r);
      if (!r.admitted) return;
      if (c % 2 === 0) {
        const outcome = await settle(db, operationKey, { characters: chunk });
        if (outcome !== 'settled') throw new Error(`last capacity: settle returned ${outcome}`);
        settled++;
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: clients }, (_, c) => client(c)));
  } finally {
    running = false;
  }
  const monitorError = await monitor;
  if (monitorError) throw monitorError;
  const admittedBeforeConfirm = admitted;
  await Promise.all(
    Array.from({ length: clients }, async (_, c) =>
      note(await reserve(db, { knowledgeBaseId: kbId, operationKey: `${tag}-confirm-${c}`, workflowId: `bench-${tag}-confirm`, category: 'digitization', bound: { characters: chunk } })),
    ),
  );
  const confirmRoundAdmitted = admitted - admittedBeforeConfirm;
  const kb = await db.knowledgeBase.findUniqueOrThrow({ where: { id: kbId } });
  const held = await db.budgetReservation.aggregate({ where: { knowledgeBaseId: kbId, status: { in: ['pending', 'uncertain'] } }, _sum: { characters: true } });
  return { admitted, refused, otherRefusals, settled, finalConsumed: kb.charactersConsumed, finalHeld: held._sum.characters ?? 0n, monitorSamples, monitorMax, confirmRoundAdmitted };
}

/** Wall time of `SELECT 1` over a plain node-postgres connection: a bare loopback round trip, the floor. */
async function roundTripMs(): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    for (let i = 0; i < 50; i++) await client.query('SELECT 1');
    const n = 500;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await client.query('SELECT 1');
    return (performance.now() - t0) / n;
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------------------------- reporting

const rate = (r: RunResult | undefined) => (r ? r.pairs / r.seconds : NaN);

function throughputTable(results: RunResult[]): string {
  const lines = [
    '| Scenario | Clients | KBs | Pairs measured | Admissions/s (pairs) | per second (min-max) | reserve p50 / p99 (ms) | settle p50 / p99 (ms) | Round trips per pair | Requests per round trip | CPU per pair: Node / PostgreSQL (µs) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of results) {
    lines.push(
      `| ${r.scenario} | ${r.clients} | ${r.kbs} | ${r.pairs} | ${fmt(rate(r), 0)} | ${Math.min(...r.perSecond)}-${Math.max(...r.perSecond)} | ${fmt(percentile(r.reserveMs, 50))} / ${fmt(percentile(r.reserveMs, 99))} | ${fmt(percentile(r.settleMs, 50))} / ${fmt(percentile(r.settleMs, 99))} | ${fmt(r.roundTripsPerPair, 2)} | ${fmt(r.batchSize)} | ${fmt(r.nodeCpuUs, 0)} / ${fmt(r.pgCpuUs, 0)} |`,
    );
  }
  return lines.join('\n');
}

function capacityTable(trials: CapacityTrial[]): string {
  const lines = [
    '| Trial | Admitted | Refused (limit) | Settled / left pending | consumed + held at end | Monitor samples (max seen) | Admitted in confirm round |',
    '|---:|---:|---:|---:|---:|---:|---:|',
  ];
  trials.forEach((t, i) =>
    lines.push(
      `| ${i + 1} | ${t.admitted} | ${t.refused} | ${t.settled} / ${t.admitted - t.settled} | ${t.finalConsumed} + ${t.finalHeld} = ${t.finalConsumed + t.finalHeld} | ${t.monitorSamples} (${t.monitorMax}) | ${t.confirmRoundAdmitted} |`,
    ),
  );
  return lines.join('\n');
}

/** The best setting of each scenario, the figures the goals are read against. */
function bestOf(results: RunResult[], scenario: RunResult['scenario']): RunResult | undefined {
  return results.filter((r) => r.scenario === scenario).reduce<RunResult | undefined>((best, r) => (!best || rate(r) > rate(best) ? r : best), undefined);
}

function interpretation(results: RunResult[], trials: CapacityTrial[], rtt: number): string[] {
  const one1 = results.find((r) => r.scenario === 'one KB' && r.clients === 1);
  const one = bestOf(results, 'one KB');
  const across = bestOf(results, 'across KBs');
  const pairMs = one1 ? percentile(one1.reserveMs, 50) + percentile(one1.settleMs, 50) : NaN;
  const met = (r: RunResult | undefined, goal: number) => (rate(r) >= goal ? `met (${fmt(rate(r), 0)}/s ≥ ${goal}/s)` : `**not met** (${fmt(rate(r), 0)}/s < ${goal}/s)`);
  return [
    `- Goals: one contended KB ≥ ${goals.oneKb} pairs/s: ${met(one, goals.oneKb)} at C = ${one?.clients}; across KBs ≥ ${goals.acrossKbs}/s: ${met(across, goals.acrossKbs)} at C = ${across?.clients}; zero overspend: ${trials.every((t) => t.admitted === lastCapacity.limit / lastCapacity.chunk && t.confirmRoundAdmitted === 0 && t.monitorMax <= BigInt(lastCapacity.limit)) ? 'met' : '**not met**'} (section C).`,
    `- Each decision is one round trip: \`reserve\` calls \`budget_reserve_batch\`, \`settle\` \`budget_settle_batch\` (migrations one_round_trip_admission and admission_held_counters), which lock the KB row, decide and write in one statement. Decisions that arrive while one of their kind is in flight go together as the next batch (lib/platform/group-commit.ts): one round trip and one WAL flush for the lot, each decided in order under its KB's lock exactly as alone. A lone client pays one round trip each (${fmt(one1?.roundTripsPerPair ?? NaN, 2)} per pair at C = 1: ~${fmt(pairMs)} ms per pair at p50 against a bare \`SELECT 1\` of ${fmt(rtt, 2)} ms, the rest being the function's work and the durable commit's WAL flush); under concurrency the batches grow (${results.filter((r) => r.clients >= 32).map((r) => `${fmt(r.batchSize)} requests per round trip at C = ${r.clients} ${r.scenario === 'one KB' ? 'on one KB' : 'across KBs'}`).join(', ')}), so the round trips and flushes per pair fall below one.`,
    `- One KB: the KB row lock serialises the decisions, but a batch takes the lock once per round trip and holds it for microseconds per decision, not for a client's round trip, so contention costs little: ${results.filter((r) => r.scenario === 'one KB').map((r) => `${fmt(rate(r), 0)}/s at C = ${r.clients}`).join(', ')}. Across KBs: ${results.filter((r) => r.scenario === 'across KBs').map((r) => `${fmt(rate(r), 0)}/s at C = ${r.clients}`).join(', ')}.`,
    `- Cost: PostgreSQL spends ${results.filter((r) => r.clients >= 32).map((r) => `${fmt(r.pgCpuUs, 0)} µs`).join(' / ')} of CPU per pair at C ≥ 32 (rows in the table's order) and this process ${results.filter((r) => r.clients >= 32).map((r) => `${fmt(r.nodeCpuUs, 0)} µs`).join(' / ')}; at 2 cores that bounds the pairs per second near 2,000,000 / (PostgreSQL + Node µs per pair), whatever the concurrency. What remains per pair inside PostgreSQL is the work itself: two index probes and an insert for the hold, an update of the hold (its indexes), an insert of the usage event and an update of the KB row for the settlement, and a share of the commit.`,
    `- Last capacity: in ${trials.length} trials with 64 concurrent clients, ${trials.map((t) => t.admitted).join(', ')} reservations of 10 characters were admitted against a limit of 1000, a further round of 64 concurrent reserves admitted ${trials.reduce((n, t) => n + t.confirmRoundAdmitted, 0)}, and the concurrent monitor never saw consumed + reserved above the limit (max ${trials.reduce((m, t) => (t.monitorMax > m ? t.monitorMax : m), 0n)}): batching changes how many decisions share a round trip, not how each is decided.`,
  ];
}

// --------------------------------------------------------------------------------------- main

export interface BudgetSummary {
  loadBefore: LoadReading;
  loadAfter: LoadReading;
  results: Array<Omit<RunResult, 'reserveMs' | 'settleMs'> & { perSecondRate: number; reserveP50: number; reserveP99: number; settleP50: number; settleP99: number }>;
  lastCapacityExact: boolean;
  trials: number;
}

async function main(): Promise<number> {
  const started = Date.now();
  let db: Db | null = null;
  let monitor: pg.Client | null = null;
  let created = false;
  const cleanup = async () => {
    await monitor?.end().catch(() => undefined);
    monitor = null;
    if (db) await db.$disconnect().catch(() => undefined);
    db = null;
    if (created) await dropDatabase(databaseUrl).catch((err) => console.error(`could not drop ${databaseUrl}: ${err}`));
    created = false;
  };
  const onSignal = (signal: NodeJS.Signals) => {
    console.error(`\n${signal}: dropping ${databaseUrl}`);
    void cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    console.log(`database ${databaseUrl}, pool size ${poolSize}, ${warmupMs / 1000} s warm-up + ${measureMs / 1000} s per setting`);
    const loadBefore = await readLoad();
    console.log(`before: ${describeLoad(loadBefore)}`);
    created = true;
    await ensureDatabase(databaseUrl);
    await migrate(databaseUrl);
    db = createDb(databaseUrl, poolSize);
    monitor = new pg.Client({ connectionString: databaseUrl });
    await monitor.connect();
    const pgVersion = (await monitor.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version;
    const rtt = await roundTripMs();
    const partnerId = await createPartner(db);
    const counts = countRoundTrips(db);

    const results: RunResult[] = [];
    const big = 1_000_000_000_000n;
    for (const clients of contendedClients) {
      const kb = await createKb(db, partnerId, `contended-${clients}`, big);
      const r = await runLoop(db, monitor, counts, 'one KB', () => kb, clients);
      results.push(r);
      console.log(`A one KB, C=${clients}: ${fmt(rate(r))} pairs/s, ${fmt(r.roundTripsPerPair, 2)} round trips per pair, CPU per pair ${fmt(r.nodeCpuUs, 0)} µs Node + ${fmt(r.pgCpuUs, 0)} µs PostgreSQL`);
    }
    for (const clients of acrossKbs) {
      const kbs: string[] = [];
      for (let i = 0; i < clients; i++) kbs.push(await createKb(db, partnerId, `across-${clients}-${i}`, big));
      const r = await runLoop(db, monitor, counts, 'across KBs', (c) => kbs[c]!, clients);
      results.push(r);
      console.log(`B across KBs, C=${clients}: ${fmt(rate(r))} pairs/s, ${fmt(r.roundTripsPerPair, 2)} round trips per pair, CPU per pair ${fmt(r.nodeCpuUs, 0)} µs Node + ${fmt(r.pgCpuUs, 0)} µs PostgreSQL`);
    }

    const trials: CapacityTrial[] = [];
    const expected = lastCapacity.limit / lastCapacity.chunk;
    for (let t = 0; t < lastCapacity.trials; t++) {
      const trial = await lastCapacityTrial(db, partnerId, t);
      trials.push(trial);
      const total = trial.finalConsumed + trial.finalHeld;
      console.log(`C trial ${t + 1}: admitted ${trial.admitted}, refused ${trial.refused}, consumed ${trial.finalConsumed} + held ${trial.finalHeld} = ${total} / ${lastCapacity.limit}, monitor max ${trial.monitorMax} over ${trial.monitorSamples} samples`);
      const problems: string[] = [];
      if (trial.admitted !== expected) problems.push(`admitted ${trial.admitted}, expected exactly ${expected}`);
      if (trial.confirmRoundAdmitted !== 0) problems.push(`the confirm round admitted ${trial.confirmRoundAdmitted}`);
      if (trial.otherRefusals !== 0) problems.push(`${trial.otherRefusals} refusals for a reason other than character_limit_exhausted`);
      if (total !== BigInt(lastCapacity.limit)) problems.push(`consumed + held = ${total}, expected ${lastCapacity.limit}`);
      if (trial.monitorMax > BigInt(lastCapacity.limit)) problems.push(`monitor saw ${trial.monitorMax}`);
      if (problems.length) throw new Error(`last capacity trial ${t + 1} failed: ${problems.join('; ')}`);
    }
    const loadAfter = await readLoad();
    console.log(`after: ${describeLoad(loadAfter)}`);

    const body = [
      '# Budget admission (`npm run bench:budget`)',
      '',
      `Run ${new Date().toISOString()} (${((Date.now() - started) / 1000).toFixed(0)} s) on ${machineLine()}; PostgreSQL ${pgVersion} on loopback (throw-away database, dropped afterwards); pool of ${poolSize} connections (the application default). Before: ${describeLoad(loadBefore)}. After: ${describeLoad(loadAfter)}.`,
      '',
      `Method: each client loops \`reserve\` (digitization, 10 characters) -> \`settle\` (10 characters); ${warmupMs / 1000} s warm-up, then ${measureMs / 1000} s measured per setting. Admissions/s = completed reserve + settle pairs per second; latencies are per call, including waiting for the batch in flight and for the KB row lock. CPU per pair: this process (the clients and the ledger's code) and the PostgreSQL backends of the benchmark's database, read from /proc over the measured window. A bare \`SELECT 1\` round trip costs ${fmt(rtt, 2)} ms here.`,
      '',
      '## Throughput and latency',
      '',
      throughputTable(results),
      '',
      '## C. Last capacity (character_limit = 1000, 64 concurrent clients reserving 10 characters until refused)',
      '',
      'Even-numbered clients settle each admission at once, odd ones leave it pending, so the limit check must count both consumed and held characters. A monitor query samples consumed + held (one snapshot) throughout; after all clients are refused, one more round of 64 concurrent reserves must admit none.',
      '',
      capacityTable(trials),
      '',
      `Result: exactly ${expected} admitted in every trial, never more; consumed + reserved <= limit at every sample.`,
      '',
      '## Reading',
      '',
      ...interpretation(results, trials, rtt),
    ].join('\n');
    writeSection('budget-admission', body);
    if (process.env.BENCH_SUMMARY_FILE) {
      const summary: BudgetSummary = {
        loadBefore,
        loadAfter,
        results: results.map(({ reserveMs, settleMs, ...r }) => ({
          ...r,
          perSecondRate: rate({ ...r, reserveMs, settleMs }),
          reserveP50: percentile(reserveMs, 50),
          reserveP99: percentile(reserveMs, 99),
          settleP50: percentile(settleMs, 50),
          settleP99: percentile(settleMs, 99),
        })),
        lastCapacityExact: true,
        trials: trials.length,
      };
      fs.writeFileSync(process.env.BENCH_SUMMARY_FILE, JSON.stringify(summary));
    }
    return 0;
  } finally {
    await cleanup();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
