import type { Levels } from './levels.js';
import type { Pause } from './silences.js';

/**
 * Where to cut a recording, from its pauses (lib/audio/silences.ts). Two plans, both pure:
 * - `planSegments`: consecutive pieces that cover the whole recording, cut in pauses near a target
 *   length and never longer than a maximum (transcription: each piece is one engine call and the
 *   unit a crashed worker resumes from);
 * - `planSamples`: voice samples of at most a given length that start and end in pauses, at most
 *   N of them spread over the recording (voice splitting).
 */
export interface Segment {
  index: number;
  start: number;
  end: number;
}

/**
 * Consecutive segments covering [0, duration]. Each cut is the middle of the pause nearest to
 * `start + targetSeconds` among the pauses whose middle lies in [start + targetSeconds / 2,
 * start + maxSeconds]; with no pause there, a hard cut at `start + maxSeconds`.
 */
export function planSegments(input: { durationSeconds: number; pauses: readonly Pause[]; targetSeconds: number; maxSeconds?: number }): Segment[] {
  const { durationSeconds: duration, targetSeconds: target } = input;
  const max = Math.max(target, input.maxSeconds ?? target * 1.5);
  const middles = input.pauses.map((p) => (p.start + p.end) / 2).sort((a, b) => a - b);
  const segments: Segment[] = [];
  let start = 0;
  while (duration - start > max) {
    const ideal = start + target;
    let cut = start + max;
    let best = Infinity;
    for (const m of middles) {
      if (m < start + target / 2 || m > start + max) continue;
      if (Math.abs(m - ideal) < best) {
        best = Math.abs(m - ideal);
        cut = m;
      }
    }
    segments.push({ index: segments.length, start, end: cut });
    start = cut;
  }
  if (duration > start || segments.length === 0) segments.push({ index: segments.length, start, end: Math.max(start, duration) });
  return segments;
}

/** `mm:ss` of a position, rounded down; minutes grow past 99 (`125:03`). */
export function formatTimestamp(seconds: number): string {
  const whole = Math.max(0, Math.floor(seconds));
  return `${String(Math.floor(whole / 60)).padStart(2, '0')}:${String(whole % 60).padStart(2, '0')}`;
}

export interface SamplePlanOptions {
  durationSeconds: number;
  pauses: readonly Pause[];
  /** Frame levels, used to cut speech that runs longer than a sample without a pause. */
  levels: Levels;
  /** Longest sample (the voice interface's sample_duration). */
  sampleSeconds: number;
  /** At most this many samples (max_samples); more candidates are thinned evenly over the recording. */
  maxSamples: number;
  /** Silence kept before and after the speech of a sample (default 0.2 s, at most half the pause). */
  padSeconds?: number;
  /** Shortest sample kept (default min(sampleSeconds / 2, 5 s)). */
  minSampleSeconds?: number;
  /** If no sample reaches the minimum, the one with the most speech is kept when it has this much (default 1 s). */
  minSpeechSeconds?: number;
}

export interface PlannedSample {
  /** 0..n-1 in time order. */
  index: number;
  start: number;
  end: number;
  duration: number;
  /** Seconds of speech (not pause) inside the sample. */
  speechSeconds: number;
  /** `mm:ss` of the start. */
  sourceTimestamp: string;
}

interface Run {
  start: number;
  end: number;
  /** Pad available before / after: half the neighbouring pause, capped; 0 at a forced cut. */
  padBefore: number;
  padAfter: number;
}

/** The latest frame within 3 dB of the quietest one in [from, to] (seconds). */
function quietestPoint(levels: Levels, from: number, to: number): number {
  const f = levels.frameSeconds;
  const a = Math.max(0, Math.floor(from / f));
  const b = Math.min(levels.db.length - 1, Math.ceil(to / f));
  if (b < a) return (from + to) / 2;
  let min = Infinity;
  for (let i = a; i <= b; i++) min = Math.min(min, levels.db[i]!);
  for (let i = b; i >= a; i--) if (levels.db[i]! <= min + 3) return (i + 0.5) * f;
  return (from + to) / 2;
}

/** Speech runs between the pauses, each cut to fit in a sample. */
function speechRuns(o: SamplePlanOptions, pad: number): Run[] {
  const pauses = [...o.pauses].sort((x, y) => x.start - y.start);
  const runs: Run[] = [];
  let cursor = 0;
  let padBefore = 0;
  for (const p of [...pauses, { start: o.durationSeconds, end: o.durationSeconds }]) {
    if (p.start - cursor >= 0.05) runs.push({ start: cursor, end: Math.min(p.start, o.durationSeconds), padBefore, padAfter: Math.min(pad, (p.end - p.start) / 2) });
    cursor = Math.max(cursor, p.end);
    padBefore = Math.min(pad, (p.end - p.start) / 2);
  }
  const limit = o.sampleSeconds - 2 * pad - 0.05;
  const fitted: Run[] = [];
  for (const run of runs) {
    let r = run;
    while (r.end - r.start > limit && limit > 0.5) {
      const cut = quietestPoint(o.levels, r.start + limit / 2, r.start + limit);
      fitted.push({ start: r.start, end: cut, padBefore: r.padBefore, padAfter: 0 });
      r = { start: cut, end: r.end, padBefore: 0, padAfter: r.padAfter };
    }
    fitted.push(r);
  }
  return fitted;
}

/**
 * Voice samples: speech runs are packed greedily (a sample starts `pad` before a run and takes the
 * following runs while their end plus `pad` stays within `sampleSeconds - 0.05`, the margin for
 * Opus padding); samples shorter than the minimum are dropped (if none is left, the one with the
 * most speech is kept when it has `minSpeechSeconds`); more than `maxSamples` candidates are thinned
 * to candidates floor(i·C/N), so the samples cover the whole recording. Empty when there is no
 * usable speech.
 */
export function planSamples(o: SamplePlanOptions): PlannedSample[] {
  const pad = o.padSeconds ?? 0.2;
  const runs = speechRuns(o, pad);
  const room = o.sampleSeconds - 0.05;
  const candidates: Array<Omit<PlannedSample, 'index' | 'sourceTimestamp'>> = [];
  for (let i = 0; i < runs.length; ) {
    const first = runs[i]!;
    const start = Math.max(0, first.start - first.padBefore);
    let j = i;
    let speech = first.end - first.start;
    while (j + 1 < runs.length && runs[j + 1]!.end + runs[j + 1]!.padAfter <= start + room) {
      j++;
      speech += runs[j]!.end - runs[j]!.start;
    }
    const last = runs[j]!;
    const end = Math.min(o.durationSeconds, last.end + last.padAfter, start + room);
    candidates.push({ start, end, duration: end - start, speechSeconds: speech });
    i = j + 1;
  }
  const minLength = o.minSampleSeconds ?? Math.min(o.sampleSeconds / 2, 5);
  let kept = candidates.filter((c) => c.duration >= minLength);
  if (kept.length === 0) {
    const best = [...candidates].sort((a, b) => b.speechSeconds - a.speechSeconds)[0];
    kept = best && best.speechSeconds >= (o.minSpeechSeconds ?? 1) ? [best] : [];
  }
  if (kept.length > o.maxSamples) {
    const c = kept.length;
    kept = Array.from({ length: o.maxSamples }, (_, i) => kept[Math.floor((i * c) / o.maxSamples)]!);
  }
  const round = (x: number) => Math.round(x * 1000) / 1000;
  return kept.map((c, index) => ({
    index,
    start: round(c.start),
    end: round(c.end),
    duration: round(c.end - c.start),
    speechSeconds: round(c.speechSeconds),
    sourceTimestamp: formatTimestamp(c.start),
  }));
}
