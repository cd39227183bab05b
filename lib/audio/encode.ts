import { once } from 'node:events';
import { runTool, streamTool, isInputFailure } from '../platform/child-process.js';
import { AudioUnreadable } from './errors.js';
import { wavFile } from './wav.js';

/**
 * Encoding with ffmpeg into the four formats the service hands out:
 * - `mp3`: MPEG-1/2 Layer III (libmp3lame), `audio/mpeg`;
 * - `opus`: Opus in an Ogg container (libopus; Opus takes 48, 24, 16, 12 or 8 kHz), `audio/ogg`;
 * - `wav`: RIFF/WAVE, PCM s16le, with a 44-byte header written here (sizes correct even when the
 *   audio came through a pipe), `audio/wav`;
 * - `pcm`: raw signed 16-bit little-endian samples, no header, `application/octet-stream`.
 */
export const audioFormats = {
  mp3: { contentType: 'audio/mpeg', extension: 'mp3' },
  opus: { contentType: 'audio/ogg', extension: 'opus' },
  wav: { contentType: 'audio/wav', extension: 'wav' },
  pcm: { contentType: 'application/octet-stream', extension: 'pcm' },
} as const;
export type AudioFormat = keyof typeof audioFormats;

export interface EncodeOptions {
  format: AudioFormat;
  /** Output sample rate (default 24,000 Hz). */
  sampleRate?: number;
  /** Output channels (default 1). */
  channels?: number;
  /** mp3 / opus bit rate (defaults: mp3 64 kbit/s, opus 48 kbit/s). */
  bitrateKbps?: number;
  /** Opus at a constant bit rate (`-vbr off`): the rate is then what it says. Default: VBR. */
  constantBitrate?: boolean;
  timeoutMs?: number;
  signal?: AbortSignal;
}

/**
 * The voice interface's sample format: Opus in Ogg, mono, 48 kHz, 96 kbit/s constant bit rate
 * (with VBR, speech came out at 99-174 kbit/s, so "96 kbps" would not be true).
 */
export const voiceSampleOpus: EncodeOptions = { format: 'opus', sampleRate: 48000, channels: 1, bitrateKbps: 96, constantBitrate: true };

/** ffmpeg output arguments of a format (without the output target). */
function codecArgs(o: EncodeOptions): string[] {
  const common = ['-ac', String(o.channels ?? 1), '-ar', String(o.sampleRate ?? 24000), '-map_metadata', '-1'];
  switch (o.format) {
    case 'mp3':
      return [...common, '-c:a', 'libmp3lame', '-b:a', `${o.bitrateKbps ?? 64}k`, '-f', 'mp3'];
    case 'opus':
      return [...common, '-c:a', 'libopus', '-b:a', `${o.bitrateKbps ?? 48}k`, ...(o.constantBitrate ? ['-vbr', 'off'] : []), '-application', 'audio', '-f', 'ogg'];
    case 'wav':
    case 'pcm':
      return [...common, '-c:a', 'pcm_s16le', '-f', 's16le'];
  }
}

const quiet = ['-nostdin', '-hide_banner', '-nostats', '-loglevel', 'error'];

function unreadable(err: unknown): unknown {
  return isInputFailure(err) ? new AudioUnreadable(`the audio could not be encoded (${err.message})`) : err;
}

/**
 * Encodes (a part of) a media file: `start`/`duration` cut on the output side, which is exact to
 * the sample. The result is the encoded bytes; a wav gets its header here.
 */
export async function encodeFile(input: string, options: EncodeOptions & { start?: number; duration?: number; maxOutputBytes?: number }): Promise<Buffer> {
  const cut = [...(options.start !== undefined ? ['-ss', options.start.toFixed(3)] : []), ...(options.duration !== undefined ? ['-t', options.duration.toFixed(3)] : [])];
  try {
    const { stdout } = await runTool('ffmpeg', [...quiet, '-i', input, '-map', '0:a:0', '-vn', ...cut, ...codecArgs(options), 'pipe:1'], {
      timeoutMs: options.timeoutMs ?? 10 * 60_000,
      signal: options.signal,
      maxOutputBytes: options.maxOutputBytes,
    });
    return options.format === 'wav' ? wavFile({ sampleRate: options.sampleRate ?? 24000, channels: options.channels ?? 1 }, stdout) : stdout;
  } catch (err) {
    throw unreadable(err);
  }
}

export interface Cut {
  start: number;
  end: number;
  /** Output file path. */
  output: string;
}

/**
 * Cuts many pieces of one recording into files in as few ffmpeg runs as possible (ten outputs per
 * run; one run per piece was 2.5 times slower on 48 samples). wav/pcm pieces are raw s16le here
 * (use encodeFile for a wav with its header).
 */
export async function encodeCuts(input: string, cuts: readonly Cut[], options: EncodeOptions): Promise<void> {
  for (let i = 0; i < cuts.length; i += 10) {
    const batch = cuts.slice(i, i + 10);
    const outputs = batch.flatMap((c) => ['-map', '0:a:0', '-ss', c.start.toFixed(3), '-t', (c.end - c.start).toFixed(3), ...codecArgs(options), '-y', c.output]);
    try {
      await runTool('ffmpeg', [...quiet, '-i', input, ...outputs], { timeoutMs: options.timeoutMs ?? 10 * 60_000, signal: options.signal });
    } catch (err) {
      throw unreadable(err);
    }
  }
}

export interface PcmInput {
  sampleRate: number;
  channels?: number;
}

/**
 * Encodes a stream of raw s16le chunks as it arrives and yields the encoded bytes as ffmpeg
 * produces them, so the first audio can be sent before the input has ended (mp3, opus, pcm). A
 * wav needs its length in the header: it is yielded whole at the end. pcm at the input's own rate
 * and channel count passes through untouched. Stopping early (break/return) kills the encoder; an
 * error of the input stream ends the output with that error.
 */
export async function* encodePcmStream(chunks: AsyncIterable<Buffer>, input: PcmInput, options: EncodeOptions): AsyncGenerator<Buffer> {
  const rate = options.sampleRate ?? 24000;
  const channels = options.channels ?? 1;
  const passthrough = (options.format === 'pcm' || options.format === 'wav') && input.sampleRate === rate && (input.channels ?? 1) === channels;
  if (passthrough) {
    if (options.format === 'pcm') {
      for await (const c of chunks) yield c;
      return;
    }
    const parts: Buffer[] = [];
    for await (const c of chunks) parts.push(c);
    yield wavFile({ sampleRate: rate, channels }, Buffer.concat(parts));
    return;
  }
  const tool = streamTool(
    'ffmpeg',
    [...quiet, '-f', 's16le', '-ar', String(input.sampleRate), '-ac', String(input.channels ?? 1), '-i', 'pipe:0', '-flush_packets', '1', ...codecArgs(options), 'pipe:1'],
    { timeoutMs: options.timeoutMs ?? 10 * 60_000, signal: options.signal },
  );
  let inputError: unknown = null;
  const pump = (async () => {
    try {
      for await (const c of chunks) {
        if (!tool.stdin.write(c)) await once(tool.stdin, 'drain');
      }
      tool.stdin.end();
    } catch (err) {
      inputError = err;
      tool.kill();
    }
  })();
  const wavParts: Buffer[] = [];
  try {
    for await (const out of tool.stdout) {
      if (options.format === 'wav') wavParts.push(out as Buffer);
      else yield out as Buffer;
    }
    await pump;
    if (inputError) throw inputError;
    await tool.done.catch((err: unknown) => {
      throw unreadable(err);
    });
    if (options.format === 'wav') yield wavFile({ sampleRate: rate, channels }, Buffer.concat(wavParts));
  } finally {
    tool.kill();
    tool.stdin.destroy();
  }
}
