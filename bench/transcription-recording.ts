/**
 * The long recording the transcription benchmarks share (bench/transcript-latency.ts,
 * bench/transcription-memory.ts): a fixed English text of `sentenceCount` sentences (default 45,
 * about 247 s) spoken by festival (cmu_us_slt_arctic_hts), each followed by 0.8 s of silence, as a
 * 64 kbit/s MP3. It depends only on the text, so it is kept in the temporary folder between runs.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { libraryPassage } from '../test/support/audio.js';

const run = promisify(execFile);

const base = [
  ...libraryPassage,
  'Most of the money for the party comes from a small charity run by former teachers.',
  'A new bus line will stop right in front of the main door from next month.',
  'The old card catalogue is kept in the basement as a piece of local history.',
];

/** What the recording of `sentenceCount` sentences says. */
export const recordingText = (sentenceCount: number) => Array.from({ length: sentenceCount }, (_, i) => base[i % base.length]!).join(' ');

/** The recording's MP3 (made once, then taken from the temporary folder). */
export async function longRecording(sentenceCount: number): Promise<string> {
  const cached = path.join(os.tmpdir(), `bench-transcript-recording-${sentenceCount}.mp3`);
  if (fs.existsSync(cached)) return cached;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-recording-'));
  try {
    const padded: string[] = [];
    for (let i = 0; i < sentenceCount; i++) {
      const wav = path.join(dir, `s${i}.wav`);
      const child = execFile('text2wave', ['-eval', '(voice_cmu_us_slt_arctic_hts)', '-o', wav]);
      child.stdin!.end(base[i % base.length]);
      await new Promise((resolve, reject) => child.once('exit', (code) => (code === 0 ? resolve(null) : reject(new Error(`text2wave ${code}`)))));
      const out = path.join(dir, `p${i}.wav`);
      await run('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-i', wav, '-af', 'aresample=16000,apad=pad_dur=0.8', '-ac', '1', out]);
      padded.push(out);
    }
    const list = path.join(dir, 'list.txt');
    fs.writeFileSync(list, padded.map((p) => `file '${p}'`).join('\n'));
    const mp3 = path.join(dir, 'recording.mp3');
    await run('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-f', 'concat', '-safe', '0', '-i', list, '-c:a', 'libmp3lame', '-b:a', '64k', mp3]);
    fs.copyFileSync(mp3, cached);
    return cached;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
