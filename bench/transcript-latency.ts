/**
 * Transcript job time against the engine run directly on the same file.
 *
 *   npm run bench:transcription
 *
 * The recording: a fixed English text (BENCH_SENTENCES sentences, default 45, about 4-5 minutes)
 * spoken by festival (cmu_us_slt_arctic_hts) with pauses between sentences, as an MP3.
 * - Direct: the engine on its own: ffmpeg to 16 kHz mono WAV, then the Moonshine engine of
 *   lib/providers/moonshine.ts over the whole file in this process (the model loaded beforehand, as a
 *   worker keeps it loaded; one run at a time, one thread).
 * - Service: POST /v2/transcript (upload), then GET every 100 ms until `completed`; the time from
 *   the POST to the completed answer. The API and the worker are separate processes (the worker's
 *   audio task queue runs AUDIO_WORKER_MAX_ACTIVITIES = 2 segments at once); the client is this
 *   process. Measured with TRANSCRIPT_SEGMENT_CONCURRENCY 1 and 2 (segments of one transcript in
 *   flight at once) and the default TRANSCRIPT_SEGMENT_SECONDS (120). A first transcript, not
 *   measured, loads the worker's model.
 * BENCH_RUNS (default 3) runs of each; medians. Writes its section of bench/RESULTS.md.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { testStack } from '../test/support/stack.js';
import { MoonshineEngine } from '../lib/providers/moonshine.js';
import { setting } from '../lib/platform/config.js';
import { machine, median, newPartnerKey, startApiProcess, startBenchStack, startWorker, stopTestStack, writeSection } from './audio-system.js';
import { longRecording } from './transcription-recording.js';

const run = promisify(execFile);
const runs = Number(process.env.BENCH_RUNS ?? 3);
const sentenceCount = Number(process.env.BENCH_SENTENCES ?? 45);
const engine = new MoonshineEngine({ modelDir: setting(process.env, 'TRANSCRIPTION_LOCAL_MODEL_DIR') ?? '', threads: 1, concurrency: 1 });

async function direct(mp3: string, dir: string): Promise<number> {
  const wav = path.join(dir, 'direct.wav');
  const started = performance.now();
  await run('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-i', mp3, '-ar', '16000', '-ac', '1', '-c:a', 'pcm_s16le', wav]);
  await engine.transcribeSegment({ wavPath: wav, language: 'en' });
  return performance.now() - started;
}

async function viaService(apiUrl: string, key: string, mp3: string): Promise<{ ms: number; segments: number }> {
  const body = new FormData();
  body.append('audio', new Blob([new Uint8Array(fs.readFileSync(mp3))]), 'recording.mp3');
  const started = performance.now();
  const res = await fetch(`${apiUrl}/v2/transcript`, { method: 'POST', headers: { 'X-Api-Key': key }, body });
  if (res.status !== 200) throw new Error(`submit: ${res.status} ${await res.text()}`);
  const { id } = (await res.json()) as { id: string };
  for (;;) {
    const r = (await (await fetch(`${apiUrl}${id}`, { headers: { 'X-Api-Key': key } })).json()) as { status: string; error?: string };
    if (r.status === 'completed') break;
    if (r.status === 'error') throw new Error(`transcript failed: ${r.error}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const ms = performance.now() - started;
  const client = new pg.Client({ connectionString: testStack().databaseUrl });
  await client.connect();
  const { rows } = await client.query<{ n: number }>('SELECT "segmentCount" AS n FROM transcripts WHERE id = $1', [id.split('/').pop()]);
  await client.end();
  return { ms, segments: rows[0]?.n ?? 0 };
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-transcript-'));
  const startedAt = new Date();
  await startBenchStack();
  try {
    const mp3 = await longRecording(sentenceCount);
    const duration = Number((await run('ffprobe', ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', mp3])).stdout.trim());
    const loadBefore = machine();
    const worker = await startWorker({ AUDIO_WORKER_MAX_ACTIVITIES: '2' });
    const apis = await Promise.all([1, 2].map((c) => startApiProcess({ TRANSCRIPT_SEGMENT_CONCURRENCY: String(c), TRANSCRIPTION_RATE_LIMIT_PER_MINUTE: '0', TRANSCRIPTION_CONCURRENCY_LIMIT: '0' })));
    const rows: string[] = [];
    try {
      const keys = await Promise.all(apis.map((a) => newPartnerKey(a.url)));
      // Loading the model (once per process) is not part of a job: the worker's and ours are loaded first.
      await engine.load();
      await viaService(apis[0]!.url, keys[0]!, mp3);
      // Rounds interleave the three paths, so that load from outside the benchmark falls on all of them alike.
      const directMs: number[] = [];
      const service: Array<Array<{ ms: number; segments: number }>> = [[], []];
      for (let i = 0; i < runs; i++) {
        directMs.push(await direct(mp3, dir));
        for (const [k, api] of apis.entries()) service[k]!.push(await viaService(api.url, keys[k]!, mp3));
      }
      const d = median(directMs);
      rows.push(`| direct (ffmpeg + the Moonshine engine over the whole file, model loaded) | ${runs} | ${(d / 1000).toFixed(1)} | ${directMs.map((x) => (x / 1000).toFixed(1)).join(', ')} | 1 | 1.00 |`);
      for (const [k, samples] of service.entries()) {
        const m = median(samples.map((x) => x.ms));
        rows.push(`| /v2/transcript, TRANSCRIPT_SEGMENT_CONCURRENCY=${k + 1} | ${runs} | ${(m / 1000).toFixed(1)} | ${samples.map((x) => (x.ms / 1000).toFixed(1)).join(', ')} | ${samples[0]!.segments} | ${(m / d).toFixed(2)} |`);
      }
    } finally {
      await Promise.all(apis.map((a) => a.stop()));
      await worker.kill();
    }
    writeSection(
      'transcript-latency',
      [
        '# Transcript job time (`npm run bench:transcription`)',
        '',
        `Run ${startedAt.toISOString()}; ${machine()} at the end (${loadBefore} before). Recording: ${sentenceCount} sentences by festival slt with 0.8 s pauses, ${duration.toFixed(0)} s, MP3 64 kbit/s. The API and the worker are their own processes; the client is the benchmark process. Goal: the service at most 1.2x the engine run directly (issue #48).`,
        '',
        '| Path | Runs | Median (s) | All runs (s) | Segments | vs direct |',
        '|---|---:|---:|---:|---:|---:|',
        ...rows,
        '',
        'Reading: the service does more than the direct run: it probes the file, decodes it once to 16 kHz WAV, measures its levels and runs silencedetect (a second decode), cuts it into segments at pauses (each a WAV of its own in storage), hands each segment to the Moonshine engine of the worker (loaded once per worker), and records every step in PostgreSQL and Temporal; the client polls every 100 ms. With two segments in flight the worker has two model runs in progress (TRANSCRIPTION_LOCAL_CONCURRENCY 2), but they take turns on one core: onnxruntime-node runs each model call on the JavaScript thread of the process, so a second segment in flight buys no speed (docs/transcription-engine.md, Threads, concurrency and memory).',
      ].join('\n'),
    );
  } finally {
    await stopTestStack();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
