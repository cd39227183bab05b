import { open } from 'node:fs/promises';
import { AudioUnreadable, probeAudio, sniffAudioContainer } from '../audio/index.js';
import { badRequest } from '../platform/errors.js';

/**
 * What a voice upload (an original recording or a sample) may be: any audio or video container
 * ffmpeg reads that this service recognises by its first bytes, holding an audio stream. The
 * signature decides, not the file name: a PDF called `voice.mp3` is refused as a PDF.
 */
export interface VoiceUpload {
  path: string;
  originalName: string;
  size: number;
}

/** Recognised containers and the extension their stored original gets. */
const containers = {
  mp3: 'mp3', wav: 'wav', ogg: 'ogg', flac: 'flac', 'iso-media': 'mp4', webm: 'webm', matroska: 'mkv',
  avi: 'avi', aiff: 'aiff', asf: 'wma', 'mpeg-ts': 'ts', 'mpeg-ps': 'mpg', flv: 'flv', amr: 'amr', caf: 'caf', au: 'au', aac: 'aac',
} as const;
export type VoiceContainer = keyof typeof containers;

const ascii = (b: Buffer, s: number, e: number) => b.toString('latin1', s, e);

/** Containers beyond those lib/audio/signatures.ts knows (which transcription accepts). */
function sniffMore(head: Buffer): VoiceContainer | null {
  if (head.length >= 12 && ascii(head, 0, 4) === 'RIFF' && ascii(head, 8, 12) === 'AVI ') return 'avi';
  if (head.length >= 12 && ascii(head, 0, 4) === 'FORM' && ['AIFF', 'AIFC'].includes(ascii(head, 8, 12))) return 'aiff';
  if (head.length >= 16 && head.subarray(0, 16).equals(Buffer.from('3026b2758e66cf11a6d900aa0062ce6c', 'hex'))) return 'asf';
  if (head.length >= 3 * 188 && head[0] === 0x47 && head[188] === 0x47 && head[376] === 0x47) return 'mpeg-ts';
  if (head.length >= 4 && head.readUInt32BE(0) === 0x000001ba) return 'mpeg-ps';
  if (head.length >= 4 && ascii(head, 0, 3) === 'FLV' && head[3] === 1) return 'flv';
  if (head.length >= 6 && ascii(head, 0, 5) === '#!AMR') return 'amr';
  if (head.length >= 8 && ascii(head, 0, 4) === 'caff') return 'caf';
  if (head.length >= 24 && ascii(head, 0, 4) === '.snd') return 'au';
  // AAC in ADTS: a 12-bit sync, MPEG layer 00, a valid sampling index.
  if (head.length >= 7 && head[0] === 0xff && (head[1]! & 0xf6) === 0xf0 && ((head[2]! >> 2) & 0x0f) < 13) return 'aac';
  return null;
}

/** Names of what a refused file looks like, so that the refusal says what was sent. */
function looksLike(head: Buffer): string | null {
  if (ascii(head, 0, 5) === '%PDF-') return 'a PDF document';
  if (head.length >= 4 && head.readUInt32BE(0) === 0x504b0304) return 'a ZIP archive (or an Office document)';
  if (head.length >= 8 && head.subarray(0, 8).equals(Buffer.from('89504e470d0a1a0a', 'hex'))) return 'a PNG image';
  if (head.length >= 3 && head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return 'a JPEG image';
  if (ascii(head, 0, 6) === 'GIF87a' || ascii(head, 0, 6) === 'GIF89a') return 'a GIF image';
  if (!head.subarray(0, 512).includes(0)) return 'a text file';
  return null;
}

export function sniffVoiceContainer(head: Buffer): VoiceContainer | null {
  return (sniffAudioContainer(head) as VoiceContainer | null) ?? sniffMore(head);
}

export const containerExtension = (c: VoiceContainer) => containers[c];

export interface CheckedUpload {
  container: VoiceContainer;
  durationSeconds: number;
}

/**
 * Checks an upload: not empty, a recognised container by its signature, readable by ffprobe, with
 * an audio stream and a duration; at most `maxSeconds` long. Every refusal is a 400 naming the
 * file and the reason.
 */
export async function checkVoiceUpload(upload: VoiceUpload, options: { field: string; maxSeconds: number }): Promise<CheckedUpload> {
  const name = upload.originalName || `the ${options.field} upload`;
  if (upload.size === 0) throw badRequest(`${name} is empty`);
  const fh = await open(upload.path, 'r');
  let head: Buffer;
  try {
    const buf = Buffer.alloc(64 * 1024);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    head = buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
  const container = sniffVoiceContainer(head);
  if (!container) {
    const what = looksLike(head);
    throw badRequest(`${name} is ${what ?? 'not an audio or video file this service recognises'}; ${options.field} must be an audio or video file (mp3, wav, ogg/opus, flac, m4a/mp4/mov, webm, mkv, avi, aiff, wma, ts, flv, amr, caf, au, aac)`);
  }
  let probe;
  try {
    probe = await probeAudio(upload.path, { timeoutMs: 60_000 });
  } catch (err) {
    if (err instanceof AudioUnreadable) throw badRequest(`${name} looks like ${containerExtension(container)} but cannot be read: the file is damaged or truncated`);
    throw err;
  }
  if (probe.audioStreams.length === 0) throw badRequest(`${name} has no audio stream`);
  if (!(probe.durationSeconds > 0)) throw badRequest(`${name} has no readable duration: the file is damaged or truncated`);
  if (probe.durationSeconds > options.maxSeconds) {
    throw badRequest(`${name} is ${Math.round(probe.durationSeconds)} s long; at most ${options.maxSeconds} s are accepted for ${options.field}`);
  }
  return { container, durationSeconds: probe.durationSeconds };
}
