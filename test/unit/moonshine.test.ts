import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { readWavSamples, wavFile } from '../../lib/audio/wav.js';
import { setting } from '../../lib/platform/config.js';
import { MoonshineEngine } from '../../lib/providers/moonshine.js';
import { audioDir, speak } from '../support/audio.js';
import { normalizedWords } from '../support/speech-recordings.js';

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
