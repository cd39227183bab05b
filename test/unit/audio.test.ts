import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  encodePcmStream, findPauses, formatTimestamp, frameLevels, parseSilenceEvents, parseWavHeader, planSamples, planSegments,
  readWavInfo, silenceThreshold, sniffAudioContainer, wavFile,
} from '../../lib/audio/index.js';
import { checkFileSignature } from '../../lib/digitization/file-signatures.js';
import { festivalUtterances, splitText } from '../../lib/speech/engines.js';

const run = promisify(execFile);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'audio-unit-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));
const ffmpeg = (...args: string[]) => run('ffmpeg', ['-nostdin', '-hide_banner', '-loglevel', 'error', '-y', ...args]);

/** lib/audio: the pieces transcription, speech and voices share. */
describe('lib/audio', function () {
  this.timeout(60_000);

  it('segments are cut in the pause nearest each target length, never longer than the maximum', () => {
    const pauses = [{ start: 9, end: 9.6 }, { start: 21, end: 21.4 }, { start: 33, end: 34 }];
    assert.deepEqual(planSegments({ durationSeconds: 40, pauses, targetSeconds: 10, maxSeconds: 15 }).map((s) => [s.start, s.end]), [[0, 9.3], [9.3, 21.2], [21.2, 33.5], [33.5, 40]]);
    // No pause in reach: a hard cut at the maximum.
    assert.deepEqual(planSegments({ durationSeconds: 40, pauses: [], targetSeconds: 10, maxSeconds: 15 }).map((s) => s.end), [15, 30, 40]);
    assert.deepEqual(planSegments({ durationSeconds: 5, pauses, targetSeconds: 10 }), [{ index: 0, start: 0, end: 5 }]);
  });

  it('silencedetect events pair up; an open pause runs to the end', () => {
    const text = 'frame:1\nlavfi.silence_start=-0.01\nlavfi.silence_end=0.5\nlavfi.silence_duration=0.5\nlavfi.silence_start=3.25\n';
    assert.deepEqual(parseSilenceEvents(text, 4), [{ start: 0, end: 0.5 }, { start: 3.25, end: 4 }]);
  });

  it('samples start and end in pauses, fit sample_duration, are spread over the recording and carry mm:ss', () => {
    // 12 one-second runs of speech separated by one-second pauses, 24 s long.
    const pauses = Array.from({ length: 12 }, (_, i) => ({ start: 2 * i + 1, end: 2 * i + 2 }));
    const levels = { frameSeconds: 0.02, db: new Float32Array(1200).fill(-20) };
    const samples = planSamples({ durationSeconds: 24, pauses, levels, sampleSeconds: 5, maxSamples: 3 });
    assert.equal(samples.length, 3);
    for (const s of samples) {
      assert.ok(s.duration <= 5, `${s.duration}`);
      const inPause = (t: number) => t === 0 || pauses.some((p) => t >= p.start - 1e-9 && t <= p.end + 1e-9);
      assert.ok(inPause(s.start) && inPause(s.end), JSON.stringify(s));
    }
    assert.deepEqual(samples.map((s) => s.index), [0, 1, 2]);
    assert.ok(samples[2]!.start > 12, 'the last sample comes from the second half');
    assert.equal(samples[0]!.sourceTimestamp, '00:00');
    assert.equal(formatTimestamp(7503.9), '125:03');
    // Speech without any pause is cut at its quietest frames.
    const long = planSamples({ durationSeconds: 30, pauses: [], levels: { frameSeconds: 0.02, db: new Float32Array(1500).fill(-20) }, sampleSeconds: 10, maxSamples: 10 });
    assert.ok(long.length >= 3 && long.every((s) => s.duration <= 10), JSON.stringify(long));
    // No speech at all: no sample.
    assert.deepEqual(planSamples({ durationSeconds: 10, pauses: [{ start: 0, end: 10 }], levels, sampleSeconds: 5, maxSamples: 3 }), []);
  });

  it('the silence threshold adapts to the recording level, and finds the pauses of quiet and noisy speech alike', async () => {
    const speech = path.join(dir, 'speech.wav');
    await run('flite', ['-voice', 'kal16', '-t', 'First sentence here.', '-o', path.join(dir, 'a.wav')]);
    await ffmpeg('-i', path.join(dir, 'a.wav'), '-af', 'apad=pad_dur=1', path.join(dir, 'a1.wav'));
    await ffmpeg('-i', path.join(dir, 'a1.wav'), '-i', path.join(dir, 'a.wav'), '-filter_complex', 'concat=n=2:v=0:a=1', speech);
    const quiet = path.join(dir, 'quiet.wav');
    await ffmpeg('-i', speech, '-af', 'volume=-30dB', quiet);
    const noisy = path.join(dir, 'noisy.wav');
    await ffmpeg('-i', speech, '-f', 'lavfi', '-i', 'anoisesrc=a=0.01:c=white:r=16000', '-filter_complex', 'amix=inputs=2:duration=first', noisy);
    const found: number[] = [];
    for (const f of [speech, quiet, noisy]) {
      const { durationSeconds } = await readWavInfo(f);
      const a = await findPauses(f, { durationSeconds });
      const middle = a.pauses.filter((p) => p.start > 0.3 && p.end < durationSeconds - 0.3);
      assert.equal(middle.length, 1, `${path.basename(f)}: ${JSON.stringify(a.pauses)} at ${a.threshold.noiseDb} dB`);
      found.push(a.threshold.noiseDb);
    }
    // Quieter speech never gets a higher threshold (it is floored at -70 dB); noise raises it.
    assert.ok(found[1]! <= found[0]! && found[2]! > found[0]! + 10, `thresholds ${found.join(', ')}`);
    const silent = silenceThreshold(frameLevels(new Int16Array(16000), 16000));
    assert.equal(silent.silent, true);
  });

  it('a WAV header with no samples after it has no levels and no pauses to find: silent, not an error', async () => {
    const empty = path.join(dir, 'header-only.wav');
    fs.writeFileSync(empty, wavFile({ sampleRate: 16000, channels: 1 }, Buffer.alloc(0)));
    const a = await findPauses(empty, { durationSeconds: 0 });
    assert.equal(a.levels.db.length, 0);
    assert.equal(a.threshold.silent, true);
  });

  it('encodes a PCM stream into a WAV whose header has the right sizes, and recognises containers by their first bytes', async () => {
    async function* pcm() {
      yield Buffer.alloc(16000 * 2, 1);
      yield Buffer.alloc(16000 * 2, 2);
    }
    const parts: Buffer[] = [];
    for await (const b of encodePcmStream(pcm(), { sampleRate: 16000 }, { format: 'wav', sampleRate: 24000 })) parts.push(b);
    const wav = Buffer.concat(parts);
    assert.equal(wav.readUInt32LE(4), wav.length - 8);
    assert.equal(wav.readUInt32LE(40), wav.length - 44);
    const layout = parseWavHeader(wav)!;
    assert.equal(layout.sampleRate, 24000);
    assert.ok(Math.abs((wav.length - 44) / 48000 - 2) < 0.01);
    assert.equal(sniffAudioContainer(wavFile({ sampleRate: 8000, channels: 1 }, Buffer.alloc(10))), 'wav');

    const source = path.join(dir, 'src.wav');
    fs.writeFileSync(source, wav);
    const kinds: Record<string, string> = { ogg: 'ogg', flac: 'flac', webm: 'webm', m4a: 'iso-media', mp3: 'mp3' };
    for (const [ext, kind] of Object.entries(kinds)) {
      const file = path.join(dir, `x.${ext}`);
      await ffmpeg('-i', source, ...(ext === 'webm' || ext === 'ogg' ? ['-c:a', 'libopus'] : []), file);
      const head = fs.readFileSync(file).subarray(0, 4096);
      assert.equal(sniffAudioContainer(head), kind, ext);
    }
    // Document uploads name these containers when a file claims to be something else.
    const refused = await checkFileSignature({ path: path.join(dir, 'x.flac'), name: 'song.mp3', extension: 'mp3' });
    assert.deepEqual(refused, { ok: false, reason: 'song.mp3 is a FLAC audio file, not a .mp3 file' });
  });

  it('speech input is cut at sentence ends: a short first piece, then longer ones', () => {
    const text = Array.from({ length: 30 }, (_, i) => `This is sentence number ${i} of the text.`).join(' ');
    const pieces = splitText(text, 'en');
    assert.ok(pieces[0]!.length <= 200 && pieces[0]!.length >= 40, pieces[0]);
    assert.ok(pieces.slice(1).every((p) => p.length <= 600));
    assert.equal(pieces.join(' '), text);
    assert.deepEqual(splitText('Short.', 'en'), ['Short.']);
  });

  it("festival gets a long sentence as utterances of at most 160 characters, every word kept (one utterance of 2,000 digits took it over 100 s)", () => {
    const sentences = 'The meeting starts at nine. Please bring the report! ';
    const figures = Array.from({ length: 120 }, (_, i) => `${1000 + i * 7}`).join(' ');
    const digits = '1234567890'.repeat(50);
    const text = `${sentences}${figures}. ${digits}. 😀${'😀'.repeat(100)} done.`;
    const forFestival = festivalUtterances(text, 'en');
    assert.equal(forFestival.replace(/\n\n/g, ''), text, 'only utterance breaks are added');
    const utterances = forFestival.split('\n\n');
    assert.ok(utterances.length >= 6, `${utterances.length} utterances`);
    for (const u of utterances) {
      const sentenceParts = u.split(/(?<=[.!?]) /);
      assert.ok(sentenceParts.every((p) => p.length <= 160), `an utterance of ${u.length} characters: ${u.slice(0, 60)}…`);
      assert.doesNotMatch(u, /^[\uDC00-\uDFFF]|[\uD800-\uDBFF]$/, 'no emoji is cut in half');
    }
    assert.ok(utterances.slice(1, -3).every((u) => /^ \d+ \d+/.test(u) || /^\d/.test(u)), 'the figures are cut between numbers');
    assert.equal(festivalUtterances(sentences, 'en'), sentences, 'short sentences stay as they are');
    const clauses = 'When the tide turns in the late afternoon and the wind comes round from the west, the boats that left at dawn come back to the harbour one after another, and the market opens again for the evening.';
    assert.equal(festivalUtterances(clauses, 'en'), clauses.replace('another, ', 'another,\n\n '), 'a long sentence is cut after a clause mark, where a speaker pauses anyway');
  });
});
