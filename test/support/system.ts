import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import { loadConfig } from '../../lib/platform/config.js';
import { createServices } from '../../lib/services.js';
import { connectTemporalClient } from '../../lib/platform/temporal.js';
import { createApp } from '../../api/app.js';
import { keepUploadFolder, uploadFolder } from '../../api/http/upload-folder.js';
import { keepClientConnections } from '../../api/http/connections.js';
import type { ApiDeps } from '../../api/deps.js';
import { dropDatabase, ensureDatabase, migrate, repoRoot } from '../../scripts/stack.js';
import { systemEnv, testStack } from './stack.js';
import { workerOutputs } from './worker-output.js';

// Most tests take their polling helper from here, beside the system they poll.
export { eventually } from './wait.js';
import { checkingAnswers } from './answer-check.js';

/** The API, in this process, on a free port, wired exactly as api/server.ts wires it. */
export interface RunningApi {
  url: string;
  deps: ApiDeps;
  close(): Promise<void>;
}

export async function startApi(overrides: Record<string, string> = {}): Promise<RunningApi> {
  const config = loadConfig(systemEnv(overrides));
  const services = createServices(config, 'api');
  await services.storage.verify();
  const stopKeepingUploads = keepUploadFolder(uploadFolder(config.storageDir), services.log);
  const temporal = await connectTemporalClient(config.temporalAddress, config.temporalNamespace);
  const deps: ApiDeps = { ...services, temporal };
  const app = createApp(deps);
  // Every answer is checked against the document the app serves (a mismatch fails the test).
  const server = http.createServer(checkingAnswers(app, app.locals.openapi)).listen(0, '127.0.0.1');
  keepClientConnections(server, config.httpKeepAliveMs);
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    deps,
    async close() {
      stopKeepingUploads();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await services.db.$disconnect();
      await temporal.connection.close();
    },
  };
}

/** A worker as a separate OS process, so a test can kill it the way a crash would. */
export interface RunningWorker {
  child: ChildProcess;
  output: string[];
  kill(signal?: NodeJS.Signals): Promise<void>;
}

const workers = new Set<ChildProcess>();
process.once('exit', () => {
  for (const w of workers) w.kill('SIGKILL');
});

/**
 * `nodeArgs` go to node itself (e.g. `--cpu-prof`, which NODE_OPTIONS does not take). The worker's
 * STORAGE_DIR is a scratch folder of its own: it shares nothing with the API but the object store.
 */
export async function startWorker(overrides: Record<string, string> = {}, nodeArgs: string[] = []): Promise<RunningWorker> {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', 'workers/main.ts'], {
    cwd: repoRoot,
    env: { ...process.env, ...systemEnv({ LOG_LEVEL: 'info', STORAGE_DIR: path.join(testStack().workDir, 'worker-scratch'), ...overrides }) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  workers.add(child);
  const output: string[] = [];
  workerOutputs.set(child, output);
  const exited = new Promise<void>((resolve) => child.once('exit', () => (workers.delete(child), workerOutputs.delete(child), resolve())));
  child.stderr!.on('data', (d) => output.push(String(d)));
  await new Promise<void>((resolve, reject) => {
    const lines = readline.createInterface({ input: child.stdout! });
    const timer = setTimeout(() => reject(new Error(`worker did not start:\n${output.join('')}`)), 60_000);
    lines.on('line', (line) => {
      output.push(line);
      if (line.includes('"worker started"')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`worker exited with ${code}:\n${output.join('\n')}`));
    });
  });
  return {
    child,
    output,
    async kill(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      await exited;
    },
  };
}

/** A small HTTP client for the tests: JSON or form bodies, an optional X-API-Key. */
export interface Call {
  key?: string | null;
  json?: unknown;
  form?: Record<string, string | { name: string; content: string | Buffer; type?: string } | undefined>;
  rawBody?: { body: string | Buffer; contentType: string };
  headers?: Record<string, string>;
}

export interface HttpResult<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

export function client(baseUrl: string) {
  return async function call<T = any>(method: string, urlPath: string, c: Call = {}): Promise<HttpResult<T>> {
    const headers: Record<string, string> = { ...(c.headers ?? {}) };
    if (c.key) headers['X-API-Key'] = c.key;
    let body: BodyInit | undefined;
    if (c.json !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(c.json);
    } else if (c.form) {
      const fd = new FormData();
      for (const [k, v] of Object.entries(c.form)) {
        if (v === undefined) continue;
        if (typeof v === 'string') fd.append(k, v);
        else fd.append(k, new Blob([typeof v.content === "string" ? v.content : new Uint8Array(v.content)], { type: v.type ?? 'application/octet-stream' }), v.name);
      }
      body = fd;
    } else if (c.rawBody) {
      headers['Content-Type'] = c.rawBody.contentType;
      body = typeof c.rawBody.body === "string" ? c.rawBody.body : new Uint8Array(c.rawBody.body);
    }
    const res = await fetch(baseUrl + urlPath, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      /* not JSON: the raw text is the body */
    }
    return { status: res.status, body: parsed as T, headers: res.headers };
  };
}

/**
 * Registers before/after hooks that run the API in-process and one worker process for a describe
 * block, both with `env` over the test stack's settings; the returned object is filled in by the
 * time the tests run. A test may replace `worker`, or start it itself (`worker: false`); the after
 * hook stops whichever worker is there then.
 */
export function useRunningSystem(options: { env?: Record<string, string>; worker?: boolean } = {}) {
  const system = {} as { api: RunningApi; http: ReturnType<typeof client>; worker: RunningWorker };
  before(async () => {
    system.api = await startApi(options.env);
    system.http = client(system.api.url);
    if (options.worker !== false) system.worker = await startWorker(options.env);
  });
  after(async () => {
    await system.worker?.kill();
    await system.api?.close();
  });
  return system;
}

/**
 * A database and a task queue of the test's own (migrated), for a system whose workers must see
 * no other test's work (a different embedding profile, a broken service): `env` goes over the
 * stack's settings of its API and workers; `drop` removes the database afterwards.
 */
export async function isolatedSystemEnv(name: string): Promise<{ env: Record<string, string>; drop(): Promise<void> }> {
  // dwb_test_<pid>_<name>: a later run drops it if this one is killed before its `drop`.
  const databaseUrl = `${testStack().databaseUrl}_${name}`;
  await dropDatabase(databaseUrl);
  await ensureDatabase(databaseUrl);
  await migrate(databaseUrl);
  return { env: { DATABASE_URL: databaseUrl, TEMPORAL_TASK_QUEUE: `${name}-${process.pid}` }, drop: () => dropDatabase(databaseUrl) };
}
