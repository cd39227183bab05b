import { runTool, streamTool, isInputFailure } from '../platform/child-process.js';
import { AudioUnreadable } from './errors.js';

/**
 * Decoding with ffmpeg: any container and codec ffmpeg reads, first audio stream (or the one
 * given), down-mixed and resampled. `-nostdin` always: ffmpeg must never wait for a terminal.
 */
export interface DecodeOptions {
  /** Output sample rate (default 16,000 Hz, what speech recognisers want). */
  sampleRate?: number;
  /** Output channels (default 1). */
  channels?: number;
  /** Audio stream to read, as ffprobe numbers it (default: the first audio stream). */
  streamIndex?: number;
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Decode at most this many seconds (ffmpeg `-t`): a header that understates the length cannot make the output longer. */
  maxSeconds?: number;
}

const inputArgs = (input: string, o: DecodeOptions) => [
  '-nostdin', '-hide_banner', '-nostats', '-loglevel', 'error', '-y', '-i', input,
  ...(o.maxSeconds !== undefined ? ['-t', String(o.maxSeconds)] : []),
  '-map', o.streamIndex === undefined ? '0:a:0' : `0:${o.streamIndex}`, '-vn', '-sn', '-dn',
  '-ac', String(o.channels ?? 1), '-ar', String(o.sampleRate ?? 16000),
];

function unreadable(err: unknown): unknown {
  return isInputFailure(err) ? new AudioUnreadable(`the audio could not be decoded (${err.message})`) : err;
}

/** Decodes to a 16-bit PCM WAV file (16 kHz mono by default) with a correct header. */
export async function decodeToWav(input: string, output: string, options: DecodeOptions = {}): Promise<void> {
  try {
    await runTool('ffmpeg', [...inputArgs(input, options), '-c:a', 'pcm_s16le', '-f', 'wav', output], {
      timeoutMs: options.timeoutMs ?? 30 * 60_000,
      signal: options.signal,
    });
  } catch (err) {
    throw unreadable(err);
  }
}

/**
 * Decodes to raw signed 16-bit little-endian samples in memory (16 kHz mono by default). Meant for
 * clips: the output is bounded by `maxSeconds` (default 3 hours, about 345 MB at 16 kHz mono).
 */
export async function decodePcm(input: string, options: DecodeOptions & { maxSeconds?: number } = {}): Promise<Int16Array> {
  const bytesPerSecond = (options.sampleRate ?? 16000) * (options.channels ?? 1) * 2;
  try {
    const { stdout } = await runTool('ffmpeg', [...inputArgs(input, options), '-f', 's16le', 'pipe:1'], {
      timeoutMs: options.timeoutMs ?? 30 * 60_000,
      maxOutputBytes: Math.ceil((options.maxSeconds ?? 3 * 3600) * bytesPerSecond) + 4096,
      signal: options.signal,
    });
    const even = stdout.length - (stdout.length % 2);
    // A copy: Buffer pools may not be 2-byte aligned.
    return new Int16Array(new Uint8Array(stdout.subarray(0, even)).buffer);
  } catch (err) {
    throw unreadable(err);
  }
}

/**
 * Decodes to raw s16le samples delivered chunk by chunk, in constant memory whatever the length
 * (levels of a four-hour recording, for instance).
 */
export async function* decodePcmChunks(input: string, options: DecodeOptions = {}): AsyncGenerator<Buffer> {
  const tool = streamTool('ffmpeg', [...inputArgs(input, options), '-f', 's16le', 'pipe:1'], {
    timeoutMs: options.timeoutMs ?? 30 * 60_000,
    signal: options.signal,
  });
  tool.stdin.end();
  try {
    for await (const chunk of tool.stdout) yield chunk as Buffer;
    await tool.done;
  } catch (err) {
    throw unreadable(err);
  } finally {
    tool.kill();
  }
}
