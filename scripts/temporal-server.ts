import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { searchAttributeDeclarations } from '../lib/contracts/search-attributes.js';
import { binaries, manage, waitFor, type ManagedProcess } from './stack.js';

/**
 * The Temporal server itself (go.temporal.io/server, the version the CLI's dev server embeds) on
 * PostgreSQL persistence and SQL visibility, as a multi-host deployment runs it, and its Web UI
 * (github.com/temporalio/ui-server). Used by the cluster profile (scripts/cluster.ts); the same
 * versions and settings are in docker-compose.temporal.yml.
 */
const run = promisify(execFile);

export interface TemporalServerOptions {
  /** PostgreSQL the server keeps its state in (trust or password auth, as the URL says). */
  postgres: { host: string; port: number; user: string; password: string };
  /** Database names: history and the rest, and SQL visibility (what the Web UI and `workflow list` read). */
  databases: { main: string; visibility: string };
  /** gRPC frontend (what workers, the API and the CLI connect to); the server's other ports follow it. */
  frontendPort: number;
  /** Ports of the history, matching and internal worker services, their membership ports, and the frontend's HTTP API. */
  internalPorts: { history: number; matching: number; worker: number; frontendMembership: number; historyMembership: number; matchingMembership: number; workerMembership: number; http: number };
  /** Prometheus metrics (null: none). */
  metricsPort: number | null;
  /** Fixed when the cluster's databases are first set up and never changeable afterwards. */
  numHistoryShards: number;
  /** Folder for the generated config files. */
  configDir: string;
  logFile: string;
  namespace: string;
  /** How long closed workflows stay visible. */
  retention: string;
}

/** Temporal's own dynamic settings (https://docs.temporal.io/references/dynamic-configuration); docker-compose.temporal.yml writes the same. */
export function temporalDynamicConfig(): Record<string, Array<{ value: unknown; constraints?: Record<string, unknown> }>> {
  return {
    // Workflow IDs are `<kind>-<uuid>` today; room for longer ones an operator may choose.
    'limit.maxIDLength': [{ value: 1000 }],
    // The history service keeps every workflow it touched in the last hour in memory (up to 128,000
    // by default): a cap bounds the server's heap on a day of steady document starts (scripts/stack.ts
    // says the same of the dev server, with the measurements).
    'history.hostLevelCacheMaxSize': [{ value: 8192 }],
  };
}

/** The server's static configuration (config/<env>.yaml), in the format of go.temporal.io/server/common/config. */
export function temporalServerConfig(o: TemporalServerOptions): Record<string, unknown> {
  const datastore = (databaseName: string, maxConns: number) => ({
    sql: {
      pluginName: 'postgres12',
      databaseName,
      connectAddr: `${o.postgres.host}:${o.postgres.port}`,
      connectProtocol: 'tcp',
      user: o.postgres.user,
      password: o.postgres.password,
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  const service = (grpcPort: number, membershipPort: number, extra: Record<string, unknown> = {}) => ({
    rpc: { grpcPort, membershipPort, bindOnIP: '127.0.0.1', ...extra },
  });
  return {
    log: { stdout: true, level: 'warn' },
    persistence: {
      defaultStore: 'postgres-default',
      visibilityStore: 'postgres-visibility',
      numHistoryShards: o.numHistoryShards,
      datastores: { 'postgres-default': datastore(o.databases.main, 20), 'postgres-visibility': datastore(o.databases.visibility, 10) },
    },
    global: {
      membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' },
      ...(o.metricsPort ? { metrics: { prometheus: { framework: 'tally', timerType: 'histogram', listenAddress: `127.0.0.1:${o.metricsPort}` } } } : {}),
    },
    services: {
      frontend: service(o.frontendPort, o.internalPorts.frontendMembership, { httpPort: o.internalPorts.http }),
      history: service(o.internalPorts.history, o.internalPorts.historyMembership),
      matching: service(o.internalPorts.matching, o.internalPorts.matchingMembership),
      worker: service(o.internalPorts.worker, o.internalPorts.workerMembership),
    },
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: { active: { enabled: true, initialFailoverVersion: 1, rpcName: 'frontend', rpcAddress: `127.0.0.1:${o.frontendPort}` } },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    dynamicConfigClient: { filepath: path.join(o.configDir, 'dynamicconfig.yaml'), pollInterval: '10s' },
  };
}

/** `temporal-sql-tool` against the server's PostgreSQL, with the password in its environment (not its arguments). */
function sqlTool(o: TemporalServerOptions, database: string, args: string[]) {
  return run(binaries.temporalSqlTool, ['--plugin', 'postgres12', '--ep', o.postgres.host, '-p', String(o.postgres.port), '-u', o.postgres.user, '--db', database, ...args], {
    env: { ...process.env, SQL_PASSWORD: o.postgres.password },
  });
}

/**
 * Creates the two databases if missing and brings their schemas to the server's version with the
 * server's own schema tool and the schemas it embeds: safe on every start, and how an upgrade of
 * TEMPORAL_SERVER_VERSION reaches the database.
 */
export async function setUpTemporalSchema(o: TemporalServerOptions): Promise<void> {
  for (const [database, schema] of [
    [o.databases.main, 'postgresql/v12/temporal'],
    [o.databases.visibility, 'postgresql/v12/visibility'],
  ] as const) {
    await sqlTool(o, database, ['create-database']);
    await sqlTool(o, database, ['setup-schema', '-v', '0.0']);
    await sqlTool(o, database, ['update-schema', '--schema-name', schema]);
  }
}

/** The Temporal CLI against this server (what an operator runs). */
export function temporalCli(address: string, args: string[]) {
  return run(binaries.temporal, [...args, '--address', address]);
}

/**
 * Starts the server on a schema set up by setUpTemporalSchema, then registers the namespace and our
 * search attributes (lib/contracts/search-attributes.ts) unless they are there: the same commands
 * an operator or docker-compose.temporal.yml's admin-tools job runs.
 */
export async function startTemporalServer(o: TemporalServerOptions): Promise<ManagedProcess> {
  if (!fs.existsSync(binaries.temporalServer)) throw new Error(`${binaries.temporalServer} is missing: run scripts/build-tools.sh temporal-server`);
  fs.mkdirSync(o.configDir, { recursive: true });
  fs.writeFileSync(path.join(o.configDir, 'cluster.yaml'), stringify(temporalServerConfig(o)));
  fs.writeFileSync(path.join(o.configDir, 'dynamicconfig.yaml'), stringify(temporalDynamicConfig()));
  const proc = manage('temporal-server', binaries.temporalServer, ['--root', path.dirname(o.configDir), '--config', path.basename(o.configDir), '--env', 'cluster', '--allow-no-auth', 'start'], {
    logFile: o.logFile,
  });
  const address = `127.0.0.1:${o.frontendPort}`;
  await waitFor('Temporal server', async () => /SERVING/.test((await temporalCli(address, ['operator', 'cluster', 'health'])).stdout), 120_000, proc);
  await registerNamespace(address, o.namespace, o.retention, proc);
  return proc;
}

/** The namespace and the search attributes, each created only when missing; waits until the namespace serves. */
export async function registerNamespace(address: string, namespace: string, retention: string, proc?: ManagedProcess): Promise<void> {
  const described = await temporalCli(address, ['operator', 'namespace', 'describe', '--namespace', namespace]).catch(() => null);
  if (!described) await temporalCli(address, ['operator', 'namespace', 'create', '--namespace', namespace, '--retention', retention]);
  // A new namespace reaches the frontend's cache within its refresh interval (~10 s).
  await waitFor(`namespace ${namespace}`, async () => ((await temporalCli(address, ['workflow', 'count', '--namespace', namespace])), true), 60_000, proc);
  const { stdout } = await temporalCli(address, ['operator', 'search-attribute', 'list', '--namespace', namespace, '--output', 'json']);
  const existing = new Set(Object.keys((JSON.parse(stdout) as { customAttributes?: Record<string, unknown> }).customAttributes ?? {}));
  for (const declaration of searchAttributeDeclarations) {
    const [name, type] = declaration.split('=') as [string, string];
    if (existing.has(name)) continue;
    await temporalCli(address, ['operator', 'search-attribute', 'create', '--namespace', namespace, '--name', name, '--type', type]);
  }
}

export interface TemporalUiOptions {
  port: number;
  temporalAddress: string;
  namespace: string;
  configDir: string;
  logFile: string;
}

/** The Temporal Web UI server (the one the CLI's dev server embeds), pointed at the cluster's frontend. */
export async function startTemporalUi(o: TemporalUiOptions): Promise<ManagedProcess> {
  if (!fs.existsSync(binaries.temporalUi)) throw new Error(`${binaries.temporalUi} is missing: run scripts/build-tools.sh temporal-ui`);
  fs.mkdirSync(o.configDir, { recursive: true });
  const config = {
    temporalGrpcAddress: o.temporalAddress,
    host: '127.0.0.1',
    port: o.port,
    enableUi: true,
    defaultNamespace: o.namespace,
    // No login here: bound to loopback, as the compose file binds it. Turn on `auth` (OIDC) before exposing it.
    cors: { allowOrigins: [`http://127.0.0.1:${o.port}`, `http://localhost:${o.port}`], cookieInsecure: true },
    refreshInterval: '1m',
    notifyOnNewVersion: false,
  };
  fs.writeFileSync(path.join(o.configDir, 'ui.yaml'), stringify(config));
  const proc = manage('temporal-ui', binaries.temporalUi, ['--root', path.dirname(o.configDir), '--config', path.basename(o.configDir), '--env', 'ui', 'start'], { logFile: o.logFile });
  await waitFor('Temporal Web UI', async () => (await fetch(`http://127.0.0.1:${o.port}/`)).ok, 60_000, proc);
  return proc;
}
