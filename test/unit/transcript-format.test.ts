import assert from 'node:assert/strict';
import { formatText, formatWords } from '../../lib/transcripts/text-format.js';
import { mergeKeywords, parseTimedTokens } from '../../lib/providers/speech-to-text.js';

/** Text formatting of transcripts, and the parsing and keyword merge of PocketSphinx output. */
describe('transcript text', () => {
  // As `pocketsphinx_continuous -time yes` prints it: a hypothesis line, then word, start, end, confidence.
  const recorded = [
    'um i think we should go what time is it',
    '<s> 0.000 0.050 1.000000',
    'um 0.060 0.300 0.800000',
    'i 0.310 0.400 0.900000',
    'think 0.410 0.700 0.950000',
    '<sil> 0.710 0.900 0.990000',
    'we(2) 0.910 1.000 0.970000',
    'should 1.010 1.300 0.990000',
    'go 1.310 1.600 1.000000',
    '</s> 1.610 1.700 1.000000',
    'what time is it',
    '<s> 2.500 2.550 1.000000',
    'what 2.560 2.800 0.990000',
    'time 2.810 3.100 0.990000',
    '[NOISE] 3.110 3.200 0.500000',
    'is 3.210 3.300 0.990000',
    'it 3.310 3.500 0.990000',
    '</s> 3.510 3.600 1.000000',
  ].join('\n');
  const words = () => {
    const tokens = parseTimedTokens(recorded);
    return mergeKeywords(
      tokens.filter((t) => !t.token.startsWith('<') && !t.token.startsWith('[')).map((t, i, all) => ({ token: t.token, w: t.token.replace(/\(\d+\)$/, ''), s: t.s, e: t.e, c: t.c, end: i === 5 || i === all.length - 1 })),
      [],
      () => null,
    );
  };

  it('parses word times and confidences, drops silence and noise tokens, strips pronunciation variants', () => {
    assert.deepEqual(words().map((w) => w.w), ['um', 'i', 'think', 'we', 'should', 'go', 'what', 'time', 'is', 'it']);
  });

  it('format_text: sentences at utterance ends, capitals, I, and a question mark for questions', () => {
    assert.equal(formatWords(words(), { fillerWords: false, formatText: true }), 'I think we should go. What time is it?');
    assert.equal(formatWords(words(), { fillerWords: true, formatText: true }), 'Um I think we should go. What time is it?');
  });

  it('without format_text: lower case words only', () => {
    assert.equal(formatWords(words(), { fillerWords: false, formatText: false }), 'i think we should go what time is it');
  });

  it('a pause of half a second ends a sentence too', () => {
    const w = [
      { w: 'hello', s: 0, e: 0.4, c: 1 },
      { w: 'there', s: 0.45, e: 0.8, c: 1 },
      { w: 'goodbye', s: 1.5, e: 2, c: 1 },
    ];
    assert.equal(formatWords(w, { fillerWords: false, formatText: true }), 'Hello there. Goodbye.');
  });

  it('formatted text of a remote engine: fillers removed with their commas, capitals kept right', () => {
    const text = 'Um, I think, uh, we should go. Hmm, what time is it? Er... okay.';
    assert.equal(formatText(text, { fillerWords: false, formatText: true }), 'I think, we should go. What time is it? Okay.');
    assert.equal(formatText(text, { fillerWords: true, formatText: true }), text);
    assert.equal(formatText(text, { fillerWords: false, formatText: false }), "i think we should go what time is it okay");
    assert.equal(formatText("It's Anna's book.", { fillerWords: false, formatText: false }), "it's anna's book");
  });

  it('a spotted keyword replaces a doubtful, similar-sounding word only', () => {
    const lm = [
      { token: 'is', w: 'is', s: 0.98, e: 1.09, c: 0.58 },
      { token: 'sunday(2)', w: 'sunday', s: 1.1, e: 1.57, c: 0.02 },
      { token: 'with', w: 'with', s: 1.62, e: 1.8, c: 0.93 },
    ];
    const phones: Record<string, string[]> = { is: ['IH', 'Z'], 'sunday(2)': ['S', 'AH', 'N', 'D', 'IY'], with: ['W', 'IH', 'DH'], sunny: ['S', 'AH', 'N', 'IY'], quinoa: ['K', 'IY', 'N', 'OW', 'AH'] };
    const pronounce = (t: string) => phones[t] ?? null;
    assert.deepEqual(mergeKeywords(lm, [{ token: 'sunny', s: 1.08, e: 1.56, c: 0.94 }], pronounce).map((w) => w.w), ['is', 'sunny', 'with']);
    // A keyword that sounds different is not taken, however confident the spotter is.
    assert.deepEqual(mergeKeywords(lm, [{ token: 'quinoa', s: 1.08, e: 1.56, c: 0.99 }], pronounce).map((w) => w.w), ['is', 'sunday', 'with']);
    // A confident word is not replaced.
    const sure = lm.map((w) => ({ ...w, c: 0.9 }));
    assert.deepEqual(mergeKeywords(sure, [{ token: 'sunny', s: 1.08, e: 1.56, c: 0.94 }], pronounce).map((w) => w.w), ['is', 'sunday', 'with']);
  });
});
