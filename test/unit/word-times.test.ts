import assert from 'node:assert/strict';
import { frameLevels, quietRuns, silenceThreshold } from '../../lib/audio/levels.js';
import { spreadWordTimes } from '../../lib/audio/word-times.js';

/** Estimated word times of an engine that gives text only (lib/audio/word-times.ts). */
describe('word times from speech levels', () => {
  const rate = 16000;
  /** A 440 Hz tone where `loud` says, silence elsewhere. */
  const audio = (seconds: number, loud: Array<[number, number]>) => {
    const samples = new Int16Array(seconds * rate);
    for (const [a, b] of loud) for (let i = Math.round(a * rate); i < Math.round(b * rate); i++) samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / rate));
    return frameLevels(samples, rate);
  };

  it('words are laid over the speech, not over the pauses, in proportion to their length', () => {
    const levels = audio(4, [[0.5, 1.5], [2.5, 3.5]]);
    const { noiseDb } = silenceThreshold(levels);
    assert.deepEqual(quietRuns(levels, noiseDb, 0.3), [{ start: 0, end: 0.5 }, { start: 1.5, end: 2.5 }, { start: 3.5, end: 4 }]);
    // Equal lengths: two words in each second of speech; none starts or ends in the pause.
    const spans = spreadWordTimes(['aaaa', 'bbbb', 'cccc', 'dddd'], levels, noiseDb, 0, 4);
    assert.deepEqual(spans, [{ s: 0.5, e: 1 }, { s: 1, e: 1.5 }, { s: 2.5, e: 3 }, { s: 3, e: 3.5 }]);
    // A long word takes more time than a short one; a number is read as words.
    const [a, b, c] = spreadWordTimes(['a', 'extraordinary', '1990'], levels, noiseDb, 0, 4);
    assert.ok(b!.e - b!.s > 4 * (a!.e - a!.s), JSON.stringify([a, b]));
    assert.ok(c!.e - c!.s > a!.e - a!.s, JSON.stringify([a, c]));
  });

  it('silence only: the words share the stretch; no words, no times', () => {
    const levels = audio(2, []);
    assert.deepEqual(spreadWordTimes(['one', 'two'], levels, -50, 0, 2), [{ s: 0, e: 1 }, { s: 1, e: 2 }]);
    assert.deepEqual(spreadWordTimes([], levels, -50, 0, 2), []);
  });
});
