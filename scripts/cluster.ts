import fs from 'node:fs';
import path from 'node:path';
import { canListen, ensureDatabase, manage, migrate, nodeArgs, startObjectStore, startWeaviate, waitFor, type ManagedProcess, type WeaviatePorts } from './stack.js';
import { setUpTemporalSchema, startTemporalServer, startTemporalUi, type TemporalServerOptions } from './temporal-server.js';
import { startLoadBalancer } from './load-balancer.js';

/**
 * The cluster profile: on one machine, every process a multi-host deployment runs, each on its own
 * ports and state, talking over the network as they would between hosts:
 *   PostgreSQL (the machine's), the Temporal server on PostgreSQL with SQL visibility and its Web UI,
 *   Weaviate as a 3-node cluster (classes replicated 3 times, QUORUM reads and writes), the S3
 *   object store (Versity's gateway), two API processes behind HAProxy, and two workers.
 * Nothing is shared between the API and worker processes but those services: each has its own
 * scratch folder. `scripts/start --cluster` runs it; the fault test and the benchmarks start it
 * on free ports. docker-compose.temporal.yml describes the same deployment for real hosts.
 */
export interface ClusterPorts {
  /** The load balancer's API port: what clients use. */
  api: number;
  apiReplicas: number[];
  temporal: number;
  temporalInternal: TemporalServerOptions['internalPorts'];
  temporalUi: number;
  temporalMetrics: number | null;
  /** The load balancer's Weaviate port: what the services use. */
  weaviate: number;
  weaviateNodes: WeaviatePorts[];
  s3: number;
  haproxyStats: number | null;
}

/** The fixed ports of `scripts/start --cluster` (docs/deployment.md, "Production-like deployment and scaling"). */
export function defaultClusterPorts(apiPort = 3000): ClusterPorts {
  return {
    api: apiPort,
    apiReplicas: [3101, 3102],
    temporal: 7233,
    temporalInternal: { history: 7234, matching: 7235, worker: 7239, frontendMembership: 6933, historyMembership: 6934, matchingMembership: 6935, workerMembership: 6939, http: 7243 },
    temporalUi: 8233,
    temporalMetrics: 8000,
    weaviate: 8080,
    weaviateNodes: [0, 1, 2].map((i) => ({ http: 8081 + i, grpc: 50051 + i, gossip: 7946 + 2 * i, data: 7947 + 2 * i, raft: 8300 + 2 * i })),
    s3: 7070,
    haproxyStats: 8404,
  };
}

/**
 * Free ports for a cluster beside anything else on the machine (the fault run, the benchmarks, the
 * cluster test), picked below the kernel's range for outgoing connections (32768 and up): a port
 * picked there may be taken as the local end of a connection between the pick and the bind, and a
 * cluster opens hundreds before its load balancer and APIs bind theirs. (The Temporal server also
 * keeps its membership ports in a PostgreSQL smallint column, which such ports overflow.)
 */
export async function freeClusterPorts(): Promise<ClusterPorts> {
  const taken = new Set<number>();
  const pick = async (o: { udp?: boolean; pair?: boolean } = {}): Promise<number> => {
    for (;;) {
      const port = 20000 + Math.floor(Math.random() * 12760);
      const ports = o.pair ? [port, port + 1] : [port];
      if (ports.some((q) => taken.has(q))) continue;
      if (!(await Promise.all(ports.map((q) => canListen(q)))).every(Boolean)) continue;
      if (o.udp && !(await canListen(port, 'udp'))) continue;
      for (const q of ports) taken.add(q);
      return port;
    }
  };
  const weaviateNodes: WeaviatePorts[] = [];
  for (let i = 0; i < 3; i++) weaviateNodes.push({ http: await pick(), grpc: await pick(), gossip: await pick({ udp: true }), data: await pick(), raft: await pick({ pair: true }) });
  return {
    api: await pick(),
    apiReplicas: [await pick(), await pick()],
    temporal: await pick(),
    temporalInternal: {
      history: await pick(),
      matching: await pick(),
      worker: await pick(),
      frontendMembership: await pick(),
      historyMembership: await pick(),
      matchingMembership: await pick(),
      workerMembership: await pick(),
      http: await pick(),
    },
    temporalUi: await pick(),
    temporalMetrics: null,
    weaviate: await pick(),
    weaviateNodes,
    s3: await pick(),
    haproxyStats: null,
  };
}

export interface ClusterOptions {
  /** Every server's state, configuration and logs live under it. */
  dataDir: string;
  /** The application's database; the Temporal server's two are named after it (`<name>_temporal`, `<name>_temporal_visibility`). */
  databaseUrl: string;
  ports: ClusterPorts;
  adminApiKey: string;
  /** The object store's root credentials and the bucket the services keep files in. */
  s3: { accessKey: string; secretKey: string; bucket: string };
  /** Settings every API and worker process gets on top of the cluster's (e.g. OPENAI_BASE_URL). */
  env?: Record<string, string>;
  /** A prebuilt workflow bundle for the workers (faster start); null bundles at each worker's start. */
  workflowBundlePath?: string | null;
  /** Fixed once the Temporal databases exist. */
  numHistoryShards?: number;
  temporalNamespace?: string;
  log?: (line: string) => void;
}

/** A process of the cluster that can be killed and started again (the fault test). */
export interface ClusterMember {
  name: string;
  process: ManagedProcess;
  start(): Promise<void>;
}

export interface Cluster {
  ports: ClusterPorts;
  apiUrl: string;
  weaviateUrl: string;
  weaviateNodeUrls: string[];
  temporalAddress: string;
  temporalUiUrl: string;
  s3Endpoint: string;
  /** The settings every API and worker process of the cluster runs with (without PORT and STORAGE_DIR). */
  env: Record<string, string>;
  members: Map<string, ClusterMember>;
  member(name: string): ClusterMember;
  stop(): Promise<void>;
}

export const weaviateReplicationFactor = 3;

/** Starts the whole cluster; stops what it started if any part fails. */
export async function startCluster(o: ClusterOptions): Promise<Cluster> {
  const log = o.log ?? (() => undefined);
  const members = new Map<string, ClusterMember>();
  const logs = path.join(o.dataDir, 'logs');
  const p = o.ports;
  const stopAll = async () => {
    for (const m of [...members.values()].reverse()) await m.process.stop();
  };
  const add = async (name: string, launch: () => Promise<ManagedProcess>): Promise<ClusterMember> => {
    const member: ClusterMember = {
      name,
      process: await launch(),
      async start() {
        member.process = await launch();
      },
    };
    members.set(name, member);
    return member;
  };

  try {
    // PostgreSQL: the application's database, and the Temporal server's two with its schema.
    await ensureDatabase(o.databaseUrl);
    await migrate(o.databaseUrl);
    const db = new URL(o.databaseUrl);
    const appDatabase = decodeURIComponent(db.pathname.slice(1));
    const temporalOptions: TemporalServerOptions = {
      postgres: { host: db.hostname, port: Number(db.port || 5432), user: decodeURIComponent(db.username || 'postgres'), password: decodeURIComponent(db.password) },
      databases: { main: `${appDatabase}_temporal`, visibility: `${appDatabase}_temporal_visibility` },
      frontendPort: p.temporal,
      internalPorts: p.temporalInternal,
      metricsPort: p.temporalMetrics,
      numHistoryShards: o.numHistoryShards ?? 4,
      configDir: path.join(o.dataDir, 'temporal', 'config'),
      logFile: path.join(logs, 'temporal-server.log'),
      namespace: o.temporalNamespace ?? 'default',
      retention: '720h',
    };
    await setUpTemporalSchema(temporalOptions);
    log(`PostgreSQL ready: ${appDatabase}, ${temporalOptions.databases.main}, ${temporalOptions.databases.visibility}`);

    // Independent servers, started side by side.
    const raftJoin = p.weaviateNodes.map((n, i) => `node${i + 1}:${n.raft}`);
    const weaviateNode = (i: number) => () =>
      startWeaviate({
        dataDir: path.join(o.dataDir, 'weaviate', `node${i + 1}`),
        logFile: path.join(logs, `weaviate-node${i + 1}.log`),
        ports: p.weaviateNodes[i]!,
        // Every node knows every other one's gossip port: any of them may be the one that is down.
        cluster: { name: `node${i + 1}`, join: p.weaviateNodes.filter((_, j) => j !== i).map((n) => `127.0.0.1:${n.gossip}`), raftJoin },
      });
    await Promise.all([
      add('temporal-server', () => startTemporalServer(temporalOptions)),
      ...p.weaviateNodes.map((_, i) => add(`weaviate-node${i + 1}`, weaviateNode(i))),
      add('s3', () =>
        startObjectStore({ dataDir: path.join(o.dataDir, 's3'), logFile: path.join(logs, 's3.log'), port: p.s3, accessKey: o.s3.accessKey, secretKey: o.s3.secretKey, bucket: o.s3.bucket }),
      ),
    ]);
    const temporalAddress = `127.0.0.1:${p.temporal}`;
    log(`Temporal server ready at ${temporalAddress}; Weaviate nodes ready; object store ready`);
    await add('temporal-ui', () =>
      startTemporalUi({ port: p.temporalUi, temporalAddress, namespace: temporalOptions.namespace, configDir: path.join(o.dataDir, 'temporal', 'ui-config'), logFile: path.join(logs, 'temporal-ui.log') }),
    );
    await add('haproxy', () =>
      startLoadBalancer({
        api: { port: p.api, backends: p.apiReplicas.map((port, i) => ({ name: `api${i + 1}`, port })) },
        weaviate: { port: p.weaviate, backends: p.weaviateNodes.map((n, i) => ({ name: `node${i + 1}`, port: n.http })) },
        statsPort: p.haproxyStats,
        configFile: path.join(o.dataDir, 'haproxy', 'haproxy.cfg'),
        logFile: path.join(logs, 'haproxy.log'),
      }),
    );

    const s3Endpoint = `http://127.0.0.1:${p.s3}`;
    const env: Record<string, string> = {
      ...(process.env as Record<string, string>),
      DATABASE_URL: o.databaseUrl,
      TEMPORAL_ADDRESS: temporalAddress,
      TEMPORAL_NAMESPACE: temporalOptions.namespace,
      WEAVIATE_URL: `http://127.0.0.1:${p.weaviate}`,
      WEAVIATE_REPLICATION_FACTOR: String(weaviateReplicationFactor),
      WEAVIATE_WRITE_CONSISTENCY: 'QUORUM',
      WEAVIATE_READ_CONSISTENCY: 'QUORUM',
      STORAGE_URL: `s3://${o.s3.bucket}/files`,
      S3_ENDPOINT: s3Endpoint,
      S3_REGION: 'us-east-1',
      S3_FORCE_PATH_STYLE: 'true',
      AWS_ACCESS_KEY_ID: o.s3.accessKey,
      AWS_SECRET_ACCESS_KEY: o.s3.secretKey,
      ADMIN_API_KEY: o.adminApiKey,
      // The API replicas see clients through HAProxy on loopback (rate limits per client address).
      TRUST_PROXY: 'loopback',
      ...(o.workflowBundlePath ? { WORKFLOW_BUNDLE_PATH: o.workflowBundlePath } : {}),
      ...o.env,
    };
    const node = (name: string, script: string, extra: Record<string, string>) => () =>
      Promise.resolve(
        manage(name, process.execPath, nodeArgs(script), {
          env: { ...env, ...extra, STORAGE_DIR: path.join(o.dataDir, 'scratch', name) },
          logFile: path.join(logs, `${name}.log`),
        }),
      );
    await Promise.all([
      ...[1, 2].map((i) => add(`worker${i}`, node(`worker${i}`, 'workers/main.ts', {}))),
      ...p.apiReplicas.map((port, i) => add(`api${i + 1}`, node(`api${i + 1}`, 'api/server.ts', { PORT: String(port) }))),
    ]);
    const apiUrl = `http://127.0.0.1:${p.api}`;
    for (const [i, port] of p.apiReplicas.entries()) {
      await waitFor(`API replica ${i + 1}`, async () => (await fetch(`http://127.0.0.1:${port}/health`)).ok, 120_000, members.get(`api${i + 1}`)!.process);
    }
    await waitFor('the API through HAProxy', async () => (await fetch(`${apiUrl}/health`)).ok, 30_000);

    return {
      ports: p,
      apiUrl,
      weaviateUrl: env.WEAVIATE_URL!,
      weaviateNodeUrls: p.weaviateNodes.map((n) => `http://127.0.0.1:${n.http}`),
      temporalAddress,
      temporalUiUrl: `http://127.0.0.1:${p.temporalUi}`,
      s3Endpoint,
      env,
      members,
      member(name) {
        const m = members.get(name);
        if (!m) throw new Error(`no cluster member ${name}; there are ${[...members.keys()].join(', ')}`);
        return m;
      },
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** Credentials of the cluster's object store, made once and kept in its data folder (never printed). */
export function objectStoreCredentials(dataDir: string, random: () => string): { accessKey: string; secretKey: string } {
  const file = path.join(dataDir, 's3-credentials.json');
  if (!fs.existsSync(file)) {
    fs.mkdirSync(dataDir, { recursive: true });
    fs.writeFileSync(file, JSON.stringify({ accessKey: `dwb${random().slice(0, 12)}`, secretKey: random() }), { mode: 0o600 });
  }
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}
