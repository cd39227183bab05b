/**
 * Speech time to first byte: POST /v2/audio/speech against the engine alone.
 *
 *   npm run bench:speech
 *
 * For each voice (slt: festival HTS; kal: flite; espeak with language de: espeak-ng), input (one
 * sentence; 2,000 characters) and format (mp3, pcm), BENCH_RUNS runs (default 10):
 * - engine alone: the engine started as one would by hand on the whole input (festival `text2wave`
 *   with the text on stdin and raw output on stdout, flite writing a WAV file, espeak-ng
 *   `--stdout`), from spawn to its first output byte (flite: to its exit, it writes a file);
 * - service: from sending the request to the first byte of the answer body, and to its end. The
 *   service cuts the input at sentence ends and synthesizes a short first piece first, then
 *   encodes on the fly (mp3), so its first byte can come before the engine alone finishes a long text.
 * The API is its own process; the client is this process. Writes its section of bench/RESULTS.md.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { machine, newQuotaKey, percentile, startApiProcess, startBenchStack, stopTestStack, writeSection } from './audio-system.js';

const runs = Number(process.env.BENCH_RUNS ?? 10);

const englishSentence = 'The meeting starts tomorrow morning at nine, so please bring the report.';
const germanSentence = 'Die Besprechung beginnt morgen früh um neun Uhr, bitte bringen Sie den Bericht mit.';
const fill = (sentences: string[]) => {
  let out = '';
  for (let i = 0; out.length < 2000; i++) {
    const next = `${out}${out ? ' ' : ''}${sentences[i % sentences.length]}`;
    if (next.length > 2000) break;
    out = next;
  }
  return out;
};
const englishLong = fill([
  englishSentence, 'Visitors can borrow up to ten books for three weeks at a time.', 'Last year the city paid for new windows and a better heating system.',
  'Every month a local author comes to talk about writing and answer questions.', 'People who live far away can order books online and collect them at the post office.',
]);
const germanLong = fill([germanSentence, 'Die Bibliothek schließt an Feiertagen früher als sonst.', 'Wir sind am Fluss entlang gelaufen, bis die Sonne unterging.', 'Mein Bruder hat letztes Wochenende ein neues Fahrrad gekauft.']);

interface Timing {
  ttfb: number;
  total: number;
}

/** The engine alone: spawn → first stdout byte (or exit for file writers) and → exit. */
function engineAlone(voice: string, text: string, dir: string): Promise<Timing> {
  const started = performance.now();
  const [cmd, args, input]: [string, string[], string | null] =
    voice === 'slt' ? ['text2wave', ['-eval', '(voice_cmu_us_slt_arctic_hts)', '-F', '24000', '-otype', 'raw', '-o', '-'], text]
    : voice === 'kal' ? ['flite', ['-voice', 'kal16', '-t', text, '-o', path.join(dir, 'alone.wav')], null]
    : ['espeak-ng', ['-v', 'de', '--stdout'], text];
  const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'ignore'] });
  let first = 0;
  child.stdout.on('data', () => (first ||= performance.now()));
  child.stdin.end(input ?? undefined);
  return new Promise((resolve, reject) =>
    child.once('exit', (code) => {
      const end = performance.now();
      if (code !== 0) return reject(new Error(`${cmd} exited ${code}`));
      resolve({ ttfb: (first || end) - started, total: end - started });
    }),
  );
}

async function service(url: string, key: string, body: Record<string, unknown>): Promise<Timing> {
  const started = performance.now();
  const res = await fetch(`${url}/v2/audio/speech`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'tts-1', ...body }) });
  if (res.status !== 200) throw new Error(`speech: ${res.status} ${await res.text()}`);
  const reader = res.body!.getReader();
  let first = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (!first && value?.length) first = performance.now();
  }
  return { ttfb: first - started, total: performance.now() - started };
}

const ms = (x: number) => x.toFixed(0);

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-speech-'));
  const startedAt = new Date();
  await startBenchStack();
  const api = await startApiProcess({ SPEECH_MAX_CONCURRENT: '4' });
  const rows: string[] = [];
  const loadBefore = machine();
  try {
    const key = await newQuotaKey(api.url, 'speech');
    const cases: Array<[string, string, string, string | null]> = [
      ['slt (festival)', 'slt', englishSentence, null], ['slt (festival)', 'slt', englishLong, null],
      ['kal (flite)', 'kal', englishSentence, null], ['kal (flite)', 'kal', englishLong, null],
      ['espeak, de (espeak-ng)', 'espeak', germanSentence, 'de'], ['espeak, de (espeak-ng)', 'espeak', germanLong, 'de'],
    ];
    for (const [label, voice, text, language] of cases) {
      const size = text.length > 500 ? `${text.length} chars` : 'one sentence';
      // Warm-up: page cache, the API's first request.
      await engineAlone(voice, text, dir);
      await service(api.url, key, { voice, input: text, response_format: 'pcm', ...(language ? { language } : {}) });
      const alone: Timing[] = [];
      for (let i = 0; i < runs; i++) alone.push(await engineAlone(voice, text, dir));
      rows.push(`| ${label} | ${size} | engine alone | ${ms(percentile(alone.map((t) => t.ttfb), 50))} | ${ms(percentile(alone.map((t) => t.ttfb), 95))} | ${ms(percentile(alone.map((t) => t.total), 50))} |`);
      for (const format of ['mp3', 'pcm']) {
        const timings: Timing[] = [];
        for (let i = 0; i < runs; i++) timings.push(await service(api.url, key, { voice, input: text, response_format: format, ...(language ? { language } : {}) }));
        rows.push(`| ${label} | ${size} | /v2/audio/speech ${format} | ${ms(percentile(timings.map((t) => t.ttfb), 50))} | ${ms(percentile(timings.map((t) => t.ttfb), 95))} | ${ms(percentile(timings.map((t) => t.total), 50))} |`);
      }
    }
  } finally {
    await api.stop();
    await stopTestStack();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  writeSection(
    'speech-latency',
    [
      '# Speech time to first byte (`npm run bench:speech`)',
      '',
      `Run ${startedAt.toISOString()}; ${machine()} at the end (${loadBefore} before). ${runs} runs per row after one warm-up; times in ms. The API is its own process, the client is the benchmark process.`,
      '',
      '| Voice (engine) | Input | Path | First byte p50 | First byte p95 | Total p50 |',
      '|---|---|---|---:|---:|---:|',
      ...rows,
      '',
      'Reading: the service adds its fixed costs to the engine\'s first byte: the request id, the quota admission (a PostgreSQL transaction under the key\'s row lock), language detection, starting ffmpeg for the encoding, and the HTTP hop (under 100 ms at p50 here, on a machine shared with other test runs). festival (text2wave writes each sentence as soon as it is made) and espeak-ng run once over the whole input and are read as they write, so the first byte of a 2,000-character text comes as early as the engine\'s own; flite writes only a finished file, so the service cuts the text at sentence ends and speaks a short first piece first (the whole text takes flite under 0.1 s anyway). pcm at festival\'s 24 kHz passes through without ffmpeg; the other engines are resampled to 24 kHz. Totals of long inputs include the encoder and the client reading the body.',
    ].join('\n'),
  );
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
