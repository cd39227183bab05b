/**
 * The cluster profile under faults (issue #46):
 *
 *   npm run faults:cluster
 *
 * Starts the cluster profile on free ports (scripts/cluster.ts: the Temporal server on PostgreSQL,
 * 3 Weaviate nodes at replication factor 3, the S3 object store, two APIs behind HAProxy, two
 * workers) with throw-away state, then, while clients create FAULT_DOCUMENTS documents
 * (use_original_as_rewritten=true, single uploads spread over the load window), a few audio
 * documents, transcripts and voice splits, and one client searches without pause:
 *   kill -9 one worker (a supervisor starts it again 10 s later), kill -9 one API process (the same),
 *   kill -9 the Weaviate node that leads its raft cluster (back 15 s later), restart the Temporal
 *   server (kill -9, then start) and the object store (likewise).
 * Afterwards it checks, and exits non-zero if any fails: every document of the knowledge base
 * embedded, each with exactly its chunks in the index (a QUORUM read) and no other chunk of the
 * knowledge base (no orphan vector), each charged one usage event per category, every stored file
 * present, every transcript completed with text, every voice split into samples whose files exist,
 * no document pipeline still open. It reports the searches (longest gap between answers, failures
 * by status) and the creations, and writes the `cluster-faults` section of bench/RESULTS.md.
 * Bounded: the whole run stops itself after FAULT_DEADLINE_SECONDS (default 900).
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';
import { loadConfig, setting } from '../lib/platform/config.js';
import { createServices } from '../lib/services.js';
import { documentFiles } from '../lib/platform/storage.js';
import { documentWorkflowId } from '../lib/contracts/document-pipeline.js';
import { processingErrorOf, processingStateColumns } from '../lib/knowledge/state.js';
import { connectTemporalClient, isWorkflowRunning } from '../lib/platform/temporal.js';
import { dropDatabase } from '../scripts/stack.js';
import { freeClusterPorts, startCluster, type Cluster } from '../scripts/cluster.js';
import { concatWithPauses, libraryPassage, speak } from '../test/support/audio.js';
import { describeLoad, fmt, machineLine, percentile, readLoad, writeSection, type LoadReading } from './support/results.js';

const DOCUMENTS = setting(process.env, 'FAULT_DOCUMENTS');
const LOAD_SECONDS = setting(process.env, 'FAULT_LOAD_SECONDS');
const DEADLINE_SECONDS = setting(process.env, 'FAULT_DEADLINE_SECONDS');
const CREATORS = 4;
const AUDIO_DOCUMENTS = 3;
const TRANSCRIPTS = 3;
const VOICES = 2;
const adminKey = `adm_${crypto.randomBytes(12).toString('hex')}`;
const runStarted = Date.now();
const since = (t0: number) => (Date.now() - t0) / 1000;
const say = (line: string) => process.stderr.write(`[faults ${fmt(since(runStarted))} s] ${line}\n`);
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

// The run ends itself, whatever happens: a hung cluster must not hold a machine.
const deadline = setTimeout(() => {
  say(`deadline of ${DEADLINE_SECONDS} s reached: stopping`);
  process.exit(2);
}, DEADLINE_SECONDS * 1000);
deadline.unref();

interface Outcome {
  at: number;
  status: number | 'network';
  ms: number;
}

/** The fields of the answers this run reads. */
interface Answer {
  api_key?: string;
  id?: string;
  status?: string | { splitting?: string; embedding?: string };
  text?: string | null;
  samples?: Array<{ index: number }>;
}

/** One HTTP call through the load balancer, never throwing: its status (or 'network') and time. */
async function call(url: string, init: RequestInit = {}): Promise<{ outcome: Outcome; body: Answer | null }> {
  const started = Date.now();
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(60_000) });
    const text = await res.text();
    let body: Answer | null = null;
    try {
      body = JSON.parse(text) as Answer;
    } catch {
      /* not JSON */
    }
    return { outcome: { at: started, status: res.status, ms: Date.now() - started }, body };
  } catch {
    return { outcome: { at: started, status: 'network', ms: Date.now() - started }, body: null };
  }
}

const form = (fields: Record<string, string | { name: string; content: Buffer }>) => {
  const fd = new FormData();
  for (const [k, v] of Object.entries(fields)) {
    if (typeof v === 'string') fd.append(k, v);
    else fd.append(k, new Blob([new Uint8Array(v.content)]), v.name);
  }
  return fd;
};

/** The longest time without an answered request within the window (its edges included), and when it began; seconds from `from`. */
function longestGap(outcomes: Outcome[], from: number, to: number): string {
  const ok = outcomes.filter((o) => o.status === 200 || o.status === 201).map((o) => o.at + o.ms).sort((a, b) => a - b);
  let gap = { ms: 0, at: from };
  let last = from;
  for (const t of [...ok, to]) {
    if (t - last > gap.ms) gap = { ms: t - last, at: last };
    last = t;
  }
  return `${fmt(gap.ms / 1000)} s (from ${fmt((gap.at - from) / 1000)} s)`;
}

function failuresByStatus(outcomes: Outcome[]): string {
  const counts = new Map<string, number>();
  for (const o of outcomes) if (o.status !== 200 && o.status !== 201) counts.set(String(o.status), (counts.get(String(o.status)) ?? 0) + 1);
  return counts.size ? [...counts].map(([s, n]) => `${n} × ${s}`).join(', ') : 'none';
}

async function main() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dwb-faults-'));
  const databaseUrl = `${setting(process.env, 'TEST_DATABASE_BASE_URL')}/dwb_faults_${process.pid}`;
  const databases = [databaseUrl, `${databaseUrl}_temporal`, `${databaseUrl}_temporal_visibility`];
  for (const db of databases) await dropDatabase(db);
  // Other work on the machine stretches every time below: the reading says how quiet it was.
  const loadBefore = await readLoad();
  say('bundling the workflows');
  const bundle = await bundleWorkflowCode({ workflowsPath: fileURLToPath(new URL('../workflows/index.ts', import.meta.url)), logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: console.error } });
  const bundlePath = path.join(dataDir, 'workflow-bundle.js');
  fs.writeFileSync(bundlePath, bundle.code);

  say('starting the cluster');
  const cluster = await startCluster({
    dataDir,
    databaseUrl,
    ports: await freeClusterPorts(),
    adminApiKey: adminKey,
    s3: { accessKey: 'faultrun', secretKey: crypto.randomBytes(16).toString('hex'), bucket: 'dwb' },
    workflowBundlePath: bundlePath,
    env: {
      LOG_LEVEL: 'warn',
      // The clients create and search faster than the default per-key rates allow; the limits are tested elsewhere.
      REQUESTS_PER_MINUTE_KNOWLEDGE_BASE: '0',
      REQUESTS_PER_MINUTE_TRANSCRIPTION: '0',
      REQUESTS_PER_MINUTE_VOICES: '0',
    },
    log: say,
  });
  let results: { text: string; problems: string[] };
  try {
    results = await run(cluster, loadBefore);
  } finally {
    await cluster.stop();
    for (const db of databases) await dropDatabase(db).catch(() => undefined);
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  // A run that found problems is recorded as it is, then fails.
  writeSection('cluster-faults', results.text);
  if (results.problems.length) throw new Error(`${results.problems.length} problems (first: ${results.problems[0]})`);
}

async function run(cluster: Cluster, loadBefore: LoadReading): Promise<{ text: string; problems: string[] }> {
  const api = cluster.apiUrl;
  const services = createServices(loadConfig({ ...cluster.env, STORAGE_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'dwb-faults-check-')) }), 'fault-check');
  const admin = { 'X-API-Key': adminKey };
  const partnerName = `faults-${process.pid}`;
  const partner = await call(`${api}/api/partners/${partnerName}`, { method: 'POST', headers: admin });
  assert.equal(partner.outcome.status, 201, JSON.stringify(partner.body));
  const key = { 'X-API-Key': partner.body!.api_key! };
  const kb = 'faults';
  assert.equal((await call(`${api}/api/knowledgebases/${partnerName}`, { method: 'POST', headers: key, body: form({ name: kb }) })).outcome.status, 201);
  assert.equal((await call(`${api}/api/folders/${partnerName}/${kb}`, { method: 'POST', headers: key, body: form({ name: 'notes' }) })).outcome.status, 201);

  say('making the audio (speech synthesis)');
  const clips = await Promise.all(Array.from({ length: Math.max(AUDIO_DOCUMENTS, TRANSCRIPTS) }, (_, i) => speak(libraryPassage[i % libraryPassage.length]!, 'flite-slt')));
  const voiceRecording = fs.readFileSync(await concatWithPauses(await Promise.all(libraryPassage.slice(0, 4).map((s) => speak(s, 'flite-slt'))), 1.0));

  const creations: Outcome[] = [];
  const searches: Outcome[] = [];
  const events: Array<{ at: number; what: string }> = [];
  const t0 = Date.now();
  const loadEnds = t0 + LOAD_SECONDS * 1000;
  const event = (what: string) => {
    events.push({ at: since(t0), what });
    say(what);
  };

  // Creators: DOCUMENTS single uploads spread evenly over the load window; a refused or lost one is sent again.
  const perCreator = Math.ceil(DOCUMENTS / CREATORS);
  const interval = (LOAD_SECONDS * 1000 * 0.9) / perCreator;
  const creators = Array.from({ length: CREATORS }, async (_, c) => {
    for (let i = 0; i < perCreator && c * perCreator + i < DOCUMENTS; i++) {
      const n = c * perCreator + i;
      const turn = t0 + i * interval;
      if (turn > Date.now()) await pause(turn - Date.now());
      const text = `Document ${n} of the fault run.\n\nIt says something about topic number ${n}, and ${'some more words on it. '.repeat(20)}\n`;
      for (;;) {
        const r = await call(`${api}/api/documents/${partnerName}/${kb}`, {
          method: 'POST',
          headers: key,
          body: form({ type: 'file', folder: 'notes', use_original_as_rewritten: 'true', file: { name: `doc-${n}.txt`, content: Buffer.from(text) } }),
        });
        creations.push(r.outcome);
        if (r.outcome.status === 201) break;
        await pause(500);
      }
    }
  });

  // The searcher: one search after another, from the start of the load until the last creation
  // has its answer (on a loaded machine the creators' schedule runs past LOAD_SECONDS).
  let creating = true;
  const searcher = (async () => {
    while (creating || Date.now() < loadEnds) {
      const r = await call(`${api}/api/rag-test/search`, { method: 'POST', headers: { ...key, 'content-type': 'application/json' }, body: JSON.stringify({ partner: partnerName, kb, user_message: `topic number ${searches.length % 50}` }) });
      searches.push(r.outcome);
      await pause(100);
    }
  })();

  // Audio documents, transcripts and voices, submitted early (each retried until accepted).
  const accepted = async (what: string, send: () => Promise<{ outcome: Outcome; body: Answer | null }>, ok: number) => {
    for (;;) {
      const r = await send();
      if (r.outcome.status === ok) return r.body ?? {};
      say(`${what}: ${r.outcome.status}, again`);
      await pause(1000);
    }
  };
  const media = (async () => {
    await pause(3000);
    const transcripts: string[] = [];
    const voices: string[] = [];
    for (let i = 0; i < AUDIO_DOCUMENTS; i++) {
      await accepted(`audio document ${i}`, () => call(`${api}/api/documents/${partnerName}/${kb}`, { method: 'POST', headers: key, body: form({ type: 'file', folder: 'notes', use_original_as_rewritten: 'true', file: { name: `audio-${i}.wav`, content: fs.readFileSync(clips[i]!) } }) }), 201);
    }
    for (let i = 0; i < TRANSCRIPTS; i++) {
      const t = await accepted(`transcript ${i}`, () => call(`${api}/v2/transcript`, { method: 'POST', headers: key, body: form({ audio: { name: `t-${i}.wav`, content: fs.readFileSync(clips[i]!) } }) }), 200);
      // The transcription interface answers the transcript's path as its id (spec 2.3).
      transcripts.push(String(t.id).startsWith('/') ? String(t.id) : `/v2/transcript/${t.id}`);
    }
    for (let i = 0; i < VOICES; i++) {
      const name = `voice-${i}`;
      await accepted(`voice ${i}`, () => call(`${api}/api/voices/${partnerName}`, { method: 'POST', headers: key, body: form({ name, file: { name: 'voice.wav', content: voiceRecording } }) }), 201);
      voices.push(name);
    }
    return { transcripts, voices };
  })();

  // The faults.
  const at = async (seconds: number) => {
    const when = t0 + seconds * 1000;
    if (when > Date.now()) await pause(when - Date.now());
  };
  const faults = (async () => {
    await at(15);
    await cluster.member('worker1').process.stop('SIGKILL');
    event('kill -9 worker1');
    await at(25);
    await cluster.member('worker1').start();
    event('worker1 started again');
    await at(30);
    await cluster.member('api1').process.stop('SIGKILL');
    event('kill -9 api1');
    await at(40);
    await cluster.member('api1').start();
    event('api1 started again');
    await at(45);
    const stats = (await (await fetch(`${cluster.weaviateNodeUrls[0]}/v1/cluster/statistics`)).json()) as { statistics: Array<{ leaderId?: string }> };
    const leader = stats.statistics.find((s) => s.leaderId)?.leaderId ?? 'node3';
    await cluster.member(`weaviate-${leader}`).process.stop('SIGKILL');
    event(`kill -9 Weaviate ${leader} (the raft leader)`);
    await at(60);
    await cluster.member(`weaviate-${leader}`).start();
    event(`Weaviate ${leader} started again`);
    await at(70);
    await cluster.member('temporal-server').process.stop('SIGKILL');
    event('kill -9 the Temporal server');
    await cluster.member('temporal-server').start();
    event('Temporal server started again');
    await at(90);
    await cluster.member('s3').process.stop('SIGKILL');
    event('kill -9 the object store');
    await cluster.member('s3').start();
    event('object store started again');
  })();

  await Promise.all(creators);
  creating = false;
  await Promise.all([searcher, faults]);
  const { transcripts, voices } = await media;
  event(`load over: ${creations.filter((o) => o.status === 201).length} documents created, ${searches.length} searches`);

  // Everything submitted ends done.
  const kbRow = await services.db.knowledgeBase.findFirstOrThrow({ where: { name: kb, partner: { name: partnerName } } });
  const waitFor = async (what: string, done: () => Promise<boolean>) => {
    const started = Date.now();
    while (!(await done().catch(() => false))) {
      if (Date.now() - started > 600_000) throw new Error(`${what} did not happen within 600 s`);
      await pause(1000);
    }
    event(`${what} (${fmt(since(started))} s after the load)`);
  };
  await waitFor('every document embedded', async () => {
    const pending = await services.db.document.count({ where: { knowledgeBaseId: kbRow.id, OR: [{ embeddingStatus: null }, { embeddingStatus: { not: 'success' } }] } });
    return pending === 0;
  });
  await waitFor('every transcript completed', async () => {
    for (const id of transcripts) if ((await call(`${api}${id}`, { headers: key })).body?.status !== 'completed') return false;
    return true;
  });
  await waitFor('every voice split', async () => {
    for (const name of voices) {
      const status = (await call(`${api}/api/voices/${partnerName}/${name}`, { headers: key })).body?.status;
      if (typeof status !== 'object' || status.splitting !== 'completed' || status.embedding === 'in_progress') return false;
    }
    return true;
  });

  // The checks.
  const problems: string[] = [];
  const docs = await services.db.document.findMany({ where: { knowledgeBaseId: kbRow.id }, select: { id: true, ...processingStateColumns, embeddingChunkCount: true, originalExtension: true } });
  let chunks = 0;
  let missingFiles = 0;
  for (const d of docs) {
    if (d.processingState) problems.push(`document ${d.id}: ${processingErrorOf(d)}`);
    const indexes = (await services.index.listDocumentChunkIndexes(d.id)).sort((a, b) => a - b);
    const expected = Array.from({ length: d.embeddingChunkCount ?? -1 }, (_, i) => i);
    if (JSON.stringify(indexes) !== JSON.stringify(expected)) problems.push(`document ${d.id}: chunks ${JSON.stringify(indexes)} in the index, ${d.embeddingChunkCount} recorded`);
    chunks += indexes.length;
    for (const file of [documentFiles.original(d.id, d.originalExtension ?? 'txt'), documentFiles.rewritten(d.id)]) {
      if (!(await services.storage.exists(file))) {
        missingFiles++;
        problems.push(`document ${d.id}: ${file} is missing from the object store`);
      }
    }
  }
  // Replicas repair each other in the background: the whole knowledge base's count may lag a moment behind the QUORUM reads.
  let kbChunks = -1;
  for (let i = 0; i < 60 && kbChunks !== chunks; i++) {
    kbChunks = await services.index.countKnowledgeBaseChunks(kbRow.id);
    if (kbChunks !== chunks) await pause(2000);
  }
  if (kbChunks !== chunks) problems.push(`the index holds ${kbChunks} chunks of the knowledge base, its documents ${chunks} (orphans or losses)`);
  const usage = await services.db.usageEvent.groupBy({ by: ['documentId', 'category'], where: { knowledgeBaseId: kbRow.id }, _count: { _all: true } });
  const twice = usage.filter((u) => u._count._all > 1);
  for (const u of twice) problems.push(`document ${u.documentId}: ${u._count._all} ${u.category} usage events`);
  const charged = new Set(usage.filter((u) => u.category === 'digitization').map((u) => u.documentId));
  const uncharged = docs.filter((d) => !charged.has(d.id)).length;
  if (uncharged) problems.push(`${uncharged} documents without their digitization usage event`);
  for (const id of transcripts) {
    const t = (await call(`${api}${id}`, { headers: key })).body;
    if (!t?.text?.trim()) problems.push(`transcript ${id} has no text`);
  }
  let samples = 0;
  for (const name of voices) {
    const v = (await call(`${api}/api/voices/${partnerName}/${name}`, { headers: key })).body ?? {};
    for (const s of v.samples ?? []) {
      samples++;
      const file = await call(`${api}/api/voices/${partnerName}/${name}/samples/${s.index}`, { headers: key });
      if (file.outcome.status !== 200) problems.push(`voice ${name}: sample ${s.index} answers ${file.outcome.status}`);
    }
    if (!v.samples?.length) problems.push(`voice ${name} has no samples`);
  }
  const temporal = await connectTemporalClient(cluster.temporalAddress, 'default');
  let open = 0;
  for (const d of docs) if (await isWorkflowRunning(temporal, documentWorkflowId(d.id))) open++;
  await temporal.connection.close();
  if (open) problems.push(`${open} document pipelines still open`);
  await services.db.$disconnect();

  const searchMs = searches.filter((o) => o.status === 200).map((o) => o.ms);
  const createMs = creations.filter((o) => o.status === 201).map((o) => o.ms);
  const searchesEnd = Math.max(...searches.map((o) => o.at + o.ms));
  // The creators' schedule ends before the load does: their window closes with their last answer.
  const creationsEnd = Math.max(...creations.map((o) => o.at + o.ms));
  const lines = [
    '# The cluster profile under faults (`npm run faults:cluster`)',
    '',
    `Run ${new Date(runStarted).toISOString()} (${fmt(since(runStarted), 0)} s in all) on ${machineLine()}. Before: ${describeLoad(loadBefore)}. The cluster profile of scripts/cluster.ts on free ports, everything on this one machine; the clients are this process.`,
    '',
    '## What happened',
    '',
    `${docs.length} documents (${DOCUMENTS} text uploads with use_original_as_rewritten=true from ${CREATORS} clients over ${LOAD_SECONDS} s, and ${AUDIO_DOCUMENTS} audio documents), ${transcripts.length} transcripts and ${voices.length} voice splits, while one client searched without pause:`,
    '',
    '| At (s) | Event |',
    '|---:|---|',
    ...events.map((e) => `| ${fmt(e.at)} | ${e.what} |`),
    '',
    '## Checks',
    '',
    '| Check | Result |',
    '|---|---|',
    `| Every document embedded, each with exactly its chunks in the index (QUORUM reads) | ${docs.length} documents, ${chunks} chunks: ${problems.some((p) => /chunks|processing/.test(p)) ? '**failed**' : 'held'} |`,
    `| No orphan vector (the knowledge base's chunks in the index = its documents' chunks) | ${kbChunks} = ${chunks}: ${kbChunks === chunks ? 'held' : '**failed**'} |`,
    `| No usage event twice (per document and category) | ${twice.length === 0 ? 'held' : `**failed** (${twice.length})`}; ${uncharged === 0 ? 'every document charged' : `**${uncharged} uncharged**`} |`,
    `| No stored file missing (originals and rewritten content in the object store; voice samples served) | ${missingFiles === 0 ? 'held' : `**failed** (${missingFiles})`}; ${samples} samples |`,
    `| Transcripts completed with text | ${transcripts.length} of ${TRANSCRIPTS} |`,
    `| No document pipeline left open | ${open === 0 ? 'held' : `**failed** (${open})`} |`,
    '',
    '## Clients during the faults',
    '',
    '| Client | Requests | Answered | p50 / p99 (ms) | Longest gap between answers | Failed, by status |',
    '|---|---:|---:|---:|---:|---|',
    `| Searches (POST /api/rag-test/search, one after another) | ${searches.length} | ${searchMs.length} | ${fmt(percentile(searchMs, 50), 0)} / ${fmt(percentile(searchMs, 99), 0)} | ${longestGap(searches, t0, searchesEnd)} | ${failuresByStatus(searches)} |`,
    `| Document creations (single uploads, a failed one sent again) | ${creations.length} | ${createMs.length} | ${fmt(percentile(createMs, 50), 0)} / ${fmt(percentile(createMs, 99), 0)} | ${longestGap(creations, t0, creationsEnd)} | ${failuresByStatus(creations)} |`,
    '',
    problems.length ? `**${problems.length} problems:**\n\n${problems.slice(0, 30).map((p) => `- ${p}`).join('\n')}` : 'No problem found.',
  ];
  return { text: lines.join('\n'), problems };
}

main().then(
  () => process.exit(0),
  (err) => {
    say(`failed: ${(err as Error).stack ?? err}`);
    process.exit(1);
  },
);
