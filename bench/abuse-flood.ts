/**
 * One partner floods, another works: the second partner's latency and data under the flood.
 *
 *   npm run bench:flood
 *
 * A throw-away system (the test stack: Temporal, Weaviate, a fresh database) with the API as its
 * own process, at its default limits (REQUESTS_PER_MINUTE_KNOWLEDGE_BASE = 1200 per key).
 * - Partner B works normally: an open loop of BENCH_RATE (15) requests a second for BENCH_SECONDS
 *   (40): create an empty document, read it back, list its knowledge bases, read the KB statistics,
 *   in turn. Its latency is measured from this process.
 * - Partner A floods: BENCH_FLOOD_CONNECTIONS (32) connections sending as fast as they are answered
 *   (GETs of its knowledge bases and document creations), from a process of its own, so that the
 *   flood's client never shares an event loop with B's.
 * Unloaded: B alone. Loaded: the same with A's flood running. BENCH_ROUNDS (2) rounds of both, so
 * that both see the machine's other load alike; latencies are pooled per condition. The goal: B's p99 under the flood at
 * most 2x its p99 alone, and nothing lost: every document either partner was told was created
 * (201) is in the database, and B saw no refusal. Writes its section of bench/RESULTS.md.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { repoRoot } from '../scripts/stack.js';
import { machine, percentile, startApiProcess, startBenchStack, stopTestStack, writeSection } from './audio-system.js';
import { testStack } from '../test/support/stack.js';
import { setting } from '../lib/platform/config.js';

const seconds = Number(process.env.BENCH_SECONDS ?? 40);
const rate = setting(process.env, 'BENCH_RATE');
const floodConnections = setting(process.env, 'BENCH_FLOOD_CONNECTIONS');
const rounds = Number(process.env.BENCH_ROUNDS ?? 2);

interface Partner {
  name: string;
  key: string;
  kb: string;
}

async function newPartner(apiUrl: string, label: string): Promise<Partner> {
  const name = `flood-${label}-${process.pid}`;
  const admin = { 'X-API-Key': testStack().adminApiKey };
  const p = await fetch(`${apiUrl}/api/partners/${name}`, { method: 'POST', headers: admin, body: new FormData() });
  if (p.status !== 201) throw new Error(`partner: ${p.status} ${await p.text()}`);
  const key = ((await p.json()) as { api_key: string }).api_key;
  const kbForm = new FormData();
  kbForm.append('name', 'kb');
  const kb = await fetch(`${apiUrl}/api/knowledgebases/${name}`, { method: 'POST', headers: admin, body: kbForm });
  if (kb.status !== 201) throw new Error(`kb: ${kb.status} ${await kb.text()}`);
  const folderForm = new FormData();
  folderForm.append('name', 'notes');
  const folder = await fetch(`${apiUrl}/api/folders/${name}/kb`, { method: 'POST', headers: admin, body: folderForm });
  if (folder.status !== 201) throw new Error(`folder: ${folder.status} ${await folder.text()}`);
  return { name, key, kb: 'kb' };
}

const createForm = (name: string) => {
  const f = new FormData();
  f.append('name', name);
  f.append('folder', 'notes');
  f.append('type', 'file');
  return f;
};

/** The flood: runs in its own process (`abuse-flood.ts flood <url> <partner> <key> <ms> <connections>`), prints its counts as JSON. */
async function flood(url: string, partner: string, key: string, ms: number, connections: number): Promise<void> {
  const counts: Record<string, number> = {};
  let created = 0;
  const until = Date.now() + ms;
  let n = 0;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (Date.now() < until) {
        const i = n++;
        try {
          const res =
            i % 4 === 0
              ? await fetch(`${url}/api/documents/${partner}/kb/empty`, { method: 'POST', headers: { 'X-API-Key': key }, body: createForm(`a-${i}`) })
              : await fetch(`${url}/api/knowledgebases/${partner}`, { headers: { 'X-API-Key': key } });
          await res.arrayBuffer();
          counts[res.status] = (counts[res.status] ?? 0) + 1;
          if (res.status === 201) created++;
        } catch {
          counts.error = (counts.error ?? 0) + 1;
        }
      }
    }),
  );
  process.stdout.write(`${JSON.stringify({ counts, created, requests: n, seconds: ms / 1000 })}\n`);
}

/** Partner B's open loop: `rate` requests a second for `seconds`, each timed. */
const requestKinds = ['create an empty document', 'read it', 'list KBs', 'KB statistics'] as const;
type Work = { latencies: number[]; byKind: Record<string, number[]>; statuses: Record<string, number>; created: number };

async function work(url: string, b: Partner, label: string, duration = seconds): Promise<Work> {
  const latencies: number[] = [];
  const byKind: Record<string, number[]> = {};
  const statuses: Record<string, number> = {};
  let created = 0;
  let lastDocument: string | null = null;
  const total = duration * rate;
  const started = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const step = i % 4;
    const headers = { 'X-API-Key': b.key };
    inFlight.push(
      (async () => {
        const t0 = performance.now();
        let res: Response;
        const kind = requestKinds[step === 1 && !lastDocument ? 3 : step]!;
        if (kind === 'create an empty document') res = await fetch(`${url}/api/documents/${b.name}/${b.kb}/empty`, { method: 'POST', headers, body: createForm(`${label}-${i}`) });
        else if (kind === 'read it') res = await fetch(`${url}/api/document/${b.name}/${b.kb}/${lastDocument}`, { headers });
        else if (kind === 'list KBs') res = await fetch(`${url}/api/knowledgebases/${b.name}`, { headers });
        else res = await fetch(`${url}/api/kb-stats/${b.name}/${b.kb}`, { headers });
        const body = await res.text();
        const took = performance.now() - t0;
        latencies.push(took);
        (byKind[kind] ??= []).push(took);
        statuses[res.status] = (statuses[res.status] ?? 0) + 1;
        if (res.status === 201) {
          created++;
          lastDocument = (JSON.parse(body) as { id: string }).id;
        }
      })(),
    );
  }
  await Promise.all(inFlight);
  return { latencies, byKind, statuses, created };
}

async function documentsOf(partner: string): Promise<number> {
  const client = new pg.Client({ connectionString: testStack().databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>(
      'SELECT count(*)::text AS n FROM documents d JOIN knowledge_bases k ON k.id = d."knowledgeBaseId" JOIN partners p ON p.id = k."partnerId" WHERE p.name = $1',
      [partner],
    );
    return Number(rows[0]!.n);
  } finally {
    await client.end();
  }
}

const ms = (x: number) => x.toFixed(1);

async function main() {
  await startBenchStack();
  const api = await startApiProcess();
  try {
    const a = await newPartner(api.url, 'a');
    const b = await newPartner(api.url, 'b');
    // Warm-up: connections, the tokenizer, Prisma's first queries.
    const warm = await work(api.url, b, 'warm', 5);

    const alone: Work = { latencies: [], byKind: {}, statuses: {}, created: 0 };
    const loaded: Work = { latencies: [], byKind: {}, statuses: {}, created: 0 };
    const floodStats = { counts: {} as Record<string, number>, created: 0, requests: 0, seconds: 0 };
    const perRound: string[] = [];
    const add = (into: typeof alone, from: typeof alone) => {
      into.latencies.push(...from.latencies);
      for (const [k, v] of Object.entries(from.byKind)) (into.byKind[k] ??= []).push(...v);
      into.created += from.created;
      for (const [k, v] of Object.entries(from.statuses)) into.statuses[k] = (into.statuses[k] ?? 0) + v;
    };
    // Rounds of (alone, under the flood), so that both conditions see the machine's other load alike.
    for (let round = 1; round <= rounds; round++) {
      const quiet = await work(api.url, b, `alone${round}`);
      add(alone, quiet);
      const floodProcess = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), 'flood', api.url, a.name, a.key, String((seconds + 6) * 1000), String(floodConnections)], {
        cwd: repoRoot,
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let floodOutput = '';
      floodProcess.stdout!.on('data', (d) => (floodOutput += String(d)));
      const floodDone = new Promise<void>((r) => floodProcess.once('exit', () => r()));
      await new Promise((r) => setTimeout(r, 3_000));
      const busy = await work(api.url, b, `loaded${round}`);
      add(loaded, busy);
      await floodDone;
      const stats = JSON.parse(floodOutput.trim().split('\n').at(-1)!) as typeof floodStats;
      floodStats.created += stats.created;
      floodStats.requests += stats.requests;
      floodStats.seconds += stats.seconds;
      for (const [k, v] of Object.entries(stats.counts)) floodStats.counts[k] = (floodStats.counts[k] ?? 0) + v;
      perRound.push(`round ${round}: p99 alone ${ms(percentile(quiet.latencies, 99))} ms, under the flood ${ms(percentile(busy.latencies, 99))} ms`);
    }

    const [aDocuments, bDocuments] = [await documentsOf(a.name), await documentsOf(b.name)];
    const bCreated = warm.created + alone.created + loaded.created;
    const p = (xs: number[], q: number) => percentile(xs, q);
    const ratio = p(loaded.latencies, 99) / p(alone.latencies, 99);
    const bRefused = Object.entries({ ...alone.statuses, ...loaded.statuses }).filter(([s]) => Number(s) >= 400).reduce((n, [, c]) => n + c, 0);
    const lost = aDocuments !== floodStats.created || bDocuments !== bCreated;
    const verdict = ratio <= 2 && !lost && bRefused === 0 ? 'met' : 'NOT met';
    writeSection(
      'abuse-flood',
      `## One partner floods, another works (\`npm run bench:flood\`)

${new Date().toISOString().slice(0, 10)}, ${machine()} (before the run). The API is its own process at its default limits
(REQUESTS_PER_MINUTE_KNOWLEDGE_BASE = 1200 per key, LOG_LEVEL=warn); partner B's client is this process, partner A's flood
another process (${floodConnections} connections, as fast as answered: GETs of its KBs and document creations).
B: an open loop of ${rate} requests/s for ${seconds} s a phase (create an empty document, read it, list KBs, KB statistics).
The flood's refused requests are held by the tarpit (RATE_LIMIT_TARPIT_MS = 1000) before their 429.

| Partner B | requests | p50 ms | p95 ms | p99 ms | max ms | answers |
|---|---|---|---|---|---|---|
| alone | ${alone.latencies.length} | ${ms(p(alone.latencies, 50))} | ${ms(p(alone.latencies, 95))} | ${ms(p(alone.latencies, 99))} | ${ms(Math.max(...alone.latencies))} | ${JSON.stringify(alone.statuses)} |
| under A's flood | ${loaded.latencies.length} | ${ms(p(loaded.latencies, 50))} | ${ms(p(loaded.latencies, 95))} | ${ms(p(loaded.latencies, 99))} | ${ms(Math.max(...loaded.latencies))} | ${JSON.stringify(loaded.statuses)} |

B's requests by kind, p50 / p99 ms:

| Request | alone | under A's flood |
|---|---|---|
${requestKinds
  .filter((k) => alone.byKind[k] || loaded.byKind[k])
  .map((k) => `| ${k} | ${ms(p(alone.byKind[k] ?? [0], 50))} / ${ms(p(alone.byKind[k] ?? [0], 99))} | ${ms(p(loaded.byKind[k] ?? [0], 50))} / ${ms(p(loaded.byKind[k] ?? [0], 99))} |`)
  .join('\n')}

${rounds} rounds of (alone, under the flood), latencies pooled per condition; ${perRound.join('; ')}.

Partner A's flood: ${floodStats.requests} requests in ${floodStats.seconds} s (${Math.round(floodStats.requests / floodStats.seconds)} /s), answers ${JSON.stringify(floodStats.counts)}.

Nothing lost: A was told ${floodStats.created} documents were created and has ${aDocuments}; B was told ${bCreated} (a 5 s warm-up included) and has ${bDocuments}; B was refused ${bRefused} times.

**B's p99 under the flood / alone: ${ratio.toFixed(2)}x (goal: at most 2x) — ${verdict}.**`,
    );
  } finally {
    await api.stop();
    await stopTestStack();
  }
}

if (process.argv[2] === 'flood') {
  const [, , , url, partner, key, duration, connections] = process.argv;
  await flood(url!, partner!, key!, Number(duration), Number(connections));
} else {
  await main();
}
