import type { Levels } from './levels.js';

/**
 * Word times for an engine that gives text only (Moonshine): the words of one stretch of audio are
 * laid over its speech, not over its pauses, each taking a share of the speech time in proportion
 * to how long it takes to say (letters; a digit is read as a word of about four), and no word
 * straddles a silence of 0.3 s or more. An estimate, not an alignment: its error was measured against speech whose word times are known
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

/** Speech separated by a silence at least this long is an island: words do not straddle it. */
const ISLAND_GAP_SECONDS = 0.3;
/** Cost (seconds) of a group of words that ends an island without a punctuation mark. */
const UNPUNCTUATED_BREAK = 0.3;

/**
 * Start and end of each word of `words`, said in order within [from, to] (seconds, the times of
 * `levels`). The speech is first split into islands at silences of 0.3 s or more, and the words
 * into as many consecutive groups, by dynamic programming: each island's length should match its
 * words' share of the speech time, and an island should end where a word ends with a punctuation
 * mark. Within an island the words share its speech in proportion to their length. With no frame
 * above the threshold, the words share the whole stretch.
 */
export function spreadWordTimes(words: readonly string[], levels: Levels, noiseDb: number, from: number, to: number): WordSpan[] {
  if (words.length === 0) return [];
  let runs = speechRuns(levels, noiseDb, from, to);
  if (runs.length === 0) runs = [{ s: from, e: Math.max(from, to) }];
  const islands: WordSpan[][] = [];
  for (const r of runs) {
    const last = islands.at(-1);
    if (last && r.s - last.at(-1)!.e < ISLAND_GAP_SECONDS) last.push(r);
    else islands.push([r]);
  }
  const weights = words.map(spokenLength);
  const groups = groupWords(words, weights, islands.map((island) => island.reduce((sum, r) => sum + (r.e - r.s), 0)));
  const spans: WordSpan[] = [];
  groups.forEach(([a, b], k) => spans.push(...spreadOver(weights.slice(a, b), islands[k]!)));
  return spans;
}

/** For each island, the range [a, b) of the words said in it (consecutive, in order, possibly empty). */
function groupWords(words: readonly string[], weights: readonly number[], durations: readonly number[]): Array<[number, number]> {
  const n = words.length;
  const m = durations.length;
  if (m === 1) return [[0, n]];
  const prefix = [0];
  for (const w of weights) prefix.push(prefix.at(-1)! + w);
  const rate = durations.reduce((a, b) => a + b, 0) / prefix[n]!;
  const punctuated = words.map((w) => /[.?!,;:]["')\]]*$/.test(w));
  const cost = (k: number, a: number, b: number) => {
    const expected = rate * (prefix[b]! - prefix[a]!);
    const miss = (durations[k]! - expected) ** 2 / Math.max(expected, 0.2);
    return miss + (b > a && k < m - 1 && !punctuated[b - 1] ? UNPUNCTUATED_BREAK : 0);
  };
  // best[k][j]: the cheapest way to say the first j words in the first k islands.
  const best = Array.from({ length: m + 1 }, () => new Float64Array(n + 1).fill(Infinity));
  const from = Array.from({ length: m + 1 }, () => new Int32Array(n + 1));
  best[0]![0] = 0;
  for (let k = 1; k <= m; k++) {
    for (let j = 0; j <= n; j++) {
      for (let i = 0; i <= j; i++) {
        const c = best[k - 1]![i]! + cost(k - 1, i, j);
        if (c < best[k]![j]!) {
          best[k]![j] = c;
          from[k]![j] = i;
        }
      }
    }
  }
  const groups: Array<[number, number]> = [];
  for (let k = m, j = n; k > 0; k--) {
    const i = from[k]![j]!;
    groups.unshift([i, j]);
    j = i;
  }
  return groups;
}

/** Words of the given weights over the runs of one island, in proportion to their weight. */
function spreadOver(weights: readonly number[], runs: readonly WordSpan[]): WordSpan[] {
  const total = runs.reduce((sum, r) => sum + (r.e - r.s), 0);
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
