import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig, setting } from '../lib/platform/config.js';
import { redactSecrets, redactUrl } from '../lib/platform/redact.js';
import { binaries, ensureDatabase, manage, migrate, nodeArgs, portOpen, repoRoot, startTemporal, startWeaviate, waitFor, type ManagedProcess } from './stack.js';
import { defaultClusterPorts, objectStoreCredentials, startCluster } from './cluster.js';

/**
 * `scripts/start`: the whole system on its embedded defaults. Starts the Temporal dev server (with
 * its Web UI) and Weaviate unless TEMPORAL_ADDRESS / WEAVIATE_URL name external ones, prepares and
 * migrates the database, then runs the API and one worker. Their state lives in .data/, so work in
 * flight survives a restart. Ctrl-C stops everything this command started. `--cluster` starts the
 * cluster profile instead (scripts/cluster.ts).
 */
const dataDir = path.join(repoRoot, '.data');
fs.mkdirSync(dataDir, { recursive: true });
const started: ManagedProcess[] = [];
const say = (line: string) => process.stdout.write(`[start] ${line}\n`);

function adminKey(): string {
  if (process.env.ADMIN_API_KEY) return process.env.ADMIN_API_KEY;
  const file = path.join(dataDir, 'admin-api-key');
  if (!fs.existsSync(file)) fs.writeFileSync(file, `adm_${crypto.randomBytes(24).toString('base64url')}\n`, { mode: 0o600 });
  return fs.readFileSync(file, 'utf8').trim();
}

const env: Record<string, string> = {
  ...(process.env as Record<string, string>),
  ADMIN_API_KEY: adminKey(),
  STORAGE_DIR: process.env.STORAGE_DIR ?? path.join(dataDir, 'storage'),
};
const config = loadConfig(env);
const stopAll = async () => {
  for (const p of [...started].reverse()) await p.stop();
};

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, async () => {
    if (stopping) return;
    stopping = true;
    say('stopping...');
    await stopAll();
    say('stopped');
    process.exit(0);
  });
}

const clusterProfile = process.argv.includes('--cluster');
const unknown = process.argv.slice(2).filter((a) => a !== '--cluster');
if (unknown.length) {
  say(`unknown argument ${unknown[0]}: scripts/start [--cluster]`);
  process.exit(2);
}

/**
 * `scripts/start --cluster`: what a multi-host deployment runs, on this machine (scripts/cluster.ts),
 * with its state in .data/cluster/ and its own databases (dwb_cluster and the Temporal server's two).
 */
async function startClusterProfile(): Promise<void> {
  const clusterDir = path.join(dataDir, 'cluster');
  const ports = defaultClusterPorts(config.port);
  const busy = [];
  for (const port of [ports.api, ...ports.apiReplicas, ports.temporal, ports.temporalUi, ports.weaviate, ...ports.weaviateNodes.map((n) => n.http), ports.s3]) if (await portOpen(port)) busy.push(port);
  if (busy.length) {
    say(`something already answers on port(s) ${busy.join(', ')}: is a profile already running? (stop it first)`);
    process.exit(1);
  }
  const cluster = await startCluster({
    dataDir: clusterDir,
    databaseUrl: process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/dwb_cluster',
    ports,
    adminApiKey: env.ADMIN_API_KEY!,
    s3: { ...objectStoreCredentials(clusterDir, () => crypto.randomBytes(24).toString('hex')), bucket: 'dwb' },
    log: say,
  });
  started.push(...[...cluster.members.values()].map((m) => m.process));
  say('');
  say(`API              ${cluster.apiUrl}   (HAProxy in front of ${ports.apiReplicas.map((p) => `127.0.0.1:${p}`).join(' and ')}; stats: http://127.0.0.1:${ports.haproxyStats})`);
  say(`Admin API key    ${process.env.ADMIN_API_KEY ? '(from ADMIN_API_KEY)' : 'in .data/admin-api-key   (cat .data/admin-api-key)'}`);
  say(`Temporal server  ${cluster.temporalAddress} (PostgreSQL, SQL visibility)   Web UI: ${cluster.temporalUiUrl}`);
  say(`Temporal CLI     npm run -s temporal -- workflow list   (every \`temporal ...\` of the operator guide works unchanged)`);
  say(`Weaviate         ${cluster.weaviateUrl} (HAProxy in front of ${cluster.weaviateNodeUrls.join(', ')}; classes replicated 3 times, QUORUM)`);
  say(`Object store     ${cluster.s3Endpoint} (S3, bucket dwb; credentials in .data/cluster/s3-credentials.json)`);
  say('Workers          worker1, worker2');
  say(`Logs             .data/cluster/logs/`);
  say('Ctrl-C stops everything started here.');
  watchEntryPoints(started.filter((x) => /^(?:api|worker)\d$/.test(x.name)), '.data/cluster/logs');
}

/** If an API or worker process dies, say so and stop the rest rather than run half a system. */
function watchEntryPoints(processes: ManagedProcess[], logDir: string): void {
  for (const p of processes) {
    p.child.once('exit', (code) => {
      if (stopping) return;
      say(`${p.name} exited with code ${code}; see ${logDir}/${p.name}.log`);
      process.kill(process.pid, 'SIGTERM');
    });
  }
}

try {
  if (clusterProfile) await startClusterProfile();
  else await startSingleMachine();
} catch (err) {
  say(`start failed: ${redactSecrets((err as Error).message)}`);
  await stopAll();
  process.exit(1);
}

async function startSingleMachine(): Promise<void> {
  if (await portOpen(config.port)) {
    say(`something already answers on port ${config.port}: is the system already running? (stop it, or set PORT)`);
    process.exit(1);
  }
  await ensureDatabase(config.databaseUrl);
  await migrate(config.databaseUrl);
  say(`database ready: ${redactUrl(config.databaseUrl)}`);

  const temporalPort = Number(config.temporalAddress.split(':').pop());
  const uiPort = setting(process.env, 'TEMPORAL_UI_PORT');
  if (!process.env.TEMPORAL_ADDRESS) {
    if (await portOpen(temporalPort)) say(`Temporal already answers at ${config.temporalAddress}; using it`);
    else started.push(await startTemporal({ port: temporalPort, uiPort, dbFile: path.join(dataDir, 'temporal.db'), logFile: path.join(dataDir, 'logs/temporal.log') }));
  }
  const weaviatePort = Number(new URL(config.weaviateUrl).port || 80);
  if (!process.env.WEAVIATE_URL) {
    if (await portOpen(weaviatePort)) say(`Weaviate already answers at ${config.weaviateUrl}; using it`);
    else
      started.push(
        await startWeaviate({
          dataDir: path.join(dataDir, 'weaviate'),
          logFile: path.join(dataDir, 'logs/weaviate.log'),
          ports: { http: weaviatePort, grpc: 50051, gossip: 7946, data: 7947, raft: 8300 },
        }),
      );
  }

  const node = (name: string, script: string) =>
    manage(name, process.execPath, nodeArgs(script), { env, logFile: path.join(dataDir, `logs/${name}.log`) });
  started.push(node('worker', 'workers/main.ts'));
  started.push(node('api', 'api/server.ts'));
  await waitFor('API', async () => (await fetch(`http://127.0.0.1:${config.port}/health`)).ok, 60_000, started.at(-1));

  say('');
  say(`API              http://127.0.0.1:${config.port}   (OpenAPI: /openapi.json)`);
  // The key itself is never printed (no secret in any log line): it is read from its file.
  say(`Admin API key    ${process.env.ADMIN_API_KEY ? '(from ADMIN_API_KEY)' : 'in .data/admin-api-key   (cat .data/admin-api-key)'}`);
  say(`Temporal         ${config.temporalAddress}${process.env.TEMPORAL_ADDRESS ? '' : `   Web UI: http://127.0.0.1:${uiPort}`}`);
  // The operator guide's `temporal ...` commands, from any shell in this checkout (scripts/temporal.ts).
  const cliEnv = ['TEMPORAL_ADDRESS', 'TEMPORAL_NAMESPACE'].filter((name) => process.env[name]).map((name) => `${name}=${process.env[name]} `).join('');
  say(`Temporal CLI     ${cliEnv}npm run -s temporal -- workflow list   (any \`temporal ...\` of docs/operations.md: npm run -s temporal -- ...; the binary: ${binaries.temporal})`);
  say(`Weaviate         ${config.weaviateUrl}`);
  say(`Logs             .data/logs/{api,worker,temporal,weaviate}.log`);
  say('Ctrl-C stops everything started here.');

  watchEntryPoints(started.filter((x) => x.name === 'api' || x.name === 'worker'), '.data/logs');
}
