import { spawn, execFile, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import pg from 'pg';
import { searchAttributeDeclarations } from '../lib/contracts/search-attributes.js';
import { setting } from '../lib/platform/config.js';

/**
 * Starts and stops the servers the system runs on: the Temporal dev server, Weaviate and the S3
 * object store (binaries built by scripts/build-tools.sh) and the machine's PostgreSQL. Used by
 * `scripts/start` and by the test suite's global setup, so that both run the same real infrastructure.
 */
const run = promisify(execFile);
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const toolsDir = setting(process.env, 'DWB_TOOLS_DIR');
/**
 * Node's arguments for one of our entry points. The API runs with a young generation of 64 MB
 * semi-spaces (V8's default is 16 MB): 200 streams in flight keep so much young data alive that
 * with the default each scavenge copied ~14 ms of it and promoted the rest into a ~160 MB old space
 * that full collections then marked (--trace-gc). Side by side in bench:messaging at 200 streams,
 * the flag took the added time to first token from 63 / 105 to 48 / 75 ms (p50 / p99). The
 * Dockerfile and docker-compose.temporal.yml give the same flags (test/deploy/compose.test.ts).
 */
const apiNodeFlags = ['--max-semi-space-size=64'] as const;
export function nodeArgs(script: string): string[] {
  return [...(script === 'api/server.ts' ? apiNodeFlags : []), '--import', 'tsx', script];
}

export const binaries = {
  temporal: path.join(toolsDir, 'temporal-v1.5.1', 'temporal'),
  weaviate: path.join(toolsDir, 'weaviate-v1.39.0', 'weaviate-server'),
  // Versity's S3 gateway (Apache-2.0): the S3-compatible object store of the tests and the cluster profile.
  versitygw: path.join(toolsDir, 'versitygw-v1.8.0', 'versitygw'),
  // The cluster profile's Temporal (scripts/temporal-server.ts): the server, its schema tool and Web UI.
  temporalServer: path.join(toolsDir, 'temporal-server-v1.29.1', 'server'),
  temporalSqlTool: path.join(toolsDir, 'temporal-sql-tool-v1.29.1', 'sql'),
  temporalUi: path.join(toolsDir, 'temporal-ui-v2.42.1', 'server'),
  // A newer Temporal server whose workflows can skip time: the tests' time-skipping environment (test/support/time-skipping.ts).
  temporalTimeSkipping: path.join(toolsDir, 'temporal-server-v1.32.1', 'server'),
};

export interface ManagedProcess {
  name: string;
  child: ChildProcess;
  logFile: string;
  /** What this run of the process wrote to its log (the file is appended to across runs). */
  runLog(): string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Whether a listener could bind the port now: false when a server, or a connection's local end, holds it. */
export async function canListen(port: number, protocol: 'tcp' | 'udp' = 'tcp'): Promise<boolean> {
  return new Promise((resolve) => {
    if (protocol === 'udp') {
      const socket = dgram.createSocket('udp4');
      socket.once('error', () => resolve(false));
      socket.bind(port, '127.0.0.1', () => socket.close(() => resolve(true)));
      return;
    }
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** A free port whose UDP twin is free too (gossip listens on both). */
async function freeTcpUdpPort(): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (await canListen(port, 'udp')) return port;
  }
}

/**
 * Two consecutive free ports: Weaviate reaches a peer's internal RPC at its raft port + 1. The
 * second is tested by binding it: an outgoing connection may hold it as its local end, which a
 * connect test would not see (Linux hands even ports to connections, and port + 1 of the odd one
 * `listen(0)` gives is even).
 */
export async function freePortPair(): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (port < 65535 && (await canListen(port + 1))) return port;
  }
}

export async function portOpen(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host });
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

/**
 * Thrown when a server ends before it answers. `log` is all its run wrote; the message quotes the
 * lines that say why (errors, the panic) and the last lines, since a Go server that fails on a
 * taken port may log the error and then panic with a stack trace far longer than a tail.
 */
export class ExitedBeforeReadyError extends Error {
  constructor(
    what: string,
    readonly code: number | null,
    readonly log: string,
  ) {
    const why = reasonLines(log);
    super(`${what} exited with code ${code} before it was ready${why ? `; the end of its log:\n${why}` : ''}`);
  }
}

export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number, proc?: ManagedProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (proc && proc.child.exitCode !== null) throw new ExitedBeforeReadyError(what, proc.child.exitCode, proc.runLog());
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${what} was not ready within ${timeoutMs / 1000} s`);
}

const errorLine = /level=(?:error|fatal)|"level":"(?:error|fatal)"|^panic:|^fatal error:/i;

/** The error lines of a log (at most five), then its last lines. */
function reasonLines(log: string, lastLines = 20): string {
  const lines = log.trimEnd().split('\n');
  const tailStart = Math.max(0, lines.length - lastLines);
  const errors = lines.slice(0, tailStart).filter((line) => errorLine.test(line)).slice(0, 5);
  return [...errors, ...(errors.length ? ['...'] : []), ...lines.slice(tailStart)].join('\n');
}

/** What a log file holds from `offset` on, its last 256 KiB at most; '' when it cannot be read. */
function readLogFrom(logFile: string, offset: number): string {
  try {
    const size = fs.statSync(logFile).size;
    const start = Math.max(offset, size - 262_144);
    if (size <= start) return '';
    const fd = fs.openSync(logFile, 'r');
    try {
      const buffer = Buffer.alloc(size - start);
      fs.readSync(fd, buffer, 0, buffer.length, start);
      return buffer.toString('utf8');
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return '';
  }
}

/**
 * Ports picked free are free when picked, not always when a server binds them a moment later:
 * another process (the Temporal dev server picks its internal ports the same way, at the same time
 * in the tests) or a connection's local end may take one in between. The server then exits at once
 * saying so in its log, and `launch` runs again (three tries in all) when `mayStartAgain` agrees.
 */
export async function startAgainOnTakenPort<T>(launch: (attempt: number) => Promise<T>, mayStartAgain: (log: string) => boolean): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await launch(attempt);
    } catch (err) {
      const portTaken = err instanceof ExitedBeforeReadyError && /address already in use/.test(err.log) && mayStartAgain(err.log);
      if (!portTaken || attempt === 3) throw err;
    }
  }
}

const running = new Set<ChildProcess>();
// A process that exits without stopping its servers (an interrupted test run, an uncaught error)
// must not leave them running on the machine.
process.once('exit', () => {
  for (const child of running) child.kill('SIGTERM');
});

/** Spawns a long-running process with its output in a log file; stop() ends it and waits. */
export function manage(name: string, command: string, args: string[], options: { env?: NodeJS.ProcessEnv; logFile: string; cwd?: string }): ManagedProcess {
  fs.mkdirSync(path.dirname(options.logFile), { recursive: true });
  const out = fs.openSync(options.logFile, 'a');
  const logOffset = fs.fstatSync(out).size;
  const child = spawn(command, args, { env: options.env ?? process.env, cwd: options.cwd ?? repoRoot, stdio: ['ignore', out, out] });
  fs.closeSync(out);
  running.add(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => (running.delete(child), resolve())));
  return {
    name,
    child,
    logFile: options.logFile,
    runLog: () => readLogFrom(options.logFile, logOffset),
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

// ---------------------------------------------------------------- PostgreSQL

/** Makes sure the server answers (starting the machine's cluster if it is local and down) and the database exists. */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const dbName = decodeURIComponent(url.pathname.slice(1));
  const adminUrl = new URL(databaseUrl);
  adminUrl.pathname = '/postgres';
  const connect = async () => {
    const client = new pg.Client({ connectionString: adminUrl.toString() });
    await client.connect();
    return client;
  };
  let client: pg.Client;
  try {
    client = await connect();
  } catch (err) {
    if (!['127.0.0.1', 'localhost', '::1'].includes(url.hostname)) throw err;
    const versions = fs.existsSync('/etc/postgresql') ? fs.readdirSync('/etc/postgresql') : [];
    if (!versions.length) throw new Error(`PostgreSQL at ${url.host} is not reachable and no local cluster is installed`, { cause: err });
    await run('pg_ctlcluster', ['--skip-systemctl-redirect', versions[0]!, 'main', 'start']).catch(() => undefined);
    await waitFor('PostgreSQL', async () => ((await connect()).end(), true), 30_000);
    client = await connect();
  }
  try {
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [dbName]);
    if (exists.rowCount === 0) await client.query(`CREATE DATABASE "${dbName.replace(/"/g, '""')}"`);
  } finally {
    await client.end();
  }
}

export async function dropDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const dbName = decodeURIComponent(url.pathname.slice(1));
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS "${dbName.replace(/"/g, '""')}" WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

/** Applies pending migrations with the ordinary Prisma command (offline, see scripts/prisma.sh). */
export async function migrate(databaseUrl: string): Promise<void> {
  await run(path.join(repoRoot, 'scripts/prisma.sh'), ['migrate', 'deploy'], { env: { ...process.env, DATABASE_URL: databaseUrl }, cwd: repoRoot });
}

// ---------------------------------------------------------------- Temporal

export interface TemporalOptions {
  port: number;
  /** Web UI port; null runs the server headless. */
  uiPort: number | null;
  dbFile: string | null;
  logFile: string;
}

export async function startTemporal(o: TemporalOptions): Promise<ManagedProcess> {
  if (!fs.existsSync(binaries.temporal)) throw new Error(`${binaries.temporal} is missing: run scripts/build-tools.sh`);
  const proc = await launchTemporalRetryingPorts(o);
  if (!o.dbFile) return proc;
  const statements = await visibilityIndexChanges(o.port, o.dbFile);
  if (!statements.length) return proc;
  // SQLite DDL takes the file's write lock, which the running server's writes would then wait on or
  // fail on: the indexes change while it is stopped (on a new file, or after a search attribute
  // was added), and it starts again on the changed file.
  await proc.stop();
  await sqlite([o.dbFile, `BEGIN; ${statements.join('; ')}; COMMIT;`]);
  return launchTemporalRetryingPorts(o);
}

/**
 * The dev server picks free ports of its own (HTTP API, metrics, its history, matching and worker
 * services), free when picked but not always when it binds them (see startAgainOnTakenPort). Its
 * own ports (`--port`, `--ui-port`) are the caller's: one of those taken is reported as it is.
 */
function launchTemporalRetryingPorts(o: TemporalOptions): Promise<ManagedProcess> {
  const callersPorts = [o.port, o.uiPort].filter((p) => p !== null);
  return startAgainOnTakenPort(
    () => launchTemporal(o),
    (log) => !callersPorts.some((p) => log.includes(`:${p}: bind`)),
  );
}

async function launchTemporal(o: TemporalOptions): Promise<ManagedProcess> {
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(o.port), '--log-level', 'warn'];
  if (o.uiPort === null) args.push('--headless');
  else args.push('--ui-port', String(o.uiPort));
  if (o.dbFile) {
    fs.mkdirSync(path.dirname(o.dbFile), { recursive: true });
    args.push('--db-filename', o.dbFile);
    // WAL instead of SQLite's rollback journal, fsynced at checkpoints instead of at every commit:
    // server CPU per workflow start 9.4 -> 5.2 ms (-45 %), starts/s ~70 -> ~170 (3000 document
    // starts from 32 callers, 2 shared cores, medians of 6 interleaved runs). What the server
    // committed survives its crash or SIGKILL as before (the WAL is in the file system; tested:
    // 400 of 400 starts after a SIGKILL); only a power loss or OS crash may drop its last commits
    // (the file stays consistent; a document whose start was lost is started again by the
    // reconciler). journal_mode sticks to the file; temporal.db-wal and -shm sit next to it.
    args.push('--sqlite-pragma', 'journal_mode=wal', '--sqlite-pragma', 'synchronous=normal');
  }
  // `start-dev` turns this on so that a search attribute created at run time is seen at once; it
  // then reads the cluster metadata and the namespace from SQLite on every search attribute
  // lookup (several per workflow start). Ours are all declared here, before the server starts,
  // so the cached copies are never stale: server CPU per start -18 % in memory (the tests:
  // 3.9 -> 3.3 ms) and -9 % on top of the pragmas with a file (5.2 -> 4.7 ms).
  args.push('--dynamic-config-value', 'system.forceSearchAttributesCacheRefreshOnRead=false');
  // One partition per task queue instead of four: a task added to a partition no worker polls at
  // that moment is forwarded to the root partition, and a poll is too; on one server with our
  // handful of workers the partitions add that work and no throughput. Server CPU per workflow
  // start -6 % (3,000 starts from 32 callers, interleaved runs).
  args.push('--dynamic-config-value', 'matching.numTaskqueueReadPartitions=1', '--dynamic-config-value', 'matching.numTaskqueueWritePartitions=1');
  // The history service keeps every workflow it touched in the last hour in memory, up to 128,000,
  // so a server that starts documents steadily grows its live heap with them, and each garbage
  // collection marks all of it. 4,096 is far more than the workflows the workers advance at once;
  // one that was evicted is read back from the database at its next event. After ~11,000 starts at
  // 300-400 a second (GODEBUG=gctrace=1): live heap 117-145 -> 83-98 MB, CPU per collection
  // ~190 -> ~110 ms (bench/RESULTS.md); over a day of work the cap is what bounds the heap.
  args.push('--dynamic-config-value', 'history.hostLevelCacheMaxSize=4096');
  // A history queue deletes the tasks it has completed at its checkpoint, by default every 30 s:
  // at 300 starts a second, one DELETE of ~9,000 transfer and one of ~9,000 visibility tasks on the
  // server's single SQLite connection, which every start then waits behind (the slowest second of a
  // logged paced run came at one), over tables holding up to 35 s of tasks. Every second instead:
  // small deletes, short tables (134 tasks held instead of 4,898 at 100 starts a second), and fewer
  // tasks done again after a crash. p99 of 70 s of paced starts 60 instead of 76 ms (medians of interleaved runs;
  // CPU per start within the noise; bench/RESULTS.md).
  for (const queue of ['transfer', 'visibility']) args.push('--dynamic-config-value', `history.${queue}ProcessorUpdateAckInterval="1s"`);
  for (const sa of searchAttributeDeclarations) args.push('--search-attribute', sa);
  // Go's collector runs when the heap has grown by GOGC % since the last one: at 200 instead of
  // 100 it runs half as often, for server CPU per workflow start -9 % and peak memory about 400 ->
  // 500 MB over 6,000 starts (400 gave -12 % for 690 MB). An operator's own GOGC wins.
  const env = { ...process.env, GOGC: process.env.GOGC ?? '200' };
  const proc = manage('temporal', binaries.temporal, args, { logFile: o.logFile, env });
  await waitFor(
    'Temporal server',
    async () => {
      const { stdout } = await run(binaries.temporal, ['operator', 'cluster', 'health', '--address', `127.0.0.1:${o.port}`]);
      return /SERVING/.test(stdout);
    },
    90_000,
    proc,
  );
  return proc;
}

/**
 * The dev server's visibility table (what `temporal workflow list` and the Web UI's list read)
 * comes with 46 secondary indexes: one for every built-in attribute and every column a custom
 * search attribute may be given (Keyword01-10, Int01-03, ...), each kept up to date on every
 * workflow start and every search attribute upsert. Its insert was 31 % of the server's CPU per
 * workflow start (perf, 3,000 starts). Kept: the default order and the built-in filters the
 * operator queries of docs/operations.md use (WorkflowId, WorkflowType, ExecutionStatus), and one
 * index per custom search attribute of ours, on the column the server gave it (the namespace's
 * aliases). Any other filter still answers, from a scan instead of an index. Server CPU per
 * workflow start 3.2 -> 2.4 ms, starts a second ~350 -> ~515 (3,000 starts from 32 callers,
 * interleaved runs).
 */
const keptBuiltInVisibilityIndexes = new Set(['default_idx', 'by_workflow_id', 'by_workflow_type', 'by_status']);
const visibilityOrder = `(COALESCE(close_time, '9999-12-31 23:59:59+00:00')) DESC, start_time DESC, run_id`;

/** The name the server's schema gives the index of a search attribute column: by_keyword_05 for Keyword05. */
export function visibilityIndexName(column: string): string {
  const [, type, number] = /^([a-z]+)(\d{2})$/i.exec(column) ?? [];
  if (!type || !number) throw new Error(`not a search attribute column: ${column}`);
  return `by_${type.toLowerCase()}_${number}`;
}

/** The statements that bring the visibility table's indexes to the set above; none when it has them already. */
async function visibilityIndexChanges(port: number, dbFile: string): Promise<string[]> {
  const { stdout } = await run(binaries.temporal, ['operator', 'namespace', 'describe', '--namespace', 'default', '--address', `127.0.0.1:${port}`, '--output', 'json']);
  const aliases = (JSON.parse(stdout) as { config?: { customSearchAttributeAliases?: Record<string, string> } }).config?.customSearchAttributeAliases ?? {};
  const ours = new Set(searchAttributeDeclarations.map((d) => d.split('=')[0]));
  const wanted = new Map(
    Object.entries(aliases)
      .filter(([, alias]) => ours.has(alias))
      .map(([column]) => [visibilityIndexName(column), column]),
  );
  const existing = (await sqlite(['-readonly', dbFile, "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'executions_visibility' AND sql IS NOT NULL"])).split('\n').filter(Boolean);
  const drops = existing.filter((name) => !keptBuiltInVisibilityIndexes.has(name) && !wanted.has(name)).map((name) => `DROP INDEX "${name}"`);
  const creates = [...wanted]
    .filter(([name]) => !existing.includes(name))
    .map(([name, column]) => `CREATE INDEX "${name}" ON executions_visibility (namespace_id, "${column}", ${visibilityOrder})`);
  return [...drops, ...creates];
}

/** The sqlite3 shell's output (scripts/dev-packages.txt). */
async function sqlite(args: string[]): Promise<string> {
  try {
    return (await run('sqlite3', args)).stdout;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new Error('sqlite3 is missing: run scripts/setup.sh (scripts/dev-packages.txt)', { cause: err });
    throw err;
  }
}

// ---------------------------------------------------------------- Weaviate

export interface WeaviatePorts {
  http: number;
  grpc: number;
  gossip: number;
  data: number;
  /** Raft's own; its internal RPC listens on the next one. */
  raft: number;
}

export interface WeaviateOptions {
  dataDir: string;
  logFile: string;
  /** Free ones are picked when omitted. */
  ports?: WeaviatePorts;
  /** A node of a cluster (scripts/cluster.ts); omitted: a single-node cluster of its own. */
  cluster?: WeaviateClusterNode;
  /** Settings on top of the ones every node gets (e.g. a cluster's replication defaults). */
  extraEnv?: Record<string, string>;
}

/** One node of a Weaviate cluster on this machine: its name, and where it finds the others. */
export interface WeaviateClusterNode {
  name: string;
  /** Gossip address (host:port) of a node already up; none for the first. */
  join: string[];
  /** Every node's name and raft port (name:port), so that each finds the others' raft and internal RPC ports. */
  raftJoin: string[];
}

export interface WeaviateProcess extends ManagedProcess {
  url: string;
}

export async function startWeaviate(o: WeaviateOptions): Promise<WeaviateProcess> {
  if (!fs.existsSync(binaries.weaviate)) throw new Error(`${binaries.weaviate} is missing: run scripts/build-tools.sh`);
  if (o.ports) return launchWeaviate(o, o.ports);
  // Started again on other ports after a taken one, and on an empty data directory: a half-made
  // raft store would name the old ones (so only a directory this call found empty is emptied).
  const fresh = !fs.existsSync(o.dataDir) || fs.readdirSync(o.dataDir).length === 0;
  return startAgainOnTakenPort(
    async (attempt) => {
      if (attempt > 1) fs.rmSync(o.dataDir, { recursive: true, force: true });
      return launchWeaviate(o, { http: await freePort(), grpc: await freePort(), gossip: await freeTcpUdpPort(), data: await freePort(), raft: await freePortPair() });
    },
    () => fresh,
  );
}

async function launchWeaviate(o: WeaviateOptions, p: WeaviatePorts): Promise<WeaviateProcess> {
  fs.mkdirSync(o.dataDir, { recursive: true });
  const env = {
    ...process.env,
    PERSISTENCE_DATA_PATH: o.dataDir,
    AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED: 'true',
    DEFAULT_VECTORIZER_MODULE: 'none',
    ENABLE_MODULES: '',
    CLUSTER_HOSTNAME: o.cluster?.name ?? 'node1',
    CLUSTER_IN_LOCALHOST: 'true',
    // Without these the node advertises the host's first non-loopback address and its single-node
    // raft cluster never elects a leader on hosts whose other interfaces are closed.
    CLUSTER_ADVERTISE_ADDR: '127.0.0.1',
    CLUSTER_BIND_ADDR: '127.0.0.1',
    CLUSTER_GOSSIP_BIND_PORT: String(p.gossip),
    CLUSTER_DATA_BIND_PORT: String(p.data),
    RAFT_PORT: String(p.raft),
    RAFT_INTERNAL_RPC_PORT: String(p.raft + 1),
    RAFT_BOOTSTRAP_EXPECT: String(o.cluster?.raftJoin.length ?? 1),
    ...(o.cluster ? { RAFT_JOIN: o.cluster.raftJoin.join(','), ...(o.cluster.join.length ? { CLUSTER_JOIN: o.cluster.join.join(',') } : {}) } : {}),
    GRPC_PORT: String(p.grpc),
    GO_PROFILING_DISABLE: 'true',
    DISABLE_TELEMETRY: 'true',
    API_BASED_MODULES_DISABLED: 'true',
    // Crash safety: vectors pass through an on-disk queue that is replayed after a crash. With
    // synchronous indexing a killed server loses HNSW entries written since its last flush.
    ASYNC_INDEXING: 'true',
    LOG_LEVEL: 'warning',
    QUERY_DEFAULTS_LIMIT: '25',
    ...o.extraEnv,
  };
  const proc = manage(o.cluster ? `weaviate-${o.cluster.name}` : 'weaviate', binaries.weaviate, ['--host', '127.0.0.1', '--port', String(p.http), '--scheme', 'http'], { env, logFile: o.logFile });
  const url = `http://127.0.0.1:${p.http}`;
  await waitFor('Weaviate', async () => (await fetch(`${url}/v1/.well-known/ready`)).status === 200, 120_000, proc);
  return { ...proc, url };
}

// ---------------------------------------------------------------- Object store (S3)

export interface ObjectStoreOptions {
  /** The objects, a folder per bucket; their metadata in extended attributes, or in `<dataDir>.meta` where the file system has none. */
  dataDir: string;
  logFile: string;
  /** A free one is picked when omitted. */
  port?: number;
  /** The root account's access key and secret (what the system's AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY must be). */
  accessKey: string;
  secretKey: string;
  /** Created once the server answers; one that exists is kept. */
  bucket: string;
}

export interface ObjectStoreProcess extends ManagedProcess {
  /** What S3_ENDPOINT must be (path-style requests). */
  endpoint: string;
}

/** Versity's S3 gateway on its posix back end: a real S3 server on one directory. */
export async function startObjectStore(o: ObjectStoreOptions): Promise<ObjectStoreProcess> {
  if (!fs.existsSync(binaries.versitygw)) throw new Error(`${binaries.versitygw} is missing: run scripts/build-tools.sh`);
  const store = o.port ? await launchObjectStore(o, o.port) : await startAgainOnTakenPort(async () => launchObjectStore(o, await freePort()), () => true);
  const client = new S3Client({ endpoint: store.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: o.accessKey, secretAccessKey: o.secretKey } });
  try {
    await client.send(new CreateBucketCommand({ Bucket: o.bucket }));
  } catch (err) {
    if ((err as Error).name !== 'BucketAlreadyOwnedByYou') {
      await store.stop();
      throw err;
    }
  } finally {
    client.destroy();
  }
  return store;
}

async function launchObjectStore(o: ObjectStoreOptions, port: number): Promise<ObjectStoreProcess> {
  fs.mkdirSync(o.dataDir, { recursive: true });
  // The gateway keeps metadata (ETags, content types) in extended attributes, and refuses to start
  // on a file system without them: then, and from then on, in a sidecar folder.
  const sidecar = `${o.dataDir}.meta`;
  const metadata = fs.existsSync(sidecar) ? ['--sidecar', sidecar] : [];
  // Its own settings come from flags and the credentials from its environment (not on the command
  // line, where `ps` shows them); none of this process's VGW_* variables reach it.
  const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(?:VGW_|ROOT_)|^(?:LOGFILE|WEBHOOK)$/.test(name)));
  Object.assign(env, { ROOT_ACCESS_KEY_ID: o.accessKey, ROOT_SECRET_ACCESS_KEY: o.secretKey });
  const proc = manage('versitygw', binaries.versitygw, ['--port', `127.0.0.1:${port}`, '--quiet', '--health', '/health', 'posix', ...metadata, o.dataDir], { env, logFile: o.logFile });
  const endpoint = `http://127.0.0.1:${port}`;
  try {
    await waitFor('the object store (versitygw)', async () => (await fetch(`${endpoint}/health`)).status === 200, 60_000, proc);
  } catch (err) {
    if (metadata.length || !(err instanceof ExitedBeforeReadyError && /xattr check failed/.test(err.log))) throw err;
    fs.mkdirSync(sidecar, { recursive: true });
    return launchObjectStore(o, port);
  }
  return { ...proc, endpoint };
}
