/**
 * Shared by the audio benchmarks: a throw-away system (Temporal, Weaviate, a fresh database: the
 * test stack of test/support/stack.ts) with the API and the workers as separate OS processes, so
 * that the measuring client (this process) never shares a CPU queue with the server's event loop;
 * and writing a marked section of bench/RESULTS.md.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, repoRoot } from '../scripts/stack.js';
import { startTestStack, stopTestStack, systemEnv, testStack } from '../test/support/stack.js';
import { startWorker, type RunningWorker } from '../test/support/system.js';

const benchDir = path.dirname(fileURLToPath(import.meta.url));

export interface BenchApi {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/**
 * The API as its own process (node api/server.ts), ready when /health answers. `nodeArgs` go to
 * node itself (e.g. `--cpu-prof`, which NODE_OPTIONS does not take).
 */
export async function startApiProcess(env: Record<string, string> = {}, nodeArgs: string[] = []): Promise<BenchApi> {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', 'api/server.ts'], {
    cwd: repoRoot,
    env: { ...process.env, ...systemEnv({ PORT: String(port), LOG_LEVEL: 'warn', ...env }) },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the API exited with ${child.exitCode}`);
    if (await fetch(`${url}/health`).then((r) => r.ok, () => false)) break;
    if (Date.now() > deadline) throw new Error('the API did not start');
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    pid: child.pid!,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

export async function startBenchStack() {
  await startTestStack();
  return testStack();
}

export { startWorker, stopTestStack, type RunningWorker };

export async function newPartnerKey(apiUrl: string): Promise<string> {
  const res = await fetch(`${apiUrl}/api/partners/bench-${process.pid}-${Date.now()}`, { method: 'POST', headers: { 'X-API-Key': testStack().adminApiKey }, body: new FormData() });
  if (res.status !== 201) throw new Error(`partner: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { api_key: string }).api_key;
}

export async function newQuotaKey(apiUrl: string, quotaType: string, tokens = 100_000_000): Promise<string> {
  const res = await fetch(`${apiUrl}/api/quota-keys`, {
    method: 'POST',
    headers: { 'X-API-Key': testStack().adminApiKey, 'content-type': 'application/json' },
    body: JSON.stringify({ name: `bench-${Date.now()}`, quota_type: quotaType, token_amount: tokens }),
  });
  if (res.status !== 201) throw new Error(`quota key: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { api_key: string }).api_key;
}

export const median = (xs: number[]) => percentile(xs, 50);
export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? NaN;
}

/** The machine as the run saw it: cores, load average at a moment. */
export const machine = () => `${os.cpus().length} cores, load average ${os.loadavg().map((x) => x.toFixed(2)).join(' / ')}`;

/** Replaces (or appends) the section between `<!-- name:start -->` and `<!-- name:end -->` of bench/RESULTS.md. */
export function writeSection(name: string, body: string): void {
  const section = `<!-- ${name}:start -->\n${body.trim()}\n<!-- ${name}:end -->`;
  process.stdout.write(`${section}\n`);
  if (process.env.BENCH_NO_WRITE) return;
  const file = path.join(benchDir, 'RESULTS.md');
  const existing = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  const start = existing.indexOf(`<!-- ${name}:start -->`);
  const end = existing.indexOf(`<!-- ${name}:end -->`);
  const updated = start >= 0 && end > start ? existing.slice(0, start) + section + existing.slice(end + `<!-- ${name}:end -->`.length) : `${existing.trimEnd()}\n\n${section}\n`;
  fs.writeFileSync(file, updated);
}
