import assert from 'node:assert/strict';
import { PocketSphinxEngine } from '../../lib/providers/speech-to-text.js';
import { concatWithPauses, silence, speak } from '../support/audio.js';

/**
 * Word times of the local engine are times in the audio: transcripts answer them as `words`,
 * sentences and subtitles. PocketSphinx's silence removal shifts every time of an utterance that
 * begins after a short silence by a second or more (cmusphinx/pocketsphinx#73); the engine must not pass that on.
 */
describe('PocketSphinx word times', function () {
  this.timeout(120_000);
  const engine = new PocketSphinxEngine();

  it('move with the speech: the same passage after 0.3 s and after 1 s of silence has every word 0.7 s later', async () => {
    const passage = await speak(
      'The weather service expects heavy rain in the northern valleys tomorrow afternoon. Farmers should move their animals to higher ground before the evening. ' +
        'The bridge on the river road will stay closed until the water level falls. Please call the doctor tomorrow morning about the weather report.',
    );
    const after = async (seconds: number) => (await engine.transcribeSegment({ wavPath: await concatWithPauses([await silence(seconds), passage], 0), language: 'en' })).words!;
    const [early, late] = [await after(0.3), await after(1)];
    assert.ok(early.length >= 30, early.map((w) => w.w).join(' '));
    assert.deepEqual(late.map((w) => w.w), early.map((w) => w.w));
    assert.ok(early[0]!.s < 0.3 + 0.5, `the first word starts with the speech, not at ${early[0]!.s} s`);
    for (const [i, w] of early.entries()) {
      assert.ok(Math.abs(late[i]!.s - w.s - 0.7) <= 0.15, `"${w.w}" at ${w.s} s after 0.3 s of silence, at ${late[i]!.s} s after 1 s`);
    }
  });
});
