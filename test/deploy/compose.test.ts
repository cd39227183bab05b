import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseDocument } from 'yaml';
import { searchAttributeDeclarations } from '../../lib/contracts/search-attributes.js';
import { weaviateReplicationFactor } from '../../scripts/cluster.js';
import { haproxyConfig } from '../../scripts/load-balancer.js';
import { temporalDynamicConfig } from '../../scripts/temporal-server.js';
import { nodeArgs } from '../../scripts/stack.js';

/**
 * docker-compose.temporal.yml and the Dockerfile, checked without a Docker engine.
 *
 * The validator is Docker Compose itself, in its Python implementation (Debian package
 * `docker-compose`, 1.29, listed in scripts/dev-packages.txt): `config` loads the file the way
 * `up` would — Compose-spec JSON Schema, variable interpolation, `${VAR:?}` checks, anchors and
 * merge keys, references between services and volumes — and prints the resolved model, which
 * these tests then read. It needs no daemon. Every file in this deployment uses only syntax that
 * Compose v2 (`docker compose`) also accepts. The file describes the cluster profile
 * (scripts/cluster.ts) for real hosts: the tests hold it to the same versions and settings.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const composeFile = path.join(root, 'docker-compose.temporal.yml');
const dockerfile = path.join(root, 'Dockerfile');

/** Secrets the file insists on; test values only. */
const requiredEnv = {
  POSTGRES_PASSWORD: 'compose-test-db-password',
  ADMIN_API_KEY: 'compose-test-admin-key-0123456789',
  S3_ACCESS_KEY: 'compose-test-s3-access',
  S3_SECRET_KEY: 'compose-test-s3-secret',
};

/** The versions scripts/build-tools.sh builds the cluster profile's servers from. */
const builtVersions = Object.fromEntries(
  [...readFileSync(path.join(root, 'scripts/build-tools.sh'), 'utf8').matchAll(/^([A-Z_]+)_VERSION=v(\S+)/gm)].map((m) => [m[1]!, m[2]!]),
);

/**
 * The settings a deployment sets for the API and the worker (lib/platform/config.ts): where the
 * infrastructure is, its secrets, and the remote services and models; every other setting keeps
 * its documented default unless an operator adds it.
 */
const appSettings = [
  'DATABASE_URL',
  'TEMPORAL_ADDRESS',
  'TEMPORAL_NAMESPACE',
  'TEMPORAL_TASK_QUEUE',
  'WEAVIATE_URL',
  'PORT',
  'ADMIN_API_KEY',
  'OPENAI_BASE_URL',
  'OPENAI_API_KEY',
  'STORAGE_DIR',
  'STORAGE_URL',
  'S3_ENDPOINT',
  'S3_REGION',
  'S3_FORCE_PATH_STYLE',
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'WEAVIATE_REPLICATION_FACTOR',
  'WEAVIATE_WRITE_CONSISTENCY',
  'WEAVIATE_READ_CONSISTENCY',
  'TRUST_PROXY',
  'EMBEDDING_MODEL',
  'TRANSCRIPTION_MODEL',
  'SPEECH_MODEL',
  'DIALOG_ANALYSIS_MODEL',
  'VIDEO_DATA_API_KEY',
  'SCRAPER_BASE_URL',
  'SCRAPER_API_KEY',
  'VOICE_JOB_BASE_URL',
  'VOICE_JOB_API_KEY',
  'VOICE_JOB_FILES_BASE_URL',
  'RERANK_BASE_URL',
  'RERANK_MODEL',
  'RERANK_API_KEY',
  'METRICS_API_KEY',
];

const weaviateNodes = ['weaviate1', 'weaviate2', 'weaviate3'];

const expectedSearchAttributes = [
  'BudgetBlocked=Bool',
  'DocumentId=Keyword',
  'JobStatus=Keyword',
  'KnowledgeBaseId=Keyword',
  'Partner=Keyword',
  'PipelineStatus=Keyword',
];

interface Service {
  image?: string;
  build?: { context: string; dockerfile?: string; target?: string };
  command?: string[] | string;
  entrypoint?: string[] | string;
  environment?: Record<string, string | null>;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] | string; disable?: boolean };
  deploy?: { replicas?: number };
  volumes?: string[];
  ports?: unknown[];
  container_name?: string;
  restart?: string;
}

interface ComposeModel {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

interface RunResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

let scratch: string;
let emptyEnvFile: string;

/**
 * Runs docker-compose with a controlled environment: only PATH/HOME/LANG from the caller (so a
 * developer's exported secrets or COMPOSE_* settings cannot make a test pass or fail) and an empty
 * env file (so a local .env next to the compose file is not read).
 */
function dockerCompose(file: string, args: string[], env: Record<string, string> = requiredEnv): RunResult {
  const base: Record<string, string> = {};
  for (const name of ['PATH', 'HOME', 'LANG', 'LC_ALL']) {
    const value = process.env[name];
    if (value !== undefined) base[name] = value;
  }
  const result = spawnSync('docker-compose', ['--env-file', emptyEnvFile, '-f', file, ...args], {
    cwd: path.dirname(file),
    env: { ...base, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (result.error) throw result.error;
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function commandText(service: Service): string {
  const parts = [service.entrypoint ?? [], service.command ?? []].flat();
  return parts.join(' ');
}

function mountsOf(service: Service): Array<{ source: string; target: string }> {
  return (service.volumes ?? []).map((spec) => {
    const [source = '', target = ''] = spec.split(':');
    return { source, target };
  });
}

/** Writes a copy of the compose file (same directory layout for the build context) and validates it. */
function validateVariant(name: string, text: string): RunResult {
  const file = path.join(scratch, name);
  writeFileSync(file, text);
  return dockerCompose(file, ['config', '-q']);
}

describe('deployment: docker-compose.temporal.yml and Dockerfile', function () {
  this.timeout(60_000);

  let model: ComposeModel;
  let services: Record<string, Service>;

  before(function () {
    const probe = spawnSync('docker-compose', ['version'], { encoding: 'utf8' });
    if (probe.error || probe.status !== 0) {
      throw new Error(
        'docker-compose is not installed. It is the validator of this suite: install the Debian package ' +
          '`docker-compose` (listed in scripts/dev-packages.txt), e.g. `apt-get install -y docker-compose`.',
      );
    }
    scratch = mkdtempSync(path.join(os.tmpdir(), 'compose-test-'));
    emptyEnvFile = path.join(scratch, 'empty.env');
    writeFileSync(emptyEnvFile, '');

    const rendered = dockerCompose(composeFile, ['config']);
    assert.equal(rendered.status, 0, `docker-compose config failed:\n${rendered.stderr}`);
    model = parse(rendered.stdout) as ComposeModel;
    services = model.services;
  });

  after(function () {
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  describe('validity', function () {
    it('is accepted by docker-compose config -q', function () {
      const result = dockerCompose(composeFile, ['config', '-q']);
      assert.equal(result.status, 0, result.stderr);
    });

    it('refuses to render without ADMIN_API_KEY, naming it', function () {
      const { ADMIN_API_KEY: _omit, ...env } = requiredEnv;
      const result = dockerCompose(composeFile, ['config', '-q'], env);
      assert.notEqual(result.status, 0);
      assert.match(result.stderr, /ADMIN_API_KEY/);
    });

    it('refuses to render without POSTGRES_PASSWORD, naming it', function () {
      const { POSTGRES_PASSWORD: _omit, ...env } = requiredEnv;
      const result = dockerCompose(composeFile, ['config', '-q'], env);
      assert.notEqual(result.status, 0);
      assert.match(result.stderr, /POSTGRES_PASSWORD/);
    });
  });

  describe('the validator can fail', function () {
    const original = () => readFileSync(composeFile, 'utf8');

    it('accepts an unmodified copy in the scratch directory (control for the cases below)', function () {
      const result = validateVariant('control.yml', original());
      assert.equal(result.status, 0, result.stderr);
    });

    it('rejects a service that depends on a service that does not exist', function () {
      const doc = parseDocument(original());
      const dependsOn = doc.getIn(['services', 'api', 'depends_on']) as { set(k: unknown, v: unknown): void };
      dependsOn.set(doc.createNode('search-engine'), doc.createNode({ condition: 'service_healthy' }));
      const result = validateVariant('missing-dependency.yml', doc.toString({ lineWidth: 0 }));
      assert.notEqual(result.status, 0, 'a dangling depends_on was accepted');
      assert.match(result.stderr, /search-engine/);
    });

    it('rejects a service with a key Compose does not know', function () {
      const doc = parseDocument(original());
      doc.setIn(['services', 'worker', 'replicaz'], 3);
      const result = validateVariant('unknown-key.yml', doc.toString({ lineWidth: 0 }));
      assert.notEqual(result.status, 0, 'an unknown service key was accepted');
      assert.match(result.stderr, /replicaz/);
    });

    it('rejects a wrongly typed value', function () {
      const doc = parseDocument(original());
      doc.setIn(['services', 'worker', 'deploy', 'replicas'], 'several');
      const result = validateVariant('bad-type.yml', doc.toString({ lineWidth: 0 }));
      assert.notEqual(result.status, 0, 'a non-integer replica count was accepted');
      assert.match(result.stderr, /replicas/);
    });
  });

  describe('completeness', function () {
    it('has every service of the deployment', function () {
      for (const name of ['postgres', 'temporal-schema', 'temporal', 'temporal-ui', 'temporal-admin-tools', ...weaviateNodes, 's3', 'migrate', 'api', 'worker', 'lb']) {
        assert.ok(services[name], `service ${name} is missing`);
      }
    });

    it('pins the images at the versions the cluster profile builds and runs', function () {
      const image = (name: string) => services[name]?.image ?? '';
      assert.match(image('postgres'), /^postgres:\d+/);
      assert.equal(image('temporal'), `temporalio/server:${builtVersions.TEMPORAL_SERVER}`);
      assert.equal(image('temporal-schema'), `temporalio/admin-tools:${builtVersions.TEMPORAL_SERVER}`);
      assert.equal(image('temporal-admin-tools'), `temporalio/admin-tools:${builtVersions.TEMPORAL_SERVER}`);
      assert.equal(image('temporal-ui'), `temporalio/ui:${builtVersions.TEMPORAL_UI}`);
      for (const node of weaviateNodes) assert.equal(image(node), `semitechnologies/weaviate:${builtVersions.WEAVIATE}`);
      assert.equal(image('s3'), `versity/versitygw:v${builtVersions.VERSITYGW}`);
      // The cluster profile's HAProxy is Debian's (scripts/dev-packages.txt).
      const haproxy = /version (\d+\.\d+\.\d+)/.exec(spawnSync('haproxy', ['-v'], { encoding: 'utf8' }).stdout)?.[1];
      assert.equal(image('lb'), `haproxy:${haproxy}`);
    });

    it('gives the API and the worker every configuration variable, pointing at the compose services', function () {
      for (const name of ['api', 'worker']) {
        const env = services[name]?.environment ?? {};
        for (const setting of appSettings) {
          assert.ok(setting in env, `${name} lacks ${setting}`);
        }
        assert.equal(new URL(env.DATABASE_URL ?? '').hostname, 'postgres', `${name} DATABASE_URL`);
        assert.equal(env.TEMPORAL_ADDRESS, 'temporal:7233', `${name} TEMPORAL_ADDRESS`);
        assert.equal(new URL(env.WEAVIATE_URL ?? '').host, 'lb:8081', `${name} WEAVIATE_URL`);
        assert.equal(new URL(env.S3_ENDPOINT ?? '').host, 's3:7070', `${name} S3_ENDPOINT`);
        assert.match(env.STORAGE_URL ?? '', /^s3:\/\//, `${name} STORAGE_URL`);
        assert.equal(env.AWS_SECRET_ACCESS_KEY, requiredEnv.S3_SECRET_KEY, `${name} AWS_SECRET_ACCESS_KEY`);
        // Secrets come from the environment, not from the file.
        assert.equal(env.ADMIN_API_KEY, requiredEnv.ADMIN_API_KEY, `${name} ADMIN_API_KEY`);
        assert.equal(new URL(env.DATABASE_URL ?? '').password, requiredEnv.POSTGRES_PASSWORD, `${name} DATABASE_URL password`);
      }
      assert.deepEqual(services.api?.environment, services.worker?.environment, 'API and worker must share one configuration');
    });

    it('keeps the app database apart from the Temporal databases', function () {
      const appDb = new URL(services.api?.environment?.DATABASE_URL ?? '').pathname.slice(1);
      const temporalEnv = services.temporal?.environment ?? {};
      const temporalDbs = [temporalEnv.DBNAME ?? 'temporal', temporalEnv.VISIBILITY_DBNAME ?? 'temporal_visibility'];
      assert.ok(appDb.length > 0);
      assert.ok(!temporalDbs.includes(appDb), `app database ${appDb} is one of Temporal's ${temporalDbs.join(', ')}`);
      assert.equal(temporalEnv.DB, 'postgres12');
      assert.equal(temporalEnv.POSTGRES_SEEDS, 'postgres');
    });

    it('shares no volume between API and worker replicas: files are in the object store, the bucket in its volume', function () {
      for (const name of ['api', 'worker']) assert.deepEqual(mountsOf(services[name] ?? {}), [], `${name} mounts a volume`);
      const bucket = /^s3:\/\/([^/]+)/.exec(services.api?.environment?.STORAGE_URL ?? '')?.[1];
      assert.equal(services.s3?.environment?.S3_BUCKET, bucket, 'the object store makes the bucket STORAGE_URL names');
      assert.equal(services.s3?.environment?.ROOT_SECRET_ACCESS_KEY, requiredEnv.S3_SECRET_KEY);
      assert.match(commandText(services.s3 ?? {}), /versitygw --port :7070 .*posix \/data/);
    });

    it('persists PostgreSQL, each Weaviate node and the object store in named volumes of their own', function () {
      const named = Object.keys(model.volumes ?? {});
      const volumeAt = (name: string, target: string) => mountsOf(services[name] ?? {}).find((m) => m.target === target)?.source;
      const sources = [volumeAt('postgres', '/var/lib/postgresql/data'), volumeAt('s3', '/data'), ...weaviateNodes.map((n) => volumeAt(n, services[n]?.environment?.PERSISTENCE_DATA_PATH ?? ''))];
      for (const source of sources) assert.ok(source && named.includes(source), `${source} is not a named volume`);
      assert.equal(new Set(sources).size, sources.length, 'two services share a volume');
    });

    it('runs Weaviate as the cluster profile does: 3 nodes of one raft cluster, classes replicated 3 times, QUORUM', function () {
      const names = weaviateNodes.map((n) => services[n]?.environment?.CLUSTER_HOSTNAME);
      assert.deepEqual(names, ['node1', 'node2', 'node3']);
      for (const node of weaviateNodes) {
        const env = services[node]?.environment ?? {};
        assert.equal(env.RAFT_JOIN, 'node1,node2,node3', node);
        assert.equal(env.RAFT_BOOTSTRAP_EXPECT, '3', node);
        assert.equal(env.ASYNC_INDEXING, 'true', node);
        assert.equal(env.DEFAULT_VECTORIZER_MODULE, 'none', node);
        // Every node joins through the other two: any one of them may be the one that is down.
        assert.deepEqual((env.CLUSTER_JOIN ?? '').split(',').sort(), weaviateNodes.filter((n) => n !== node).map((n) => `${n}:${env.CLUSTER_GOSSIP_BIND_PORT}`));
      }
      const app = services.api?.environment ?? {};
      assert.equal(app.WEAVIATE_REPLICATION_FACTOR, String(weaviateReplicationFactor));
      assert.equal(app.WEAVIATE_WRITE_CONSISTENCY, 'QUORUM');
      assert.equal(app.WEAVIATE_READ_CONSISTENCY, 'QUORUM');
    });

    it('sets up the Temporal server as the cluster profile does: the embedded schemas, the same dynamic config', function () {
      const schema = commandText(services['temporal-schema'] ?? {});
      assert.match(schema, /update-schema --schema-name postgresql\/v12\/temporal\b/);
      assert.match(schema, /update-schema --schema-name postgresql\/v12\/visibility\b/);
      const written = /cat > \/tmp\/dynamicconfig\/production\.yaml <<'EOF'\n([\s\S]*?)\nEOF/.exec(commandText(services.temporal ?? {}))?.[1] ?? '';
      assert.deepEqual(parse(written), temporalDynamicConfig());
    });

    it('balances the API and Weaviate with the load balancer settings of the cluster profile', function () {
      const section = (config: string, name: string) =>
        (new RegExp(`^${name}\\n((?:  .*\\n?)*)`, 'm').exec(config)?.[1] ?? '')
          .split('\n')
          .map((l) => l.trim())
          .filter((l) => l && !l.startsWith('#') && !/^(?:server|server-template|bind) /.test(l));
      const composed = /cat > \/tmp\/haproxy\.cfg <<'EOF'\n([\s\S]*?)\nEOF/.exec(commandText(services.lb ?? {}))?.[1] ?? '';
      const profile = haproxyConfig({ api: { port: 1, backends: [] }, weaviate: { port: 2, backends: [] }, statsPort: 3, configFile: '', logFile: '' });
      for (const name of ['defaults', 'backend api', 'backend weaviate']) {
        assert.ok(section(composed, name).length > 0, `the compose file's HAProxy has no ${name}`);
        assert.deepEqual(section(composed, name), section(profile, name), name);
      }
    });

    it('registers exactly the custom search attributes the workflows declare in the admin-tools job', function () {
      const job = services['temporal-admin-tools'];
      assert.ok(job, 'no admin-tools job');
      assert.match(job.image ?? '', /^temporalio\/admin-tools:/);
      assert.equal(job.restart, 'no', 'the admin-tools job is one-shot');
      const script = commandText(job);
      const registered = [...script.matchAll(/search-attribute create\b[^\n]*?--name\s+(\S+)\s+--type\s+(\S+)/g)]
        .map((m) => `${m[1]}=${m[2]}`)
        .sort();
      assert.deepEqual(registered, expectedSearchAttributes);
      // …and they are the ones the workflows declare.
      assert.deepEqual([...searchAttributeDeclarations].sort(), expectedSearchAttributes);
      // No other job registers search attributes behind its back.
      for (const [name, service] of Object.entries(services)) {
        if (name !== 'temporal-admin-tools') assert.doesNotMatch(commandText(service), /search-attribute create/, name);
      }
    });

    it('builds the API and the worker from the repository Dockerfile, with their own commands', function () {
      for (const name of ['api', 'worker']) {
        const build = services[name]?.build;
        assert.ok(build, `${name} is not built`);
        assert.equal(path.resolve(build.context), root, `${name} build context`);
        assert.equal(build.dockerfile ?? 'Dockerfile', 'Dockerfile', `${name} dockerfile`);
      }
      // The API's Node runs with the flags scripts/start and the cluster profile give it, in the image too.
      const apiCommand = ['node', ...nodeArgs('api/server.ts')].join(' ');
      assert.equal(commandText(services.api ?? {}), apiCommand);
      const imageCommand = [...readFileSync(dockerfile, 'utf8').matchAll(/^CMD (\[.*\])$/gm)].at(-1)?.[1] ?? '[]';
      assert.equal((JSON.parse(imageCommand) as string[]).join(' '), apiCommand, 'the image\'s command (its last stage)');
      assert.match(commandText(services.worker ?? {}), /workers\/main\.ts/);
      assert.equal(path.resolve(services.migrate?.build?.context ?? ''), root);
      assert.match(commandText(services.migrate ?? {}), /scripts\/prisma\.sh migrate deploy/);
    });

    it('starts the API and worker only after migrations and Temporal set-up finished', function () {
      for (const name of ['api', 'worker']) {
        const deps = services[name]?.depends_on ?? {};
        assert.equal(deps.migrate?.condition, 'service_completed_successfully', `${name} -> migrate`);
        assert.equal(deps['temporal-admin-tools']?.condition, 'service_completed_successfully', `${name} -> admin-tools`);
        for (const node of [...weaviateNodes, 's3']) assert.equal(deps[node]?.condition, 'service_healthy', `${name} -> ${node}`);
      }
      assert.equal(services.migrate?.depends_on?.postgres?.condition, 'service_healthy');
      assert.equal(services['temporal-admin-tools']?.depends_on?.temporal?.condition, 'service_healthy');
    });

    it('has health checks on the long-running services', function () {
      for (const name of ['postgres', 'temporal', ...weaviateNodes, 's3', 'api', 'worker', 'lb']) {
        const check = services[name]?.healthcheck;
        assert.ok(check && !check.disable && check.test, `${name} has no health check`);
      }
    });

    it('runs several API and worker replicas that can scale horizontally', function () {
      for (const name of ['api', 'worker']) {
        const service = services[name] ?? {};
        assert.ok((service.deploy?.replicas ?? 1) >= 2, `${name} should declare deploy.replicas >= 2`);
        assert.equal(service.container_name, undefined, `${name} cannot scale with a fixed container_name`);
        assert.deepEqual(service.ports ?? [], [], `${name} cannot scale with a published host port`);
      }
    });
  });

  describe('Dockerfile', function () {
    const text = () => readFileSync(dockerfile, 'utf8');
    const instructions = () =>
      text()
        .replace(/\\\n/g, ' ')
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith('#'));

    it('is based on Node 24 (bookworm slim)', function () {
      const froms = instructions().filter((l) => /^FROM\s/i.test(l));
      assert.ok(froms.length >= 2, 'expected a multi-stage build');
      const external = froms.map((l) => l.split(/\s+/)[1] ?? '').filter((img) => img.includes(':') || img.includes('/'));
      assert.deepEqual([...new Set(external)], ['node:24-bookworm-slim']);
    });

    it('installs exactly scripts/runtime-packages.txt in the runtime stage, generates the Prisma client and drops root', function () {
      const all = instructions().join('\n');
      const runtime = all.slice(all.indexOf('\nFROM base AS runtime'));
      // The list the setup script installs, copied in and installed whole; no package named on the side but tini.
      assert.match(runtime, /^COPY scripts\/runtime-packages\.txt (\S+)$/m);
      const install = runtime.split('\n').find((l) => /apt-get install/.test(l)) ?? '';
      assert.match(install, /grep -v '\^#' \/tmp\/runtime-packages\.txt \| xargs apt-get install -y --no-install-recommends tini /);
      assert.match(all, /npm ci --omit=dev/);
      assert.match(all, /scripts\/prisma\.sh generate/);
      const lastStage = all.slice(all.lastIndexOf('\nFROM '));
      assert.match(lastStage, /^USER\s+(?!root\b|0\b)\S+/m, 'the final stage must run as a non-root user');
      assert.match(lastStage, /^CMD\s+\[.*"api\/server\.ts"\]/m, 'the default command must start the API');
    });

    it('has a .dockerignore that keeps local state out of the build context', function () {
      const ignored = readFileSync(path.join(root, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim());
      for (const entry of ['node_modules', '.data', 'generated', '.git', '.env']) {
        assert.ok(ignored.includes(entry), `.dockerignore lacks ${entry}`);
      }
    });
  });
});
