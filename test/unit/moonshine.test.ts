import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { readWavSamples, wavFile } from '../../lib/audio/wav.js';
import { setting } from '../../lib/platform/config.js';
import { MoonshineEngine } from '../../lib/providers/moonshine.js';
import { audioDir, concatWithPauses, libraryPassage, speak } from '../support/audio.js';
import { normalizedWords, wordErrors } from '../support/speech-recordings.js';

/**
 * The local engine on recordings a user may send that the model alone gets wrong: speech that
 * follows a short sound (a click, a beep) and a pause, which Moonshine answers with nothing at all
 * when given the audio as it is; and sound that is not speech, which must stay without words.
 */
describe('Moonshine engine: speech after a sound and a pause', function () {
  this.timeout(120_000);
  const engine = new MoonshineEngine({ modelDir: setting(process.env, 'TRANSCRIPTION_LOCAL_MODEL_DIR') ?? '' });
  const rate = 16_000;
  const silence = (seconds: number) => new Int16Array(Math.round(seconds * rate));
  /** A burst of noise at a fixed seed: the click of a microphone switched on. */
  const click = (seconds = 0.1) => {
    let seed = 7;
    return Int16Array.from({ length: Math.round(seconds * rate) }, () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return Math.round(10_000 * (seed / 0x7fffffff - 0.5));
    });
  };
  const beep = (seconds: number, hz: number) => Int16Array.from({ length: Math.round(seconds * rate) }, (_, i) => Math.round(10_000 * Math.sin((2 * Math.PI * hz * i) / rate)));
  let n = 0;
  const wav = async (...parts: Int16Array[]) => {
    const all = new Int16Array(parts.reduce((sum, p) => sum + p.length, 0));
    let at = 0;
    for (const p of parts) {
      all.set(p, at);
      at += p.length;
    }
    const file = path.join(audioDir, `moonshine-${process.pid}-${++n}.wav`);
    await writeFile(file, wavFile({ sampleRate: rate, channels: 1 }, Buffer.from(all.buffer)));
    return file;
  };
  const spoken = async (text: string, voice: 'flite-slt' | 'espeak') => {
    const file = await speak(text, voice);
    const resampled = path.join(audioDir, `moonshine-${process.pid}-${++n}-16k.wav`);
    execFileSync('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-i', file, '-ar', String(rate), '-ac', '1', '-c:a', 'pcm_s16le', resampled]);
    return (await readWavSamples(resampled)).samples;
  };

  for (const [text, voice] of [['yes please', 'flite-slt'], ['call me back', 'espeak'], ['front center', 'espeak']] as const) {
    it(`"${text}" (${voice}) after a click and 2 s of silence comes back, timed after the pause`, async () => {
      const speech = await spoken(text, voice);
      const file = await wav(silence(0.5), click(), silence(2), speech, silence(0.5));
      const alone = await engine.modelText(file);
      const result = await engine.transcribeSegment({ wavPath: file, language: 'en' });
      // What the service gives, next to what the model alone makes of the same audio (often nothing).
      assert.deepEqual(normalizedWords(result.text).slice(0, 1), normalizedWords(text).slice(0, 1), `service: "${result.text}"; model alone: "${alone}"`);
      assert.ok(normalizedWords(result.text).length >= normalizedWords(text).length - 1, result.text);
      assert.ok(result.words!.every((w) => w.s >= 2.5), `words start after the pause: ${JSON.stringify(result.words)}`);
    });
  }

  it('a click, a beep or a hum alone gives no words', async () => {
    for (const parts of [
      [silence(1), click(), silence(1)],
      [silence(1), beep(0.5, 1000), silence(2), click(), silence(1)],
      [silence(1), beep(1, 120), silence(1)],
      [silence(1), click(0.5), silence(1)],
    ]) {
      const result = await engine.transcribeSegment({ wavPath: await wav(...parts), language: 'en' });
      assert.equal(result.text, '', JSON.stringify(result.words));
    }
  });
});

/**
 * A speaker who never pauses long enough to cut in: the engine still cuts the speech into stretches
 * the model takes (at most 15 s, in the quietest moment rather than inside a word), keeps the words,
 * and two runs at once stay well inside the engine's memory goal (issue #48: under 500 MB; measured
 * about 370 MB by bench/transcription-memory.ts). Measured in a process of its own: onnxruntime's
 * memory arena never gives memory back, so this process's own peak would say nothing.
 */
describe('Moonshine engine: long speech without pauses', function () {
  this.timeout(180_000);

  it('45 s of speech without a pause comes back whole, two runs at once under 420 MB for the engine', async () => {
    const sentences = await Promise.all(libraryPassage.map((text) => speak(text, 'flite-slt')));
    const joined = await concatWithPauses(sentences, 0);
    const continuous = path.join(audioDir, `moonshine-${process.pid}-continuous.wav`);
    execFileSync('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-i', joined, '-af', 'silenceremove=stop_periods=-1:stop_duration=0.05:stop_threshold=-40dB', '-ar', '16000', '-ac', '1', '-c:a', 'pcm_s16le', continuous]);
    const { samples } = await readWavSamples(continuous);
    assert.ok(samples.length / 16_000 > 40, `${samples.length / 16_000} s of speech`);

    const script = `
      const { MoonshineEngine } = await import(${JSON.stringify(path.resolve('lib/providers/moonshine.ts'))});
      const engine = new MoonshineEngine({ modelDir: ${JSON.stringify(setting(process.env, 'TRANSCRIPTION_LOCAL_MODEL_DIR') ?? '')}, concurrency: 2 });
      const before = process.memoryUsage().rss;
      const results = await Promise.all([1, 2].map(() => engine.transcribeSegment({ wavPath: ${JSON.stringify(continuous)}, language: 'en' })));
      console.log(JSON.stringify({ engineMb: (process.resourceUsage().maxRSS * 1024 - before) / 2 ** 20, texts: results.map((r) => r.text) }));`;
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' });
    const { engineMb, texts } = JSON.parse(out.trim().split('\n').at(-1)!) as { engineMb: number; texts: string[] };
    const reference = libraryPassage.join(' ');
    for (const text of texts) {
      const { errors, words } = wordErrors(reference, text);
      assert.ok(errors / words <= 0.1, `${errors} of ${words} words wrong: "${text}"`);
    }
    // Goal 500 MB; the default is meant to stay clearly under it (about 350 MB here; the stretches and
    // memory pattern before issue #48's measurements took 447 MB on this recording).
    assert.ok(engineMb < 420, `the engine took ${engineMb.toFixed(0)} MB`);
  });
});
