import { runTool, isInputFailure } from '../platform/child-process.js';
import { AudioUnreadable } from './errors.js';

export interface AudioStreamInfo {
  /** Index of the stream in the container (ffmpeg's `0:<index>`). */
  index: number;
  codec: string;
  sampleRate: number;
  channels: number;
}

export interface ProbeResult {
  /** Container duration in seconds (0 when the container does not say). */
  durationSeconds: number;
  /** ffprobe's format name, e.g. `mp3`, `wav`, `ogg`, `mov,mp4,m4a,3gp,3g2,mj2`, `matroska,webm`. */
  formatName: string;
  audioStreams: AudioStreamInfo[];
  hasVideo: boolean;
}

/**
 * What ffprobe reads from a media file: duration, format, audio streams (codec, rate, channels).
 * A file ffprobe cannot read at all is `AudioUnreadable`; a file without an audio stream is a
 * normal answer (`audioStreams: []`), for the caller to judge.
 */
export async function probeAudio(file: string, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<ProbeResult> {
  let stdout: Buffer;
  try {
    ({ stdout } = await runTool(
      'ffprobe',
      ['-v', 'error', '-show_entries', 'format=duration,format_name:stream=index,codec_type,codec_name,sample_rate,channels', '-of', 'json', file],
      { timeoutMs: options.timeoutMs ?? 60_000, signal: options.signal },
    ));
  } catch (err) {
    if (isInputFailure(err)) throw new AudioUnreadable(err.kind === 'failed' ? 'the file is not a media file ffmpeg can read' : `the file cannot be read: ${err.message}`);
    throw err;
  }
  const parsed = JSON.parse(stdout.toString('utf8') || '{}') as {
    format?: { duration?: string; format_name?: string };
    streams?: Array<{ index?: number; codec_type?: string; codec_name?: string; sample_rate?: string; channels?: number }>;
  };
  const streams = parsed.streams ?? [];
  const duration = Number(parsed.format?.duration);
  return {
    durationSeconds: Number.isFinite(duration) && duration > 0 ? duration : 0,
    formatName: parsed.format?.format_name ?? '',
    audioStreams: streams
      .filter((s) => s.codec_type === 'audio')
      .map((s) => ({ index: s.index ?? 0, codec: s.codec_name ?? 'unknown', sampleRate: Number(s.sample_rate) || 0, channels: s.channels ?? 0 })),
    hasVideo: streams.some((s) => s.codec_type === 'video' && !['mjpeg', 'png', 'bmp'].includes(s.codec_name ?? '')),
  };
}
