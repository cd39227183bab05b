/**
 * What the hot-path benchmarks (bench/budget-admission.ts, bench/messaging-latency.ts) share: their
 * sections of bench/RESULTS.md, the machine's load around a run, the CPU time of processes
 * (PostgreSQL backends included) and percentiles.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const resultsFile = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'RESULTS.md');

/** Replaces (or appends) the section between `<!-- name:start -->` and `<!-- name:end -->` of bench/RESULTS.md. BENCH_NO_WRITE=1 only prints. */
export function writeSection(name: string, body: string): void {
  const open = `<!-- ${name}:start -->`;
  const close = `<!-- ${name}:end -->`;
  const section = `${open}\n${body.trim()}\n${close}`;
  process.stdout.write(`${section}\n`);
  if (process.env.BENCH_NO_WRITE) return;
  const existing = fs.existsSync(resultsFile) ? fs.readFileSync(resultsFile, 'utf8') : '';
  const start = existing.indexOf(open);
  const end = existing.indexOf(close);
  const updated = start >= 0 && end > start ? existing.slice(0, start) + section + existing.slice(end + close.length) : `${existing.trimEnd()}\n\n${section}\n`;
  fs.writeFileSync(resultsFile, updated);
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

function cpuTimes(): { idle: number; total: number } | null {
  try {
    const fields = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    return { idle: (fields[3] ?? 0) + (fields[4] ?? 0), total: fields.slice(0, 8).reduce((a, b) => a + b, 0) };
  } catch {
    return null;
  }
}

/** Share of all cores busy (any process) over `ms`, from /proc/stat; NaN off Linux. */
export async function cpuBusyOver(ms = 1000): Promise<number> {
  const before = cpuTimes();
  await new Promise((r) => setTimeout(r, ms));
  const after = cpuTimes();
  return before && after && after.total > before.total ? 1 - (after.idle - before.idle) / (after.total - before.total) : NaN;
}

/** The machine's load at a moment: the 1/5/15-minute load averages and the cores. */
export interface LoadReading {
  at: string;
  loadavg: number[];
  /** Share of all cores busy during the second before the reading (the benchmark idle). */
  busy: number;
}

export async function readLoad(): Promise<LoadReading> {
  const busy = await cpuBusyOver(1000);
  return { at: new Date().toISOString(), loadavg: os.loadavg(), busy };
}

export const describeLoad = (l: LoadReading) => `load average ${l.loadavg.map((x) => x.toFixed(2)).join(' / ')}, ${Number.isFinite(l.busy) ? Math.round(l.busy * 100) : 'n/a'} % of the cores busy in the idle second before`;

export function cores(): number {
  return os.availableParallelism();
}

export const machineLine = () => `${cores()} cores, ${(os.totalmem() / 1024 ** 3).toFixed(1)} GiB, ${os.type()} ${os.release()}, Node ${process.version}`;

const clockTicks = 100; // USER_HZ on Linux

/** CPU time (user + system, ms) a process has used so far, from /proc/<pid>/stat; NaN when unreadable. */
export function processCpuMs(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicks;
  } catch {
    return NaN;
  }
}

/** Summed CPU time of several processes; those that ended meanwhile count as 0. */
export function cpuOf(pids: number[]): Map<number, number> {
  return new Map(pids.map((p) => [p, processCpuMs(p)]));
}

export function cpuSpent(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, end] of after) {
    const start = before.get(pid) ?? 0;
    if (Number.isFinite(end) && Number.isFinite(start)) total += end - start;
  }
  return total;
}
