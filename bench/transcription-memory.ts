/**
 * Memory of the local speech-to-text engine (Moonshine base) by stretch length and runs at once:
 *
 *   npm run bench:transcription-memory
 *
 * The recording is the one of `npm run bench:transcription` (bench/transcription-recording.ts: 45
 * sentences by festival slt with 0.8 s pauses, about 247 s), as 16 kHz WAV in two forms:
 * - with its pauses, as spoken: stretches are cut in pauses near 0.6 of the longest stretch;
 * - continuous: every silence longer than 50 ms removed (ffmpeg silenceremove), so that there is no
 *   pause to cut in and every stretch is as long as the longest allowed (the worst case for memory:
 *   a speaker who never pauses for 0.3 s).
 * Each row is a fresh Node process (onnxruntime's arena never gives memory back, so rows must not
 * share one) that imports the engine, notes its RSS, loads the model, then transcribes the whole
 * WAV `runs` times at once (TRANSCRIPTION_LOCAL_CONCURRENCY = runs, one thread each, as the worker's
 * two audio activities do on a 2-core machine). Peak RSS is the process's high-water mark
 * (getrusage); the engine's share is the peak minus the RSS before the model was loaded (Node, the
 * modules and onnxruntime's library). WER: the first run's text against the text read (case,
 * punctuation and the spelling of numbers not counted); time: wall time of the runs together.
 * Rows after the stretch lengths try onnxruntime session options at the default stretch.
 *
 * BENCH_MEMORY_ROWS='<label substring>[|...]' runs only the matching rows. Writes its section of
 * bench/RESULTS.md (BENCH_NO_WRITE=1: print only).
 */
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type * as ort from 'onnxruntime-node';
import { setting } from '../lib/platform/config.js';
import { fmt, readLoad, writeSection } from './support/results.js';
import { longRecording, recordingText } from './transcription-recording.js';

const run = promisify(execFile);
const sentenceCount = 45;
const MB = 1024 * 1024;
/** The engine's default longest stretch (MAX_STRETCH_SECONDS of lib/providers/moonshine.ts). */
const defaultStretch = 15;

interface Row {
  label: string;
  audio: 'pauses' | 'continuous';
  maxStretchSeconds: number;
  runs: number;
  session?: { encoder?: ort.InferenceSession.SessionOptions; decoder?: ort.InferenceSession.SessionOptions };
}
interface Measured {
  rssBefore: number;
  rssLoaded: number;
  peakLoad: number;
  peak: number;
  seconds: number;
  errors: number;
  words: number;
}

const rows: Row[] = [
  ...[25, 20, 15].flatMap((s) =>
    (['pauses', 'continuous'] as const).flatMap((audio) => [1, 2].map((runs) => ({ label: `${s} s, ${audio}, ${runs} at once`, audio, maxStretchSeconds: s, runs }))),
  ),
  ...(
    [
      ['memory pattern on (the engine turns it off)', { enableMemPattern: true }, { enableMemPattern: true }],
      ['initializers outside the arena', { extra: { session: { use_device_allocator_for_initializers: '1' } } }, { extra: { session: { use_device_allocator_for_initializers: '1' } } }],
      ['arena off for the encoder only', { enableCpuMemArena: false }, {}],
      ['arena off for both', { enableCpuMemArena: false }, { enableCpuMemArena: false }],
    ] as const
  ).map(([what, encoder, decoder]) => ({ label: `${defaultStretch} s, continuous, 2 at once, ${what}`, audio: 'continuous' as const, maxStretchSeconds: defaultStretch, runs: 2, session: { encoder, decoder } })),
];

/** One row, in the process of its own that runs it. */
async function child(row: Row, wav: string): Promise<Measured> {
  const { MoonshineEngine } = await import('../lib/providers/moonshine.js');
  const { wordErrors } = await import('../test/support/speech-recordings.js');
  const engine = new MoonshineEngine({ modelDir: setting(process.env, 'TRANSCRIPTION_LOCAL_MODEL_DIR') ?? '', threads: 1, concurrency: row.runs, maxStretchSeconds: row.maxStretchSeconds, session: row.session });
  const rssBefore = process.memoryUsage().rss;
  await engine.load();
  const rssLoaded = process.memoryUsage().rss;
  const peakLoad = process.resourceUsage().maxRSS * 1024;
  const started = performance.now();
  const results = await Promise.all(Array.from({ length: row.runs }, () => engine.transcribeSegment({ wavPath: wav, language: 'en' })));
  const seconds = (performance.now() - started) / 1000;
  const { errors, words } = wordErrors(recordingText(sentenceCount), results[0]!.text);
  return { rssBefore, rssLoaded, peakLoad, peak: process.resourceUsage().maxRSS * 1024, seconds, errors, words };
}

async function measure(row: Row, wav: string): Promise<Measured> {
  const proc = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url)], {
    env: { ...process.env, BENCH_MEMORY_CHILD: JSON.stringify({ row, wav }) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => proc.once('exit', resolve));
  if (code !== 0) throw new Error(`row "${row.label}" exited ${code}`);
  return JSON.parse(out.trim().split('\n').at(-1)!) as Measured;
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-stt-memory-'));
  try {
    const mp3 = await longRecording(sentenceCount);
    const wavs = { pauses: path.join(dir, 'pauses.wav'), continuous: path.join(dir, 'continuous.wav') };
    await run('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-i', mp3, '-ar', '16000', '-ac', '1', '-c:a', 'pcm_s16le', wavs.pauses]);
    await run('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-i', wavs.pauses, '-af', 'silenceremove=stop_periods=-1:stop_duration=0.05:stop_threshold=-40dB', '-c:a', 'pcm_s16le', wavs.continuous]);
    const seconds = async (f: string) => Number((await run('ffprobe', ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', f])).stdout.trim());
    const durations = { pauses: await seconds(wavs.pauses), continuous: await seconds(wavs.continuous) };
    const only = process.env.BENCH_MEMORY_ROWS?.split('|').filter(Boolean);
    const chosen = only ? rows.filter((r) => only.some((o) => r.label.includes(o))) : rows;
    const before = await readLoad();
    const lines: string[] = [];
    for (const row of chosen) {
      const m = await measure(row, wavs[row.audio]);
      const line = `| ${row.label} | ${fmt(m.rssBefore / MB, 0)} | ${fmt(m.rssLoaded / MB, 0)} | ${fmt(m.peak / MB, 0)} | **${fmt((m.peak - m.rssBefore) / MB, 0)}** | ${fmt(m.seconds, 1)} | ${fmt((100 * m.errors) / m.words, 1)} % |`;
      console.error(line);
      lines.push(line);
    }
    const after = await readLoad();
    writeSection(
      'transcription-memory',
      [
        '# Memory of the Moonshine engine (`npm run bench:transcription-memory`)',
        '',
        `Run ${before.at}; ${os.cpus().length} cores, load average ${before.loadavg.map((x) => x.toFixed(2)).join(' / ')} before, ${after.loadavg.map((x) => x.toFixed(2)).join(' / ')} after. Recording of \`bench:transcription\` (${sentenceCount} sentences, festival slt): with its pauses ${durations.pauses.toFixed(0)} s; continuous (silences over 50 ms removed, every stretch as long as allowed) ${durations.continuous.toFixed(0)} s. Each row a fresh process; one thread per run; the runs at once transcribe the whole recording each. Goal: the engine under 500 MB (issue #48).`,
        '',
        '| Longest stretch, audio, runs at once[, session options] | RSS before loading (MB) | after loading (MB) | peak RSS (MB) | engine: peak - before (MB) | time of the runs (s) | WER |',
        '|---|---:|---:|---:|---:|---:|---:|',
        ...lines,
        '',
        'Reading: the loaded model takes about 180 MB. onnxruntime\'s arena keeps the largest activations a run needed (the encoder\'s attention over every frame of a stretch, about 41 a second), so the longest stretch sets the figure. A second run at once adds its own keys, values and encoder output, not a second set of activations: onnxruntime-node runs one model call at a time on the JavaScript thread, so the runs take turns. On the continuous recording every stretch is about as long as allowed (cut in its quietest 20 ms, as there is no pause): the bound a worker can meet; its WER counts the words lost at those cuts. More: docs/transcription-engine.md, section Memory.',
      ].join('\n'),
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const task = process.env.BENCH_MEMORY_CHILD
  ? (async () => {
      const { row, wav } = JSON.parse(process.env.BENCH_MEMORY_CHILD!) as { row: Row; wav: string };
      process.stdout.write(`${JSON.stringify(await child(row, wav))}\n`);
    })()
  : main();
task.then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
