import type { Levels } from './levels.js';

/**
 * Word times for an engine that gives text only (Moonshine): the words of one stretch of audio are
 * laid over its speech, not over its pauses, each taking a share of the speech time in proportion
 * to how long it takes to say (letters; a digit is read as a word of about four). An estimate, not
 * an alignment: its error was measured against speech whose word times are known
 * (docs/transcription-engine.md).
 */
export interface WordSpan {
  s: number;
  e: number;
}

/** Gaps shorter than this inside speech are the silence of a consonant, not a pause between words. */
const BRIDGED_GAP_SECONDS = 0.12;

/** How long a word takes to say, in arbitrary units. */
function spokenLength(word: string): number {
  const letters = (word.match(/\p{L}/gu) ?? []).length;
  const digits = (word.match(/\p{N}/gu) ?? []).length;
  // +1: the transition into the word, so that short words still get time.
  return 1 + letters + 4 * digits;
}

/** Runs of frames louder than `noiseDb` in [from, to) seconds, short gaps bridged. */
export function speechRuns(levels: Levels, noiseDb: number, from: number, to: number): WordSpan[] {
  const f = levels.frameSeconds;
  const runs: WordSpan[] = [];
  const first = Math.max(0, Math.floor(from / f));
  const last = Math.min(levels.db.length, Math.ceil(to / f));
  for (let i = first; i < last; i++) {
    if (levels.db[i]! < noiseDb) continue;
    const s = i * f;
    const prev = runs.at(-1);
    if (prev && s - prev.e <= BRIDGED_GAP_SECONDS) prev.e = s + f;
    else runs.push({ s, e: s + f });
  }
  return runs.map((r) => ({ s: Math.max(from, r.s), e: Math.min(to, r.e) })).filter((r) => r.e > r.s);
}

/**
 * Start and end of each word of `words`, said in order within [from, to] (seconds, the times of
 * `levels`). With no frame above the threshold, the words share the whole stretch.
 */
export function spreadWordTimes(words: readonly string[], levels: Levels, noiseDb: number, from: number, to: number): WordSpan[] {
  if (words.length === 0) return [];
  let runs = speechRuns(levels, noiseDb, from, to);
  if (runs.length === 0) runs = [{ s: from, e: Math.max(from, to) }];
  const total = runs.reduce((sum, r) => sum + (r.e - r.s), 0);
  const weights = words.map(spokenLength);
  const weightSum = weights.reduce((a, b) => a + b, 0);

  // Speech time (pauses left out) to clock time; `late` chooses the next run at a run boundary, so
  // that a word starts after a pause rather than at its beginning.
  const clock = (speech: number, late: boolean): number => {
    let left = speech;
    for (let i = 0; i < runs.length; i++) {
      const r = runs[i]!;
      const length = r.e - r.s;
      if (left < length || (!late && left <= length) || i === runs.length - 1) return r.s + Math.min(left, length);
      left -= length;
    }
    return runs.at(-1)!.e;
  };

  const round = (x: number) => Math.round(x * 1000) / 1000;
  const spans: WordSpan[] = [];
  let done = 0;
  for (const w of weights) {
    const s = clock((done / weightSum) * total, true);
    done += w;
    const e = clock((done / weightSum) * total, false);
    spans.push({ s: round(s), e: round(Math.max(s, e)) });
  }
  return spans;
}
