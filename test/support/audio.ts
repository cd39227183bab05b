import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';

/**
 * Real audio for the tests, made here with the Debian tools (festival, flite, espeak-ng, ffmpeg),
 * a word error rate, and a small static file server for `audio_url`.
 */
function sh(cmd: string, args: string[], input?: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { timeout: 300_000, encoding: 'buffer', maxBuffer: 512 * 1024 * 1024 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${cmd} ${args.join(' ')}: ${stderr.toString() || err.message}`)) : resolve(stdout),
    );
    child.stdin?.end(input);
  });
}

/** A plain English passage (12 sentences) for recordings of a minute or so. */
export const libraryPassage = [
  'The library on the corner of the square opens at nine every morning.',
  'Visitors can borrow up to ten books for three weeks at a time.',
  'On Saturdays the reading room is full of students preparing for their exams.',
  'The children section has a small theatre where stories are read aloud.',
  'Last year the city paid for new windows and a better heating system.',
  'A group of volunteers repaired the old maps that hang in the main hall.',
  'The coffee machine near the entrance is the most popular place in the building.',
  'Every month a local author comes to talk about writing and answer questions.',
  'The librarians say that audio books are borrowed more often than ever before.',
  'In the summer the garden behind the library is used for music and poetry evenings.',
  'People who live far away can order books online and collect them at the post office.',
  'The library will celebrate its hundredth birthday with a large party next spring.',
];

export const audioDir = fs.mkdtempSync(path.join(os.tmpdir(), 'test-audio-'));
process.once('exit', () => fs.rmSync(audioDir, { recursive: true, force: true }));
let counter = 0;
const fresh = (ext: string) => path.join(audioDir, `a${process.pid}-${++counter}.${ext}`);

export type Voice = 'festival-slt' | 'flite-slt' | 'flite-kal' | 'espeak';

/** Speech of `text` as a WAV file. espeak takes a language voice (`espeak-ng -v`). */
export async function speak(text: string, voice: Voice = 'festival-slt', espeakVoice = 'en-us'): Promise<string> {
  const out = fresh('wav');
  if (voice === 'festival-slt') await sh('text2wave', ['-eval', '(voice_cmu_us_slt_arctic_hts)', '-o', out], text);
  else if (voice === 'flite-slt' || voice === 'flite-kal') await sh('flite', ['-voice', voice === 'flite-slt' ? 'slt' : 'kal16', '-t', text, '-o', out]);
  else await sh('espeak-ng', ['-v', espeakVoice, '-w', out, text]);
  return out;
}

const ffmpeg = (...args: string[]) => sh('ffmpeg', ['-nostdin', '-hide_banner', '-loglevel', 'error', '-y', ...args]);

/** The same audio in another container (by extension: mp3 wav ogg flac m4a mp4 webm). */
export async function encodeAs(wav: string, ext: string): Promise<string> {
  const out = fresh(ext);
  const codec: Record<string, string[]> = {
    mp3: ['-c:a', 'libmp3lame'], wav: ['-c:a', 'pcm_s16le'], ogg: ['-c:a', 'libopus'], flac: ['-c:a', 'flac'],
    m4a: ['-c:a', 'aac'], webm: ['-c:a', 'libopus'],
  };
  if (ext === 'mp4') {
    await ffmpeg('-f', 'lavfi', '-i', 'color=c=blue:s=160x120:r=10', '-i', wav, '-shortest', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-c:a', 'aac', out);
  } else {
    await ffmpeg('-i', wav, ...(codec[ext] ?? []), out);
  }
  return out;
}

/** Concatenates WAV files with `gapSeconds` of silence between them (a longer recording with pauses). */
export async function concatWithPauses(wavs: string[], gapSeconds = 0.8): Promise<string> {
  const out = fresh('wav');
  const inputs = wavs.flatMap((w) => ['-i', w]);
  const chains = wavs.map((_, i) => `[${i}:a]aresample=16000,aformat=channel_layouts=mono,apad=pad_dur=${gapSeconds}[a${i}]`).join(';');
  const labels = wavs.map((_, i) => `[a${i}]`).join('');
  await ffmpeg(...inputs, '-filter_complex', `${chains};${labels}concat=n=${wavs.length}:v=0:a=1[out]`, '-map', '[out]', out);
  return out;
}

export async function silence(seconds: number): Promise<string> {
  const out = fresh('wav');
  await ffmpeg('-f', 'lavfi', '-i', `anullsrc=r=16000:cl=mono`, '-t', String(seconds), out);
  return out;
}

/** ffprobe's view of a file (or of raw PCM with `raw`). */
export async function probe(file: string, raw?: { rate: number }): Promise<{ codec: string; format: string; duration: number; sampleRate: number; channels: number; bitRate: number }> {
  const args = ['-v', 'error', '-show_entries', 'stream=codec_name,sample_rate,channels:format=format_name,duration,bit_rate', '-of', 'json'];
  const out = JSON.parse((await sh('ffprobe', [...args, ...(raw ? ['-f', 's16le', '-ar', String(raw.rate), '-ac', '1'] : []), file])).toString()) as {
    streams: Array<{ codec_name: string; sample_rate: string; channels: number }>;
    format: { format_name: string; duration: string; bit_rate?: string };
  };
  const s = out.streams[0]!;
  return { codec: s.codec_name, format: out.format.format_name, duration: Number(out.format.duration), sampleRate: Number(s.sample_rate), channels: s.channels, bitRate: Number(out.format.bit_rate ?? 0) };
}

/** Writes bytes to a temporary file (to probe an answer body). */
export function tempFile(bytes: Buffer | Uint8Array, ext: string): string {
  const out = fresh(ext);
  fs.writeFileSync(out, bytes);
  return out;
}

/** Words for comparison: lower case, letters, digits and apostrophes; compounds split the engine's way. */
export function words(text: string): string[] {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}'\s]+/gu, ' ')
    .split(/\s+/)
    .filter(Boolean)
    .flatMap((w) => (w === 'seashells' ? ['sea', 'shells'] : [w]));
}

/** Word error rate: word-level edit distance over the reference length. */
export function wer(reference: string, hypothesis: string): number {
  const r = words(reference);
  const h = words(hypothesis);
  let prev = Array.from({ length: h.length + 1 }, (_, j) => j);
  for (let i = 1; i <= r.length; i++) {
    const cur = [i];
    for (let j = 1; j <= h.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (r[i - 1] === h[j - 1] ? 0 : 1));
    prev = cur;
  }
  return r.length ? prev[h.length]! / r.length : 0;
}

/** Serves files on 127.0.0.1: `url(file)` gives their address; unknown paths are 404. */
export async function startFileServer(): Promise<{ url(file: string): string; close(): Promise<void>; requests: string[] }> {
  const served = new Map<string, string>();
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    requests.push(req.url ?? '');
    const file = served.get(req.url ?? '');
    if (!file) return void res.writeHead(404).end('not found');
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': fs.statSync(file).size });
    fs.createReadStream(file).pipe(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url(file: string) {
      const p = `/${served.size}/${path.basename(file)}`;
      served.set(p, file);
      return base + p;
    },
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
