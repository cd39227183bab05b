/**
 * Creation and ingestion in the cluster profile beside the single-machine profile (issue #46), in
 * one run:
 *
 *   npm run bench:cluster
 *
 * Each profile in turn, alone on the machine:
 *   single machine: what `scripts/start` runs: the Temporal dev server (SQLite file), one Weaviate,
 *     files in a local directory, one API process and one worker (the test stack's servers);
 *   cluster: what `scripts/start --cluster` runs (scripts/cluster.ts): the Temporal server on
 *     PostgreSQL, 3 Weaviate nodes at replication factor 3 behind HAProxy, the S3 object store, two
 *     API processes behind HAProxy, two workers.
 * (a) Ingestion of BENCH_DOCUMENTS (1,000) generated documents through the API and the workflows:
 *     batch uploads of 20 (4 at a time, use_original_as_rewritten=true), from the first upload to the
 *     last document `success`.
 * (b) Then document creation by BENCH_CLIENTS (32) clients, single file uploads, back to back and
 *     paced at BENCH_PACED_RATE (300) documents/s for BENCH_CREATE_SECONDS (30) each, with the
 *     workers stopped (only creation is measured), as `npm run bench:ingestion` measures it.
 * The clients are this process. Writes the `cluster-profile` section of bench/RESULTS.md.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dropDatabase } from '../scripts/stack.js';
import { freeClusterPorts, startCluster, type Cluster } from '../scripts/cluster.js';
import { testStack } from '../test/support/stack.js';
import { startApiProcess, startBenchStack, startWorker, stopTestStack, type RunningWorker } from './audio-system.js';
import { generateCorpus } from './support/corpus.js';
import { leanPoster, multipartBody } from './support/lean-client.js';
import { creationRow, ingestThroughApi, measureCreation, newBenchKnowledgeBase, type CreationResult, type IngestionResult } from './support/creation.js';
import { describeLoad, fmt, machineLine, readLoad, writeSection } from './support/results.js';
import { setting } from '../lib/platform/config.js';

const DOCUMENTS = setting(process.env, 'BENCH_DOCUMENTS');
const CLIENTS = setting(process.env, 'BENCH_CLIENTS');
const CREATE_SECONDS = setting(process.env, 'BENCH_CREATE_SECONDS');
const PACED_RATE = setting(process.env, 'BENCH_PACED_RATE');
const say = (line: string) => process.stderr.write(`[bench:cluster] ${line}\n`);
/** The clients create faster than the default per-key rate; the limits are measured elsewhere. */
const unlimited = { REQUESTS_PER_MINUTE_KNOWLEDGE_BASE: '0' };

interface ProfileResult {
  name: string;
  creation: CreationResult[];
  ingestion: IngestionResult;
  cpuColumns: string[];
}

/** The process of a running server, found by its command line (the dev server has no handle here). */
function pidOf(match: (args: string[]) => boolean): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (match(fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0'))) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** PostgreSQL's processes (its backends serve the API, Temporal and the benchmark alike). */
const postgresPids = () => pidOf((args) => args[0]!.startsWith('postgres'));

/** Single uploads by CLIENTS clients, back to back and paced. */
async function creationRows(apiUrl: string, adminKey: string, databaseUrl: string, cpu: Record<string, number[] | (() => number[])>): Promise<CreationResult[]> {
  const kb = await newBenchKnowledgeBase(apiUrl, adminKey, databaseUrl);
  const client = leanPoster(CLIENTS);
  const note = 'A short note of about two hundred characters, created to measure how fast the service accepts new documents and starts their workflows. It is plain text.\n';
  const upload = () => {
    const { body, contentType } = multipartBody([
      { name: 'type', value: 'file' },
      { name: 'folder', value: kb.folder },
      { name: 'use_original_as_rewritten', value: 'true' },
      { name: 'file', filename: 'note.txt', content: note },
    ]);
    return client.post(`${apiUrl}/api/documents/${kb.name}/${kb.kb}`, { 'X-API-Key': kb.key }, body, contentType);
  };
  try {
    const common = { clients: CLIENTS, seconds: CREATE_SECONDS, docsPerRequest: 1, request: upload, cpu };
    return [
      await measureCreation({ ...common, label: 'single file upload, back to back' }),
      await measureCreation({ ...common, label: `single file upload, paced at ${PACED_RATE} documents/s`, documentsPerSecond: PACED_RATE }),
    ];
  } finally {
    client.close();
  }
}

async function singleMachine(corpus: Array<{ name: string; text: string }>): Promise<ProfileResult> {
  say('single machine: starting the Temporal dev server, Weaviate and PostgreSQL');
  await startBenchStack();
  // Files in a local directory that the API and the worker share, as `scripts/start` keeps them.
  const env = { ...unlimited, STORAGE_URL: '', S3_ENDPOINT: '', AWS_ACCESS_KEY_ID: '', AWS_SECRET_ACCESS_KEY: '', STORAGE_DIR: path.join(testStack().workDir, 'storage') };
  const api = await startApiProcess(env);
  let worker: RunningWorker | null = null;
  try {
    const temporal = pidOf((args) => args.includes('start-dev') && args[args.indexOf('--port') + 1] === testStack().temporalAddress.split(':').pop());
    // Ingestion first: the documents of the creation rows start workflows that no worker runs then.
    say('single machine: ingestion');
    worker = await startWorker(env);
    const w = worker;
    const ingestion = await ingestThroughApi({
      apiUrl: api.url,
      adminKey: testStack().adminApiKey,
      databaseUrl: testStack().databaseUrl,
      corpus,
      uploadBatch: 20,
      alive: () => (w.child.exitCode !== null || w.child.signalCode !== null ? 'the worker exited' : null),
      progress: (line) => say(`single machine: ${line}`),
    });
    await worker.kill();
    worker = null;
    say('single machine: creation');
    const creation = await creationRows(api.url, testStack().adminApiKey, testStack().databaseUrl, { API: [api.pid], 'Temporal server': temporal, PostgreSQL: postgresPids });
    return { name: 'single machine (Temporal dev server, 1 Weaviate, local files, 1 API, 1 worker)', creation, ingestion, cpuColumns: ['API', 'Temporal server'] };
  } finally {
    await worker?.kill();
    await api.stop();
    await stopTestStack();
  }
}

async function clusterProfile(corpus: Array<{ name: string; text: string }>): Promise<ProfileResult> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dwb-bench-cluster-'));
  const databaseUrl = `${setting(process.env, 'TEST_DATABASE_BASE_URL')}/dwb_bench_cluster_${process.pid}`;
  const databases = [databaseUrl, `${databaseUrl}_temporal`, `${databaseUrl}_temporal_visibility`];
  const adminKey = `adm_${crypto.randomBytes(12).toString('hex')}`;
  for (const db of databases) await dropDatabase(db);
  say('cluster: starting');
  let cluster: Cluster | null = null;
  try {
    cluster = await startCluster({
      dataDir,
      databaseUrl,
      ports: await freeClusterPorts(),
      adminApiKey: adminKey,
      s3: { accessKey: 'bench', secretKey: crypto.randomBytes(16).toString('hex'), bucket: 'dwb' },
      env: { ...unlimited, LOG_LEVEL: 'warn' },
      log: (line) => say(`cluster: ${line}`),
    });
    const c = cluster;
    const pids = (...names: string[]) => names.map((n) => c.member(n).process.child.pid!);
    say('cluster: ingestion');
    const ingestion = await ingestThroughApi({
      apiUrl: c.apiUrl,
      adminKey,
      databaseUrl,
      corpus,
      uploadBatch: 20,
      alive: () => (['worker1', 'worker2'].every((w) => c.member(w).process.child.exitCode !== null) ? 'both workers exited' : null),
      progress: (line) => say(`cluster: ${line}`),
    });
    // Creation alone: the workers stop meanwhile.
    for (const w of ['worker1', 'worker2']) await c.member(w).process.stop();
    say('cluster: creation');
    const creation = await creationRows(c.apiUrl, adminKey, databaseUrl, { API: pids('api1', 'api2'), 'Temporal server': pids('temporal-server'), PostgreSQL: postgresPids, 'Object store': pids('s3'), HAProxy: pids('haproxy') });
    return { name: 'cluster (Temporal server on PostgreSQL, 3 Weaviate nodes ×3 replicas, S3, 2 APIs behind HAProxy, 2 workers)', creation, ingestion, cpuColumns: ['API', 'Temporal server', 'HAProxy'] };
  } finally {
    await cluster?.stop();
    for (const db of databases) await dropDatabase(db).catch(() => undefined);
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main() {
  const runStarted = new Date();
  const before = await readLoad();
  const corpus = generateCorpus(DOCUMENTS);
  const single = await singleMachine(corpus);
  const cluster = await clusterProfile(corpus);
  const after = await readLoad();
  const cpuColumns = ['API', 'Temporal server', 'PostgreSQL', 'Object store', 'HAProxy'];
  const lines = [
    '# The cluster profile beside the single machine (`npm run bench:cluster`)',
    '',
    `Run ${runStarted.toISOString()} on ${machineLine()}. Before: ${describeLoad(before)}. After: ${describeLoad(after)}. Each profile alone on the machine, one after the other; every process of both on these ${os.availableParallelism()} cores; the clients are the benchmark's process.`,
    '',
    `**Creation**: ${CLIENTS} clients, single file uploads (use_original_as_rewritten=true), ${CREATE_SECONDS} s a row after a 1 s warm-up, no worker running; a request's time runs from its turn (paced) or its sending (back to back) to the answer, which comes after the document's workflow has started. CPU per document: of the processes named (/proc), of this client, and of the whole machine.`,
    '',
    `| Profile | Request | Requests | Documents | Documents/s | p50 (ms) | p99 (ms) | Over 100 ms | ${cpuColumns.map((c) => `${c} CPU per document (ms)`).join(' | ')} | Clients CPU per document (ms) | Machine CPU per document (ms) | Failed |`,
    `|---|---|---:|---:|---:|---:|---:|---:|${cpuColumns.map(() => '---:|').join('')}---:|---:|---:|`,
    ...[single, cluster].flatMap((p) => p.creation.map((r) => `| ${p.name.split(' (')[0]} ${creationRow(r, cpuColumns)}`)),
    '',
    `**Ingestion** of ${DOCUMENTS} generated documents (bench/support/corpus.ts) through the API and the workflows: ${DOCUMENTS / 20} batch uploads of 20 files, 4 at a time, from the first upload to the last document \`success\`.`,
    '',
    '| Profile | Time (s) | Documents/s | Chunks | All uploads accepted after (s) | Failed |',
    '|---|---:|---:|---:|---:|---:|',
    ...[single, cluster].map((p) => `| ${p.name} | ${fmt(p.ingestion.ms / 1000)} | ${fmt(DOCUMENTS / (p.ingestion.ms / 1000))} | ${p.ingestion.chunks} | ${fmt(p.ingestion.acceptedMs / 1000)} | ${p.ingestion.failed} |`),
  ];
  writeSection('cluster-profile', lines.join('\n'));
}

await main();
process.exit(0);
