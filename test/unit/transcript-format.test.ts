import assert from 'node:assert/strict';
import { applyCustomSpelling, formatSentences, formatText, formatWords, spellText, textOfSentences, type FormattedWord } from '../../lib/transcripts/text-format.js';
import { captionsOf, meanConfidence, paragraphsOf, searchTerms, searchWords, sentencesOf, subtitles } from '../../lib/transcripts/timed-text.js';
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

  it('punctuate=false: the capitals of format_text without any punctuation mark', () => {
    assert.equal(formatWords(words(), { fillerWords: false, formatText: true, punctuate: false }), 'I think we should go What time is it');
    const text = 'Um, I think, uh, we should go. Hmm, what time is it? Er... okay.';
    assert.equal(formatText(text, { fillerWords: false, formatText: true, punctuate: false }), 'I think we should go What time is it Okay');
    assert.equal(formatText(text, { fillerWords: false, formatText: false, punctuate: false }), 'i think we should go what time is it okay');
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

  it("words the engine formatted (Moonshine): its punctuation and capitals kept, sentences at its marks, options applied", () => {
    const said = [
      { w: 'Um,', s: 0, e: 0.2, c: 0.6 },
      { w: 'Dr.', s: 0.2, e: 0.5, c: 0.9 },
      { w: 'Smith', s: 0.5, e: 0.9, c: 0.9 },
      { w: 'called,', s: 0.9, e: 1.3, c: 0.9 },
      // A pause of a second inside a sentence: estimated times do not end it, the punctuation does.
      { w: 'at', s: 2.3, e: 2.4, c: 0.9 },
      { w: '9:30.', s: 2.4, e: 2.9, c: 0.9, end: true },
      { w: 'What', s: 3, e: 3.2, c: 0.9 },
      { w: 'now?', s: 3.2, e: 3.5, c: 0.9, end: true },
      { w: 'we', s: 4, e: 4.2, c: 0.9 },
      { w: 'left,', s: 4.2, e: 4.5, c: 0.9, end: true },
    ].map((w) => ({ ...w, formatted: true }));
    assert.equal(formatWords(said, { fillerWords: false, formatText: true }), 'Dr. Smith called, at 9:30. What now? We left.');
    assert.equal(formatWords(said, { fillerWords: true, formatText: true }), 'Um, Dr. Smith called, at 9:30. What now? We left.');
    assert.equal(formatWords(said, { fillerWords: false, formatText: true, punctuate: false }), 'Dr Smith called at 9 30 What now we left');
    assert.equal(formatWords(said, { fillerWords: false, formatText: false }), 'dr smith called at 9 30 what now we left');
    const sentences = formatSentences(said, { fillerWords: false, formatText: true });
    assert.deepEqual(sentences.map((x) => x.length), [5, 2, 2]);
    assert.deepEqual(sentences[0]![4], { text: '9:30.', s: 2.4, e: 2.9, c: 0.9 });
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

/** AssemblyAI's views of a transcript's timed words: sentences, paragraphs, subtitles, word search. */
describe('transcript timed views', () => {
  const sentence = (start: number, ...texts: string[]): FormattedWord[] => texts.map((text, i) => ({ text, s: start + i * 0.5, e: start + i * 0.5 + 0.4, c: 0.8 }));
  const story = [sentence(0, 'Rain', 'is', 'coming.'), sentence(1.8, "Don't", 'go', 'out.'), sentence(5, 'The', 'road', 'is', 'closed.')];

  it('sentences keep their words and times in milliseconds; paragraphs break at a pause of 1.5 s', () => {
    const s = sentencesOf(story);
    assert.deepEqual(s.map((x) => [x.text, x.start, x.end]), [['Rain is coming.', 0, 1400], ["Don't go out.", 1800, 3200], ['The road is closed.', 5000, 6900]]);
    assert.deepEqual(s[0]!.words[2], { text: 'coming.', start: 1000, end: 1400, confidence: 0.8, speaker: null });
    assert.deepEqual(paragraphsOf(story).map((p) => p.text), ["Rain is coming. Don't go out.", 'The road is closed.']);
    const long = Array.from({ length: 40 }, (_, i) => sentence(i * 2.5, 'one', 'two', 'three', 'four', 'five.'));
    assert.deepEqual(paragraphsOf(long).map((p) => p.words.length), [150, 50], 'a paragraph closes at the sentence end that reaches 150 words');
    assert.equal(meanConfidence([{ c: 0.5 }, { c: null }, { c: 1 }]), 0.75);
    assert.equal(meanConfidence([]), null);
  });

  it('subtitles: a cue per sentence, split before it would pass chars_per_caption; SRT and WebVTT clocks', () => {
    assert.deepEqual(captionsOf(story, 12).map((c) => c.text), ['Rain is', 'coming.', "Don't go", 'out.', 'The road is', 'closed.']);
    assert.deepEqual(captionsOf([sentence(0, 'extraordinarily', 'so.')], 5).map((c) => c.text), ['extraordinarily', 'so.'], 'a longer word is a cue of its own');
    const late = [sentence(3725.25, 'Late.')];
    assert.equal(subtitles(late, 'srt', 80), '1\n01:02:05,250 --> 01:02:05,650\nLate.\n');
    assert.equal(subtitles(story.slice(0, 2), 'vtt', 80), "WEBVTT\n\n00:00:00.000 --> 00:00:01.400\nRain is coming.\n\n00:00:01.800 --> 00:00:03.200\nDon't go out.\n");
  });

  it('custom spelling: the longest phrase first, punctuation after the run kept, times and lowest confidence of the run', () => {
    const spelled = applyCustomSpelling(story, [
      { from: ['road is'], to: 'Road-Is' },
      { from: ['the road is closed'], to: 'closure' },
      { from: ['RAIN'], to: 'Regen' },
    ]);
    assert.equal(textOfSentences(spelled), "Regen is coming. Don't go out. closure.");
    assert.deepEqual(spelled[2], [{ text: 'closure.', s: 5, e: 6.9, c: 0.8 }]);
    assert.equal(spellText('We met the doctor, then the doctor left.', [{ from: ['doctor'], to: 'Dr. Who' }]), 'We met the Dr. Who, then the Dr. Who left.');
    assert.equal(spellText('nothing to do', []), 'nothing to do');
  });

  it('word search: without case or punctuation, phrases of consecutive words, apostrophes inside words kept', () => {
    const terms = searchTerms(" IS , don't go,, 'road',xylophone");
    assert.deepEqual(terms, [['is'], ["don't", 'go'], ['road'], ['xylophone']]);
    const found = searchWords(story, terms);
    assert.equal(found.total_count, 4);
    assert.deepEqual(found.matches, [
      { text: 'is', count: 2, timestamps: [[500, 900], [6000, 6400]], indexes: [1, 8] },
      { text: "don't go", count: 1, timestamps: [[1800, 2700]], indexes: [3] },
      { text: 'road', count: 1, timestamps: [[5500, 5900]], indexes: [7] },
    ]);
  });
});
