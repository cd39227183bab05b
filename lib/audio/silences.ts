import { runTool, isInputFailure } from '../platform/child-process.js';
import { AudioUnreadable } from './errors.js';
import { measureLevels, silenceThreshold, type Levels, type SilenceThreshold } from './levels.js';

/** A stretch of silence, in seconds from the start of the recording. */
export interface Pause {
  start: number;
  end: number;
}

export interface PauseOptions {
  /** Silence threshold in dBFS (from silenceThreshold for an adapted one). */
  noiseDb: number;
  /** Shortest silence that counts as a pause (default 0.3 s). */
  minPauseSeconds?: number;
  /** The recording's duration: a pause still open at the end runs to it (default: its start + min). */
  durationSeconds?: number;
  timeoutMs?: number;
  signal?: AbortSignal;
}

const eventLine = /^lavfi\.silence_(start|end)=(-?\d+(?:\.\d+)?)$/;

/**
 * Parses what `silencedetect` + `ametadata=mode=print:file=-` print on standard output: start and end
 * events pair up; an end without a start begins at 0, a start without an end runs to the end of
 * the recording; negative times are clamped to 0.
 */
export function parseSilenceEvents(text: string, durationSeconds?: number): Pause[] {
  const pauses: Pause[] = [];
  let open: number | null = null;
  for (const raw of text.split('\n')) {
    const m = eventLine.exec(raw.trim());
    if (!m) continue;
    const t = Math.max(0, Number(m[2]));
    if (m[1] === 'start') open = t;
    else {
      pauses.push({ start: open ?? 0, end: t });
      open = null;
    }
  }
  if (open !== null) pauses.push({ start: open, end: Math.max(open, durationSeconds ?? open) });
  return pauses.filter((p) => p.end > p.start);
}

/** Pauses found by ffmpeg's silencedetect at the given threshold (parsed from stdout, never from the log). */
export async function detectPauses(file: string, options: PauseOptions): Promise<Pause[]> {
  const filter = `silencedetect=noise=${options.noiseDb}dB:d=${options.minPauseSeconds ?? 0.3},ametadata=mode=print:file=-`;
  try {
    const { stdout } = await runTool(
      'ffmpeg',
      ['-nostdin', '-hide_banner', '-nostats', '-loglevel', 'error', '-i', file, '-map', '0:a:0', '-af', filter, '-f', 'null', '-'],
      { timeoutMs: options.timeoutMs ?? 30 * 60_000, signal: options.signal, maxOutputBytes: 256 * 1024 * 1024 },
    );
    return parseSilenceEvents(stdout.toString('utf8'), options.durationSeconds);
  } catch (err) {
    if (isInputFailure(err)) throw new AudioUnreadable(`the audio could not be decoded (${err.message})`);
    throw err;
  }
}

export interface PauseAnalysis {
  pauses: Pause[];
  levels: Levels;
  threshold: SilenceThreshold;
}

/**
 * Levels, an adapted threshold, then the pauses at that threshold: what both transcript segmenting
 * and voice-sample splitting start from. A silent recording (threshold.silent) has no pauses
 * computed; callers decide what "no speech" means for them.
 */
export async function findPauses(
  file: string,
  options: { durationSeconds: number; minPauseSeconds?: number; timeoutMs?: number; signal?: AbortSignal },
): Promise<PauseAnalysis> {
  const levels = await measureLevels(file, { timeoutMs: options.timeoutMs, signal: options.signal });
  const threshold = silenceThreshold(levels);
  if (threshold.silent) return { pauses: [{ start: 0, end: options.durationSeconds }], levels, threshold };
  const pauses = await detectPauses(file, { ...options, noiseDb: threshold.noiseDb });
  return { pauses, levels, threshold };
}
