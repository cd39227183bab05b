/**
 * Latency the messaging proxy adds: time to first token (TTFT) and total time of a streamed chat
 * completion through our /v3 against the same local OpenAI-protocol server called directly, with
 * the official `openai` client, at 1 and at 200 concurrent streams.
 *
 *   npm run bench:messaging
 *
 * The provider is test/support/openai-upstream.ts: it answers each stream with 1 empty role chunk
 * and BENCH_TOKENS (default 20) word chunks, BENCH_TOKEN_MS (default 20) ms apart, so a stream
 * lasts ~400 ms and the first token arrives at once. Through /v3 every request is admitted on a
 * quota key (reserve under the key's row lock in PostgreSQL) and settled when the stream ends, as
 * in production. At 200 streams two variants: 200 keys (no lock contention) and one key shared by
 * all 200 (every admission queues on the same row lock).
 *
 * Everything runs in this one Node process (client, API, fake provider), against a throw-away
 * database that is dropped at the end; no Temporal or Weaviate is needed (these paths do not use
 * them). Writes a section into bench/RESULTS.md (BENCH_NO_WRITE=1 only prints).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import type { Client } from '@temporalio/client';
import { loadConfig } from '../lib/config.js';
import { createServices } from '../lib/runtime.js';
import { createApp } from '../api/app.js';
import { createQuotaKey } from '../lib/messaging/quota-keys.js';
import { dropDatabase, ensureDatabase, migrate } from '../scripts/stack.js';
import { startOpenAiUpstream, type UpstreamCall } from '../test/support/openai-upstream.js';

const benchDir = path.dirname(fileURLToPath(import.meta.url));
const baseUrl = (process.env.DATABASE_BASE_URL ?? 'postgresql://postgres@127.0.0.1:5432').replace(/\/+$/, '');
const databaseUrl = `${baseUrl}/dwb_bench_messaging_${process.pid}`;
const tokens = Number(process.env.BENCH_TOKENS ?? 20);
const tokenMs = Number(process.env.BENCH_TOKEN_MS ?? 20);
const sequentialRuns = Number(process.env.BENCH_RUNS ?? 30);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);

function streamChunks(call: UpstreamCall) {
  const base = { id: `chatcmpl-${Math.random().toString(36).slice(2)}`, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: call.body?.model ?? 'bench' };
  const out: unknown[] = [{ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }];
  for (let i = 0; i < tokens; i++) out.push({ ...base, choices: [{ index: 0, delta: { content: `tok${i} ` }, finish_reason: null }] });
  out.push({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
  if (call.body?.stream_options?.include_usage) out.push({ ...base, choices: [], usage: { prompt_tokens: 8, completion_tokens: tokens, total_tokens: 8 + tokens } });
  return out;
}

interface Sample {
  ttftMs: number;
  totalMs: number;
}

async function oneStream(client: OpenAI): Promise<Sample> {
  const started = performance.now();
  let first = 0;
  const stream = await client.chat.completions.create({ model: 'bench', messages: [{ role: 'user', content: 'Say twenty words.' }], stream: true, max_tokens: 64 });
  for await (const chunk of stream) {
    if (!first && chunk.choices[0]?.delta?.content) first = performance.now();
  }
  return { ttftMs: first - started, totalMs: performance.now() - started };
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
};
const fmt = (n: number) => n.toFixed(1);

interface Row {
  setting: string;
  path: 'direct' | '/v3';
  samples: Sample[];
  failures: number;
}

async function measure(setting: string, p: Row['path'], clients: OpenAI[], concurrency: number): Promise<Row> {
  const samples: Sample[] = [];
  let failures = 0;
  const run = async (c: OpenAI) => {
    try {
      samples.push(await oneStream(c));
    } catch (err) {
      failures++;
      if (failures === 1) console.error(`${setting} ${p}: ${(err as Error).message}`);
    }
  };
  await run(clients[0]!); // warm-up (connections, JIT), not recorded
  samples.length = 0;
  if (concurrency === 1) {
    for (let i = 0; i < sequentialRuns; i++) await run(clients[0]!);
  } else {
    for (let r = 0; r < rounds; r++) await Promise.all(Array.from({ length: concurrency }, (_, i) => run(clients[i % clients.length]!)));
  }
  return { setting, path: p, samples, failures };
}

async function main() {
  await ensureDatabase(databaseUrl);
  await migrate(databaseUrl);
  const upstream = await startOpenAiUpstream((call) => ({ sse: streamChunks(call), eventDelayMs: tokenMs }));
  const config = loadConfig({ ...process.env, DATABASE_URL: databaseUrl, ADMIN_API_KEY: 'bench-admin-key-0123456789', OPENAI_BASE_URL: upstream.baseUrl, OPENAI_API_KEY: 'bench', LOG_LEVEL: 'error' });
  const services = createServices(config, 'bench');
  const server = createApp({ ...services, temporal: null as unknown as Client }).listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const rows: Row[] = [];
  try {
    const direct = new OpenAI({ baseURL: upstream.baseUrl, apiKey: 'bench', maxRetries: 0 });
    const keys = await Promise.all(Array.from({ length: 200 }, (_, i) => createQuotaKey(services.db, { name: `bench-${i}`, quota_type: 'chat', token_amount: 1e12 })));
    const viaKeys = keys.map((k) => new OpenAI({ baseURL: `${apiUrl}/v3`, apiKey: k.api_key, maxRetries: 0 }));
    const oneKey = Array.from({ length: 200 }, () => viaKeys[0]!);

    rows.push(await measure('1 stream', 'direct', [direct], 1));
    rows.push(await measure('1 stream', '/v3', viaKeys, 1));
    rows.push(await measure('200 streams', 'direct', [direct], 200));
    rows.push(await measure('200 streams, 200 keys', '/v3', viaKeys, 200));
    rows.push(await measure('200 streams, one key', '/v3', oneKey, 200));
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await services.db.$disconnect();
    await upstream.close();
    await dropDatabase(databaseUrl);
  }

  const directOf = (setting: string) => rows.find((r) => r.path === 'direct' && setting.startsWith(r.setting))!;
  const lines = [
    '| Setting | Path | Streams measured | Failures | TTFT p50 (ms) | TTFT p95 (ms) | Total p50 (ms) | Total p95 (ms) | Added TTFT p50 (ms) | Added total p50 (ms) |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map((r) => {
      const t = r.samples.map((s) => s.ttftMs);
      const total = r.samples.map((s) => s.totalMs);
      const d = directOf(r.setting);
      const added = r.path === 'direct' ? ['', ''] : [fmt(pct(t, 50) - pct(d.samples.map((s) => s.ttftMs), 50)), fmt(pct(total, 50) - pct(d.samples.map((s) => s.totalMs), 50))];
      return `| ${r.setting} | ${r.path} | ${r.samples.length} | ${r.failures} | ${fmt(pct(t, 50))} | ${fmt(pct(t, 95))} | ${fmt(pct(total, 50))} | ${fmt(pct(total, 95))} | ${added[0]} | ${added[1]} |`;
    }),
  ];
  const section = [
    '# Messaging proxy latency (`npm run bench:messaging`)',
    '',
    `Run ${new Date().toISOString()} on ${process.platform} / Node ${process.version}; provider: ${tokens} chunks ${tokenMs} ms apart; 1 stream: ${sequentialRuns} sequential streams; 200 streams: ${rounds} bursts of 200 concurrent streams. Client, API and fake provider share one Node process.`,
    '',
    ...lines,
    '',
  ].join('\n');
  console.log(section);
  if (!process.env.BENCH_NO_WRITE) {
    const file = path.join(benchDir, 'RESULTS.md');
    const existing = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    const marker = '# Messaging proxy latency';
    const kept = existing.includes(marker) ? existing.slice(0, existing.indexOf(marker)).trimEnd() : existing.trimEnd();
    fs.writeFileSync(file, `${kept}\n\n${section}`);
  }
}

await main();
process.exit(0);
