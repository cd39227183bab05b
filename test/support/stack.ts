import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';
import pg from 'pg';
import { binaries, dropDatabase, ensureDatabase, freePort, migrate, startObjectStore, startTemporal, startWeaviate, type ManagedProcess, type ObjectStoreProcess, type WeaviateProcess } from '../../scripts/stack.js';
import { processRunning } from '../../lib/platform/child-process.js';
import type { Needs } from './lanes.js';

/**
 * The test run's own infrastructure: a Temporal dev server, a Weaviate and an S3 object store
 * (versitygw) on free ports with throw-away state, and a fresh, migrated Postgres database. Nothing
 * is mocked. The system under test keeps every stored file in the object store.
 */
export interface TestStack {
  databaseUrl: string;
  temporalAddress: string;
  weaviateUrl: string;
  /** The object store's endpoint and root credentials; the system's files are under s3://<bucket>/<prefix>. */
  objectStore: { endpoint: string; bucket: string; prefix: string; accessKey: string; secretKey: string };
  workDir: string;
  workflowBundlePath: string;
  adminApiKey: string;
  taskQueue: string;
}

let stack: TestStack | null = null;
const processes: ManagedProcess[] = [];

export function testStack(): TestStack {
  if (!stack) throw new Error('the test stack is not running: mocha loads test/support/global.ts, which starts what the lane of the files run needs (test/support/lanes.ts)');
  return stack;
}

/** Drops databases of earlier test runs whose process is gone (a run killed before its teardown). */
async function dropStaleTestDatabases(baseUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: `${baseUrl}/postgres` });
  await client.connect();
  try {
    const { rows } = await client.query<{ datname: string }>("SELECT datname FROM pg_database WHERE datname LIKE 'dwb_test_%'");
    for (const { datname } of rows) {
      // dwb_test_<pid>, and the cluster test's dwb_test_<pid>_cluster and its Temporal databases.
      const pid = Number(/^dwb_test_(\d+)(?:_|$)/.exec(datname)?.[1]);
      if (!Number.isInteger(pid) || pid === process.pid || processRunning(pid)) continue;
      await client.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
    }
  } finally {
    await client.end();
  }
}

/**
 * Stops servers and removes work directories of earlier test runs whose process is gone: a run
 * killed outright (or crashed past its exit handlers) cannot clean up after itself.
 */
function stopStaleTestServers(): void {
  for (const entry of fs.readdirSync(os.tmpdir())) {
    if (!entry.startsWith('dwb-test-')) continue;
    const dir = path.join(os.tmpdir(), entry);
    let owner: { pid: number; servers: number[] };
    try {
      owner = JSON.parse(fs.readFileSync(path.join(dir, 'owner.json'), 'utf8'));
    } catch {
      continue;
    }
    if (processRunning(owner.pid)) continue;
    // A server that ended long ago may have left its process id to another process since.
    for (const pid of owner.servers) {
      if (!isOneOfOurServers(pid)) continue;
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        /* gone since */
      }
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function isOneOfOurServers(pid: number): boolean {
  try {
    const [executable, ...args] = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    if (Object.values(binaries).includes(executable!) || executable === 'haproxy') return true;
    // The cluster test's API and worker processes.
    return executable === process.execPath && args.some((a) => a === 'api/server.ts' || a === 'workers/main.ts');
  } catch {
    return false;
  }
}

/** Servers a test started on its own (the cluster test), stopped by a later run if this one is killed before it can. */
export function registerTestServers(pids: number[]): void {
  const file = path.join(testStack().workDir, 'owner.json');
  const owner = JSON.parse(fs.readFileSync(file, 'utf8')) as { pid: number; servers: number[] };
  owner.servers.push(...pids);
  fs.writeFileSync(file, JSON.stringify(owner));
}

/**
 * Starts what a lane needs (test/support/lanes.ts): always a fresh, migrated database and a work
 * directory; with 'servers', Temporal, Weaviate, the object store and the workflow bundle too.
 */
export async function startTestStack(needs: Exclude<Needs, 'nothing'> = 'servers'): Promise<TestStack> {
  stopStaleTestServers();
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dwb-test-'));
  const baseUrl = process.env.TEST_DATABASE_BASE_URL ?? 'postgresql://postgres@127.0.0.1:5432';
  const databaseUrl = `${baseUrl}/dwb_test_${process.pid}`;
  const servers = needs === 'servers';
  const temporalPort = servers ? await freePort() : 0;
  const objectStore = { bucket: 'dwb-test', prefix: 'files', accessKey: 'dwb-test-access', secretKey: `dwb-test-secret-${process.pid}` };

  const started = await Promise.allSettled([
    // A file, as scripts/start runs it (WAL, the trimmed visibility indexes of scripts/stack.ts).
    servers ? startTemporal({ port: temporalPort, uiPort: null, dbFile: path.join(workDir, 'temporal', 'temporal.db'), logFile: path.join(workDir, 'temporal.log') }) : null,
    servers ? startWeaviate({ dataDir: path.join(workDir, 'weaviate'), logFile: path.join(workDir, 'weaviate.log') }) : null,
    servers ? startObjectStore({ bucket: objectStore.bucket, accessKey: objectStore.accessKey, secretKey: objectStore.secretKey, dataDir: path.join(workDir, 'object-store'), logFile: path.join(workDir, 'object-store.log') }) : null,
    servers ? bundleWorkflowCode({ workflowsPath: fileURLToPath(new URL('../../workflows/index.ts', import.meta.url)), logger: quietLogger }) : null,
    (async () => {
      await ensureDatabase(databaseUrl);
      await dropStaleTestDatabases(baseUrl);
      await dropDatabase(databaseUrl);
      await ensureDatabase(databaseUrl);
      await migrate(databaseUrl);
    })(),
  ] as const);
  for (const r of started.slice(0, 3)) if (r.status === 'fulfilled' && r.value) processes.push(r.value as ManagedProcess);
  const failed = started.find((r) => r.status === 'rejected');
  if (failed) {
    await Promise.all(processes.map((p) => p.stop()));
    throw (failed as PromiseRejectedResult).reason;
  }
  fs.writeFileSync(path.join(workDir, 'owner.json'), JSON.stringify({ pid: process.pid, servers: processes.map((p) => p.child.pid) }));

  const base = { databaseUrl, workDir, adminApiKey: 'test-admin-key-0123456789abcdef', taskQueue: 'knowledge-test' };
  if (servers) {
    const bundle = (started[3] as PromiseFulfilledResult<{ code: string }>).value!;
    const workflowBundlePath = path.join(workDir, 'workflow-bundle.js');
    fs.writeFileSync(workflowBundlePath, bundle.code);
    stack = {
      ...base,
      temporalAddress: `127.0.0.1:${temporalPort}`,
      weaviateUrl: (started[1] as PromiseFulfilledResult<WeaviateProcess>).value.url,
      objectStore: { ...objectStore, endpoint: (started[2] as PromiseFulfilledResult<ObjectStoreProcess>).value.endpoint },
      workflowBundlePath,
    };
  } else {
    stack = withoutServers(base);
  }
  return stack;
}

/** A database-only stack: reading a server's field says which lane the file belongs in instead. */
function withoutServers(base: Omit<TestStack, ServerField>): TestStack {
  const fields: ServerField[] = ['temporalAddress', 'weaviateUrl', 'objectStore', 'workflowBundlePath'];
  for (const field of fields) {
    Object.defineProperty(base, field, {
      get() {
        throw new Error(`testStack().${field}: this run started only a database; list the test file in a lane that needs 'servers' (test/support/lanes.ts)`);
      },
    });
  }
  return base as TestStack;
}

type ServerField = 'temporalAddress' | 'weaviateUrl' | 'objectStore' | 'workflowBundlePath';

export async function stopTestStack(): Promise<void> {
  await Promise.all(processes.splice(0).map((p) => p.stop()));
  if (stack) {
    await dropDatabase(stack.databaseUrl).catch(() => undefined);
    fs.rmSync(stack.workDir, { recursive: true, force: true });
  }
  stack = null;
}

const quietLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: (message: string, meta?: unknown) => console.error(message, meta),
};

/** Environment for processes of the system under test (API, worker) pointed at the test stack. */
export function systemEnv(overrides: Record<string, string> = {}): Record<string, string> {
  const s = testStack();
  return {
    DATABASE_URL: s.databaseUrl,
    TEMPORAL_ADDRESS: s.temporalAddress,
    TEMPORAL_NAMESPACE: 'default',
    TEMPORAL_TASK_QUEUE: s.taskQueue,
    WEAVIATE_URL: s.weaviateUrl,
    ADMIN_API_KEY: s.adminApiKey,
    // Stored files in the object store, so that every test proves its path goes through it; the
    // directory is only the API's scratch for uploads in flight.
    STORAGE_URL: `s3://${s.objectStore.bucket}/${s.objectStore.prefix}`,
    S3_ENDPOINT: s.objectStore.endpoint,
    AWS_ACCESS_KEY_ID: s.objectStore.accessKey,
    AWS_SECRET_ACCESS_KEY: s.objectStore.secretKey,
    STORAGE_DIR: path.join(s.workDir, 'storage'),
    WORKFLOW_BUNDLE_PATH: s.workflowBundlePath,
    PORT: '0',
    LOG_LEVEL: 'warn',
    // Tests serve their web pages from loopback servers of their own.
    URL_FETCH_ALLOW_LOOPBACK: 'true',
    // One reconciler per Temporal namespace would sweep every test's rows onto its own task queue:
    // the tests of the reconciler turn it on for their worker.
    RECONCILE_INTERVAL_SECONDS: '0',
    ...overrides,
  };
}
