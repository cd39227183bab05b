import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { unzipSync } from 'fflate';
import { eventually, type client } from '../support/system.js';
import { concatWithPauses, encodeAs, libraryPassage, probe, speak, tempFile, type Voice } from '../support/audio.js';

/**
 * Helpers of the voice tests: recordings made here (speech with pauses), reading voices and their
 * samples through the API, decoding and measuring audio.
 */
type Http = ReturnType<typeof client>;
const run = promisify(execFile);

export const voicePath = (partner: string, voice: string) => `/api/voices/${encodeURIComponent(partner)}/${encodeURIComponent(voice)}`;

/** `sentences` of the library passage spoken by `voice`, with `gap` seconds of silence between them (a WAV). */
export async function recording(voice: Voice, sentences = libraryPassage, gap = 1.0): Promise<string> {
  return concatWithPauses(await Promise.all(sentences.map((s) => speak(s, voice))), gap);
}

/** Waits until neither splitting nor embedding is in progress; returns the voice. */
export async function settled(http: Http, key: string, partner: string, voice: string, timeoutMs = 180_000): Promise<any> {
  return eventually(
    `voice ${voice} to settle`,
    async () => {
      const r = await http('GET', voicePath(partner, voice), { key });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      return r.body.status.splitting !== 'in_progress' && r.body.status.embedding !== 'in_progress' ? r.body : null;
    },
    timeoutMs,
  );
}

/** Creates a voice from a file; returns the 201 body. */
export async function createVoice(http: Http, key: string, partner: string, name: string, file: { name: string; content: Buffer }, extra: Record<string, string> = {}) {
  const r = await http('POST', `/api/voices/${partner}`, { key, form: { name, file, ...extra } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body;
}

/** Downloads a URL of the API (with the key) as bytes. */
export async function download(baseUrl: string, path: string, key: string): Promise<{ status: number; type: string | null; bytes: Buffer; headers: Headers }> {
  const r = await fetch(baseUrl + path, { headers: { 'X-API-Key': key } });
  return { status: r.status, type: r.headers.get('content-type'), bytes: Buffer.from(await r.arrayBuffer()), headers: r.headers };
}

export const unzip = (bytes: Buffer) => Object.fromEntries(Object.entries(unzipSync(new Uint8Array(bytes))).map(([k, v]) => [k, Buffer.from(v)]));

/** 16 kHz mono samples of an audio file. */
export async function pcm16k(file: string): Promise<Int16Array> {
  const { stdout } = await run('ffmpeg', ['-nostdin', '-loglevel', 'error', '-i', file, '-ac', '1', '-ar', '16000', '-f', 's16le', '-'], { encoding: 'buffer', maxBuffer: 512 * 1024 * 1024 });
  const b = stdout as unknown as Buffer;
  return new Int16Array(new Uint8Array(b.subarray(0, b.length - (b.length % 2))).buffer);
}

/** Loudness (dBFS) of 10 ms frames. */
export function envelope(samples: Int16Array): number[] {
  const out: number[] = [];
  for (let i = 0; i + 160 <= samples.length; i += 160) {
    let sum = 0;
    for (let j = i; j < i + 160; j++) sum += (samples[j]! / 32768) ** 2;
    out.push(10 * Math.log10(sum / 160 + 1e-10));
  }
  return out;
}

/**
 * Where in `whole` the clip `part` is (seconds): the offset whose loudness envelope matches the
 * part's best (least mean absolute difference over the part's length), searched over the whole.
 */
export function locate(whole: number[], part: number[]): { offsetSeconds: number; error: number } {
  let best = { offsetSeconds: -1, error: Infinity };
  for (let off = 0; off + part.length <= whole.length; off++) {
    let e = 0;
    for (let i = 0; i < part.length; i++) e += Math.abs(Math.max(whole[off + i]!, -70) - Math.max(part[i]!, -70));
    e /= part.length;
    if (e < best.error) best = { offsetSeconds: off / 100, error: e };
  }
  return best;
}

/** Probes bytes as a file (ffprobe). */
export const probeBytes = (bytes: Buffer, ext: string) => probe(tempFile(bytes, ext));

export const mmss = (seconds: number) => `${String(Math.floor(seconds / 60)).padStart(2, '0')}:${String(Math.floor(seconds % 60)).padStart(2, '0')}`;

export { encodeAs, libraryPassage, probe, speak, tempFile };
