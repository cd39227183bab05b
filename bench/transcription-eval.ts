/**
 * Word error rate of the local speech-to-text engines, old beside new, on a set rebuilt at each run:
 *
 *   npm run eval:transcription
 *
 * - Synthetic: 14 sentences (names, numbers, a question) in six voices:
 *   festival slt-hts, flite kal16 / slt / rms / awb, espeak-ng en-us; one clip per sentence.
 * - Human: every real recording with a known text that Debian ships here (test/support/speech-recordings.ts):
 *   LibriVox readings (read), card names, "go forward ten meters" and speaker-test's channel names (prompted).
 * - The human sets again as the service meets them in longer recordings: each set's clips joined with
 *   1 s pauses into one recording (as test/transcription/api.test.ts sends them to /v2/transcript);
 *   and each human clip after a click and 2 s of silence (a microphone switched on, a beep).
 * Each clip is decoded to 16 kHz mono WAV and given to each engine's adapter (lib/providers/), one at a
 * time: PocketSphinx (Debian, the engine before issue #48) and Moonshine base (one thread); and to the
 * Moonshine model alone (the whole clip in one greedy call, no cutting, trimming or shortened
 * pauses: `MoonshineEngine.modelText`), to show what the service's pipeline adds or loses. WER counts
 * words as normalizedWords does (case, punctuation and the spelling of numbers do not count).
 * Real-time factor: engine time over audio time. Memory: Moonshine runs in this process, its peak RSS
 * is this process's (PocketSphinx runs as a child process: its peak RSS by /usr/bin/time on one clip).
 *
 * Word times: festival labels its own speech (word start and end); 8 sentences joined with pauses of 0.4-1.2 s into one recording are transcribed as one segment,
 * and the times of the words both engines got right are compared with the labels.
 *
 * Writes its section of bench/RESULTS.md (BENCH_NO_WRITE=1: print only).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { readWavInfo, readWavSamples, wavFile } from '../lib/audio/wav.js';
import { MoonshineEngine } from '../lib/providers/moonshine.js';
import { PocketSphinxEngine } from '../lib/providers/speech-to-text.js';
import type { RecognizedWord, SpeechToTextEngine } from '../lib/providers/speech-to-text-engine.js';
import { setting } from '../lib/platform/config.js';
import { asWav16k, humanRecordings, normalizedWords, wordErrors } from '../test/support/speech-recordings.js';
import { fmt, readLoad, writeSection } from './support/results.js';

const run = promisify(execFile);
/** Sentences in each synthetic voice, and sentences of the labelled recording for word times. */
const sentenceCount = 14;
const timingCount = 8;

const sentences = [
  'The weather service expects heavy rain in the northern valleys tomorrow afternoon.',
  'Please call Doctor Patel before nine thirty on Monday morning.',
  'Farmers should move their animals to higher ground before the evening.',
  'How many tickets are left for the concert on Friday night?',
  'The bridge on the river road will stay closed until the water level falls.',
  'Our office in Nairobi opens next week with a team of twelve people.',
  'She bought three apples, two loaves of bread and a bottle of milk.',
  'The library will be closed for repairs from the first to the fifteenth of June.',
  'Could you send me the report by the end of the day?',
  'A new bus line will stop right in front of the main door from next month.',
  'Most of the money for the party comes from a small charity run by former teachers.',
  'The old card catalogue is kept in the basement as a piece of local history.',
  'Schools in the area will open one hour later than usual on Thursday morning.',
  'The museum shows paintings by local artists every summer.',
];

type Voice = 'festival-slt' | 'flite-kal16' | 'flite-slt' | 'flite-rms' | 'flite-awb' | 'espeak-ng';
const voices: Voice[] = ['festival-slt', 'flite-kal16', 'flite-slt', 'flite-rms', 'flite-awb', 'espeak-ng'];

async function synthesize(dir: string, voice: Voice, text: string, name: string): Promise<string> {
  const raw = path.join(dir, `${name}.raw.wav`);
  if (voice === 'festival-slt') {
    const child = execFile('text2wave', ['-eval', '(voice_cmu_us_slt_arctic_hts)', '-o', raw]);
    child.stdin!.end(text);
    await new Promise((resolve, reject) => child.once('exit', (code) => (code === 0 ? resolve(null) : reject(new Error(`text2wave exited ${code}`)))));
  } else if (voice === 'espeak-ng') await run('espeak-ng', ['-v', 'en-us', '-w', raw, text]);
  else await run('flite', ['-voice', voice.slice('flite-'.length), '-t', text, '-o', raw]);
  return to16k(raw, path.join(dir, `${name}.wav`));
}

/** The clips joined with `gap` seconds of silence after each (16 kHz mono WAV). */
async function joined(wavs: readonly string[], gap: number, output: string): Promise<string> {
  const chains = wavs.map((_, i) => `[${i}:a]apad=pad_dur=${gap}[a${i}]`).join(';');
  await run('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', ...wavs.flatMap((w) => ['-i', w]), '-filter_complex', `${chains};${wavs.map((_, i) => `[a${i}]`).join('')}concat=n=${wavs.length}:v=0:a=1[out]`, '-map', '[out]', '-c:a', 'pcm_s16le', output]);
  return output;
}

/** The clip after 0.5 s of silence, a 0.1 s click (noise at a fixed seed) and 2 s of silence. */
async function afterClick(wav: string, output: string): Promise<string> {
  const { samples } = await readWavSamples(wav);
  const rate = 16_000;
  let seed = 7;
  const click = Int16Array.from({ length: rate / 10 }, () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return Math.round(10_000 * (seed / 0x7fffffff - 0.5));
  });
  const all = new Int16Array(rate / 2 + click.length + 2 * rate + samples.length);
  all.set(click, rate / 2);
  all.set(samples, rate / 2 + click.length + 2 * rate);
  fs.writeFileSync(output, wavFile({ sampleRate: rate, channels: 1 }, Buffer.from(all.buffer)));
  return output;
}

async function to16k(input: string, output: string): Promise<string> {
  await run('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-i', input, '-ar', '16000', '-ac', '1', '-c:a', 'pcm_s16le', output]);
  return output;
}

interface Clip {
  group: string;
  wav: string;
  text: string;
  seconds: number;
}

interface Score {
  errors: number;
  words: number;
  ms: number;
  seconds: number;
  worst: Array<{ text: string; said: string }>;
}

async function score(engine: SpeechToTextEngine, clips: readonly Clip[]): Promise<Map<string, Score>> {
  const byGroup = new Map<string, Score>();
  for (const clip of clips) {
    const started = performance.now();
    const { text } = await engine.transcribeSegment({ wavPath: clip.wav, language: 'en' });
    process.stderr.write(`${engine.id} ${clip.group}: ${text}\n`);
    const ms = performance.now() - started;
    const e = wordErrors(clip.text, text);
    const s = byGroup.get(clip.group) ?? { errors: 0, words: 0, ms: 0, seconds: 0, worst: [] };
    s.errors += e.errors;
    s.words += e.words;
    s.ms += ms;
    s.seconds += clip.seconds;
    if (e.errors > 0) s.worst.push({ text: clip.text, said: text });
    byGroup.set(clip.group, s);
  }
  return byGroup;
}

const total = (scores: Map<string, Score>, groups: string[]) =>
  groups.reduce((t, g) => {
    const s = scores.get(g)!;
    return { errors: t.errors + s.errors, words: t.words + s.words, ms: t.ms + s.ms, seconds: t.seconds + s.seconds, worst: [] };
  }, { errors: 0, words: 0, ms: 0, seconds: 0, worst: [] } as Score);

const pct = (s: Score) => `${fmt((100 * s.errors) / s.words)} %`;

/** A recording of festival sentences with pauses between them, and the times festival gave its words. */
async function labelledRecording(dir: string): Promise<{ wav: string; words: Array<{ w: string; s: number; e: number }> }> {
  const parts: string[] = [];
  const words: Array<{ w: string; s: number; e: number }> = [];
  let offset = 0;
  for (let i = 0; i < timingCount; i++) {
    const text = sentences[i % sentences.length]!;
    const wav32 = path.join(dir, `t${i}.wav`);
    const script = path.join(dir, `t${i}.scm`);
    fs.writeFileSync(
      script,
      `(voice_cmu_us_slt_arctic_hts)\n(set! u (utt.synth (Utterance Text ${JSON.stringify(text)})))\n(utt.save.wave u ${JSON.stringify(wav32)} 'riff)\n` +
        `(mapcar (lambda (w) (format t "%s %f %f\\n" (item.name w) (item.feat w "word_start") (item.feat w "word_end"))) (utt.relation.items u 'Word))\n`,
    );
    const { stdout } = await run('festival', ['-b', script]);
    // Pauses of 0.4-1.2 s (fixed by position, so that every run measures the same recording).
    const pause = 0.4 + ((i * 7) % 9) / 10;
    const part = path.join(dir, `t${i}-16k.wav`);
    await run('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-i', wav32, '-af', `aresample=16000,apad=pad_dur=${pause}`, '-ac', '1', '-c:a', 'pcm_s16le', part]);
    for (const line of stdout.split('\n')) {
      const [w, s, e] = line.trim().split(/\s+/);
      if (w && s && e) words.push({ w: w.toLowerCase(), s: offset + Number(s), e: offset + Number(e) });
    }
    parts.push(part);
    offset += (await readWavInfo(part)).durationSeconds;
  }
  const list = path.join(dir, 'timing-list.txt');
  fs.writeFileSync(list, parts.map((p) => `file '${p}'`).join('\n'));
  const wav = path.join(dir, 'timing.wav');
  await run('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-f', 'concat', '-safe', '0', '-i', list, '-c:a', 'pcm_s16le', wav]);
  return { wav, words };
}

/** Start and end errors (seconds) of the recognised words that match the labelled ones (edit-distance alignment). */
function timeErrors(truth: ReadonlyArray<{ w: string; s: number; e: number }>, got: readonly RecognizedWord[]): { start: number[]; end: number[]; matched: number } {
  const said = got.flatMap((w) => normalizedWords(w.w).map((n) => ({ n, s: w.s, e: w.e })));
  const r = truth.map((t) => t.w);
  const h = said.map((x) => x.n);
  const d: number[][] = Array.from({ length: r.length + 1 }, (_, i) => Array.from({ length: h.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= r.length; i++) for (let j = 1; j <= h.length; j++) d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + (r[i - 1] === h[j - 1] ? 0 : 1));
  const start: number[] = [];
  const end: number[] = [];
  for (let i = r.length, j = h.length; i > 0 && j > 0; ) {
    if (r[i - 1] === h[j - 1] && d[i]![j] === d[i - 1]![j - 1]) {
      start.push(Math.abs(said[j - 1]!.s - truth[i - 1]!.s));
      end.push(Math.abs(said[j - 1]!.e - truth[i - 1]!.e));
      i--;
      j--;
    } else if (d[i]![j] === d[i - 1]![j - 1]! + 1) {
      i--;
      j--;
    } else if (d[i]![j] === d[i - 1]![j]! + 1) i--;
    else j--;
  }
  return { start, end, matched: start.length };
}

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))] ?? NaN;
const meanOf = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

async function peakRssOfPocketSphinx(wav: string): Promise<number> {
  const model = '/usr/share/pocketsphinx/model/en-us';
  const { stderr } = await run('/usr/bin/time', ['-f', '%M', 'pocketsphinx_continuous', '-infile', wav, '-logfn', '/dev/null', '-time', 'yes', '-remove_silence', 'no', '-hmm', `${model}/en-us`, '-lm', `${model}/en-us.lm.bin`, '-dict', `${model}/cmudict-en-us.dict`]);
  return Number(stderr.trim().split('\n').at(-1)) / 1024;
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'transcription-eval-'));
  const load = await readLoad();
  try {
    const clips: Clip[] = [];
    for (const voice of voices) {
      for (let i = 0; i < sentenceCount; i++) {
        const text = sentences[i % sentences.length]!;
        const wav = await synthesize(dir, voice, text, `${voice}-${i}`);
        clips.push({ group: voice, wav, text, seconds: (await readWavInfo(wav)).durationSeconds });
      }
    }
    const human = humanRecordings();
    for (const r of human) {
      const wav = await asWav16k(r);
      clips.push({ group: `human-${r.set}`, wav, text: r.text, seconds: (await readWavInfo(wav)).durationSeconds });
    }
    const groups = [...new Set(clips.map((c) => c.group))];
    // The same human speech as parts of longer recordings (not counted in the totals above them).
    const longer: Clip[] = [];
    for (const set of ['read', 'prompted'] as const) {
      const own = human.filter((r) => r.set === set);
      if (own.length === 0) continue;
      const wav = await joined(await Promise.all(own.map(asWav16k)), 1, path.join(dir, `human-${set}-joined.wav`));
      longer.push({ group: `human-${set}, one recording (1 s pauses)`, wav, text: own.map((r) => r.text).join(' '), seconds: (await readWavInfo(wav)).durationSeconds });
    }
    for (const r of human) {
      const wav = await afterClick(await asWav16k(r), path.join(dir, `click-${r.name}.wav`));
      longer.push({ group: 'human, each after a click and 2 s of silence', wav, text: r.text, seconds: (await readWavInfo(wav)).durationSeconds });
    }
    const longerGroups = [...new Set(longer.map((c) => c.group))];

    const rssBefore = process.memoryUsage().rss / 2 ** 20;
    const moonshine = new MoonshineEngine({ modelDir: setting(process.env, 'TRANSCRIPTION_LOCAL_MODEL_DIR') ?? '', threads: 1, concurrency: 1 });
    const loadStarted = performance.now();
    await moonshine.load();
    const loadMs = performance.now() - loadStarted;
    const newScores = await score(moonshine, [...clips, ...longer]);
    const moonshinePeak = process.resourceUsage().maxRSS / 1024;
    const modelAlone: SpeechToTextEngine = {
      id: 'moonshine-model-alone',
      description: 'the Moonshine model alone',
      maxSegmentSeconds: 30,
      supports: () => true,
      transcribeSegment: async ({ wavPath }) => ({ text: await moonshine.modelText(wavPath), words: null }),
    };
    const aloneScores = await score(modelAlone, [...clips, ...longer]);
    const oldScores = await score(new PocketSphinxEngine(), [...clips, ...longer]);
    const pocketSphinxPeak = await peakRssOfPocketSphinx(clips.find((c) => c.group === 'human-read')?.wav ?? clips[0]!.wav);

    const timing = await labelledRecording(dir);
    const timed = async (engine: SpeechToTextEngine) => timeErrors(timing.words, (await engine.transcribeSegment({ wavPath: timing.wav, language: 'en' })).words ?? []);
    const [newTimes, oldTimes] = [await timed(moonshine), await timed(new PocketSphinxEngine())];

    const row = (label: string, a: Score, b: Score, c: Score) =>
      `| ${label} | ${a.words} | ${pct(a)} | ${pct(b)} | ${pct(c)} | ${a.errors ? fmt(b.errors / a.errors, 2) : 'n/a'} | ${fmt(a.ms / 1000 / a.seconds, 2)} | ${fmt(b.ms / 1000 / b.seconds, 2)} |`;
    const rowOf = (label: string, gs: string[]) => row(label, total(oldScores, gs), total(newScores, gs), total(aloneScores, gs));
    const synthetic = groups.filter((g) => !g.startsWith('human'));
    const humanGroups = groups.filter((g) => g.startsWith('human'));
    const lines = [
      `### Local speech to text: PocketSphinx beside Moonshine base (\`npm run eval:transcription\`)`,
      '',
      `Run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC on ${os.cpus().length} cores (load average before: ${load.loadavg.map((x) => fmt(x, 2)).join(' / ')}, ${fmt(100 * load.busy, 0)} % busy: other work shared the machine). ` +
        `${sentenceCount} sentences in each synthetic voice, ${human.length} human recordings (${fmt(clips.filter((c) => c.group.startsWith('human')).reduce((a, c) => a + c.seconds, 0), 0)} s). ` +
        'WER without case, punctuation or number spelling; RTF = engine time / audio time, one clip at a time, Moonshine on one thread. ' +
        '"Model alone": the Moonshine model on the whole clip in one greedy call, without the service\'s cutting, trimming and shortened pauses. ' +
        'Below the totals, the human speech as parts of longer recordings (not in the totals).',
      '',
      '| set | words | WER PocketSphinx | WER Moonshine | WER Moonshine model alone | Moonshine / PocketSphinx | RTF PocketSphinx | RTF Moonshine |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...groups.map((g) => rowOf(g, [g])),
      rowOf('**all synthetic**', synthetic),
      ...(humanGroups.length ? [rowOf('**all human**', humanGroups)] : []),
      rowOf('**all**', groups),
      ...longerGroups.map((g) => rowOf(g, [g])),
      '',
      `Memory: Moonshine base loaded in ${fmt(loadMs / 1000, 1)} s; this process's peak RSS ${fmt(moonshinePeak, 0)} MB with the model loaded and run (${fmt(rssBefore, 0)} MB before loading it). ` +
        `PocketSphinx (a child process per call): ${fmt(pocketSphinxPeak, 0)} MB peak on one clip.`,
      '',
      `Word times against festival's own labels (${timingCount} sentences joined by pauses of 0.4-1.2 s, ${fmt(timing.words.at(-1)?.e ?? 0, 0)} s, one segment; words both recognised and labelled):`,
      '',
      '| engine | words compared | start error mean / median / p90 (ms) | end error mean / median / p90 (ms) |',
      '| --- | ---: | ---: | ---: |',
      ...([['PocketSphinx (its own alignment)', oldTimes], ['Moonshine (estimated: words over speech frames)', newTimes]] as const).map(
        ([label, t]) =>
          `| ${label} | ${t.matched} of ${timing.words.length} | ${fmt(meanOf(t.start) * 1000, 0)} / ${fmt(quantile(t.start, 0.5) * 1000, 0)} / ${fmt(quantile(t.start, 0.9) * 1000, 0)} | ${fmt(meanOf(t.end) * 1000, 0)} / ${fmt(quantile(t.end, 0.5) * 1000, 0)} / ${fmt(quantile(t.end, 0.9) * 1000, 0)} |`,
      ),
      '',
      'Moonshine\'s misrecognitions on the human recordings (reference → heard):',
      '',
      ...humanGroups.flatMap((g) => newScores.get(g)!.worst.map((w) => `- ${w.text} → ${w.said}`)),
      '',
      'In the human recordings joined into one per set:',
      '',
      ...longerGroups.filter((g) => g.includes('one recording')).flatMap((g) => newScores.get(g)!.worst.map((w) => `- ${w.said}`)),
    ];
    writeSection('transcription-eval', lines.join('\n'));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

await main();
