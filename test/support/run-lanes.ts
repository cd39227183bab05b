import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from '../../scripts/stack.js';
import { laneFiles, lanes, type Lane } from './lanes.js';

/**
 * Runs test lanes side by side (scripts/test): each lane is one mocha process that starts the servers
 * its files need (test/support/global.ts), so lanes share no database, Temporal or Weaviate. Output
 * of a lane is kept in a log and printed whole when it ends, then a table of lane times.
 *
 *   node --import tsx test/support/run-lanes.ts             every lane
 *   node --import tsx test/support/run-lanes.ts unit voice  those lanes
 *
 * TEST_LANES_AT_ONCE caps how many run together (default: all of them; the lanes that need servers
 * spend much of their time waiting on workflows, so more lanes than cores still gain).
 */
interface Outcome {
  lane: Lane;
  files: number;
  ms: number;
  code: number;
  summary: string;
  slowest: [string, number][];
  /** Mocha's report of the lane's failures ("N failing" onward), repeated after the table. */
  failures: string;
  /** User + system CPU of the lane's processes; null if the lane was killed before it could say. */
  cpuMs: number | null;
}

/** The children's line of bash's `times` ("0m1.5s 0m0.2s\n1m30.25s 0m10.5s"): user + system. */
function childCpuMs(file: string): number | null {
  try {
    const line = fs.readFileSync(file, 'utf8').trim().split('\n')[1] ?? '';
    const parts = [...line.matchAll(/(?<!\d)(\d+)m(\d+(?:\.\d+)?)s/g)].map((m) => Number(m[1]) * 60_000 + Number(m[2]) * 1000);
    return parts.length === 2 ? Math.round(parts[0]! + parts[1]!) : null;
  } catch {
    return null;
  }
}

const selected = process.argv.slice(2);
const unknown = selected.filter((name) => !lanes.some((l) => l.name === name));
if (unknown.length) {
  console.error(`unknown lane ${unknown.join(', ')}; lanes: ${lanes.map((l) => l.name).join(', ')}`);
  process.exit(2);
}
const chosen = selected.length ? lanes.filter((l) => selected.includes(l.name)) : [...lanes];
const atOnce = Number(process.env.TEST_LANES_AT_ONCE) || chosen.length;
const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dwb-lanes-'));
const running = new Set<ReturnType<typeof spawn>>();
/** Lane name -> its log, while it runs (not when a lone lane writes to the terminal). */
const runningLogs = new Map<string, string>();

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  // Each mocha stops the servers of its lane on the signal; wait for them before leaving.
  process.on(signal, () => {
    for (const child of running) child.kill(signal);
  });
}

/** CI keeps only the end of a run's output; the failures are printed again there, this much of each lane's. */
const failureReportChars = 8000;

const formatMs = (ms: number) => `${Math.floor(ms / 60_000)}:${String(Math.round((ms % 60_000) / 1000)).padStart(2, '0')}`;

async function runLane(lane: Lane): Promise<Outcome> {
  const files = laneFiles(lane);
  const log = path.join(logDir, `${lane.name}.log`);
  const timesFile = path.join(logDir, `${lane.name}.times.json`);
  const alone = chosen.length === 1;
  const started = Date.now();
  console.log(`[test] lane ${lane.name}: ${files.length} files, needs ${lane.needs}, started`);
  const out = alone ? 'inherit' : fs.openSync(log, 'w');
  // Through bash for its `times`: the CPU the lane's whole process tree used (servers, workers,
  // tools), which says more than wall time on a machine shared with other work.
  const cpuFile = path.join(logDir, `${lane.name}.cpu`);
  const child = spawn('bash', ['-c', 'node_modules/.bin/mocha "$@"; code=$?; times > "$LANE_CPU_FILE"; exit $code', 'mocha', ...files], {
    cwd: repoRoot,
    env: { ...process.env, TEST_FILE_TIMES: timesFile, LANE_CPU_FILE: cpuFile },
    stdio: ['ignore', out, out],
  });
  running.add(child);
  if (!alone) runningLogs.set(lane.name, log);
  const code = await new Promise<number>((resolve) => child.once('exit', (c, signal) => resolve(c ?? (signal ? 128 : 1))));
  running.delete(child);
  runningLogs.delete(lane.name);
  const ms = Date.now() - started;
  let summary = '';
  let failures = '';
  if (!alone) {
    fs.closeSync(out as number);
    const text = fs.readFileSync(log, 'utf8');
    console.log(`\n[test] ===== lane ${lane.name} (${formatMs(ms)}) =====\n${text}`);
    summary = [/(?<!\d)\d+ passing/, /(?<!\d)\d+ pending/, /(?<!\d)\d+ failing/]
      .map((re) => re.exec(text)?.[0])
      .filter(Boolean)
      .join(', ');
    const failing = /^ *\d+ failing/m.exec(text);
    if (failing) failures = text.slice(failing.index).trimEnd().slice(0, failureReportChars);
  }
  let slowest: [string, number][] = [];
  try {
    const times = JSON.parse(fs.readFileSync(timesFile, 'utf8')) as Record<string, number>;
    slowest = Object.entries(times).sort((a, b) => b[1] - a[1]).slice(0, 3);
  } catch {
    /* the lane ended before its last hook (a crash): no times */
  }
  return { lane, files: files.length, ms, code, summary, slowest, failures, cpuMs: childCpuMs(cpuFile) };
}

const started = Date.now();
// A line every two minutes while lanes run, so that a CI log shows progress before a lane ends.
const progress = setInterval(() => {
  const counts = [...runningLogs].map(([name, log]) => {
    const text = fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : '';
    return `${name} ${text.match(/✔/g)?.length ?? 0} passed, ${text.match(/^ {2,}\d+\) /gm)?.length ?? 0} failed`;
  });
  if (counts.length) console.log(`[test] ${formatMs(Date.now() - started)}: ${counts.join('; ')}`);
}, 120_000);
const queue = [...chosen];
const outcomes: Outcome[] = [];
await Promise.all(
  Array.from({ length: Math.min(atOnce, queue.length) }, async () => {
    for (let lane = queue.shift(); lane; lane = queue.shift()) outcomes.push(await runLane(lane));
  }),
);
clearInterval(progress);
fs.rmSync(logDir, { recursive: true, force: true });

console.log(`\n[test] lanes (wall time; ${atOnce} at once on ${os.availableParallelism()} cores):`);
for (const o of outcomes.sort((a, b) => lanes.indexOf(a.lane) - lanes.indexOf(b.lane))) {
  const result = o.code === 0 ? 'passed' : `FAILED (exit ${o.code})`;
  const cpu = o.cpuMs === null ? '' : `, cpu ${formatMs(o.cpuMs)}`;
  console.log(`  ${o.lane.name.padEnd(10)} ${o.lane.needs.padEnd(9)} ${String(o.files).padStart(3)} files  ${formatMs(o.ms).padStart(6)}${cpu}  ${result}${o.summary ? ` (${o.summary})` : ''}`);
  if (o.slowest.length) console.log(`  ${''.padEnd(10)} slowest: ${o.slowest.map(([f, ms]) => `${f} ${formatMs(ms)}`).join(', ')}`);
}
console.log(`  ${'all'.padEnd(10)} ${''.padEnd(9)} ${''.padStart(9)}  ${formatMs(Date.now() - started).padStart(6)}`);
for (const o of outcomes) if (o.failures) console.log(`\n[test] lane ${o.lane.name}, its failures again:\n${o.failures}`);
process.exit(outcomes.every((o) => o.code === 0) ? 0 : 1);
