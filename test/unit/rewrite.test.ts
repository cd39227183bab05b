import assert from 'node:assert/strict';
import { partMessages, renderPrompt, splitIntoParts } from '../../lib/rewrite/parts.js';
import { callBound, costUsd, rewriteTotals, type RewritePass } from '../../lib/rewrite/usage.js';
import { validatePartOutput } from '../../lib/rewrite/output-validation.js';
import { resolveContentType } from '../../lib/rewrite/content-types.js';
import { countTokens } from '../../lib/platform/tokens.js';
import { timerTicksDuring } from '../support/event-loop.js';
import { longProse } from '../support/samples.js';

const paragraph = (i: number) => `Paragraph ${i} explains step ${i} of the method in some detail, with a number ${i * 7} and a name, Ada ${i}.`;

describe('rewrite planning', () => {
  it('resolves auto by the spec rule: video URLs and audio/video files → video; PDF, EPUB, Word → book; the rest → article', () => {
    const doc = (type: string, url: string | null, originalExtension: string | null) => ({ type, url, originalExtension });
    assert.equal(resolveContentType('auto', doc('url', 'https://www.youtube.com/watch?v=abc', null)), 'video');
    assert.equal(resolveContentType('auto', doc('url', 'https://youtu.be/abc', null)), 'video');
    assert.equal(resolveContentType('auto', doc('url', 'https://example.com/post', null)), 'article');
    for (const ext of ['mp3', 'wav', 'mp4']) assert.equal(resolveContentType('auto', doc('file', null, ext)), 'video');
    for (const ext of ['pdf', 'epub', 'docx', 'doc']) assert.equal(resolveContentType('auto', doc('file', null, ext)), 'book');
    for (const ext of ['txt', 'md', 'html', 'pptx', 'csv']) assert.equal(resolveContentType('auto', doc('file', null, ext)), 'article');
    assert.equal(resolveContentType('book', doc('file', null, 'txt')), 'book', 'an explicit type wins');
  });

  it('fills {person_name}, with a neutral default', () => {
    assert.equal(renderPrompt('Write as {person_name}; {person_name} says so.', 'Dr. Ada'), 'Write as Dr. Ada; Dr. Ada says so.');
    assert.equal(renderPrompt('Write as {person_name}.', '  '), 'Write as the author.');
  });

  it('keeps a short input whole and sends it as the user message', async () => {
    const parts = await splitIntoParts('Short text.\n\nTwo paragraphs.', 300, 30);
    assert.deepEqual(parts, [{ text: 'Short text.\n\nTwo paragraphs.', context: '' }]);
    const { messages, overheadMessages } = partMessages('SYSTEM', parts[0]!, 0, 1);
    assert.deepEqual(messages, [{ role: 'system', content: 'SYSTEM' }, { role: 'user', content: 'Short text.\n\nTwo paragraphs.' }]);
    assert.equal(overheadMessages[1]!.content, '', 'without the source only the prompt is overhead');
  });

  it('splits a long input on paragraph boundaries into parts within the token budget, each later part with the previous part\'s end as context', async () => {
    const text = Array.from({ length: 60 }, (_, i) => paragraph(i)).join('\n\n');
    const parts = await splitIntoParts(text, 200, 30);
    assert.ok(parts.length >= 5, `${parts.length} parts`);
    for (const p of parts) assert.ok(countTokens(p.text) <= 200, `part of ${countTokens(p.text)} tokens`);
    assert.equal(parts.map((p) => p.text).join('\n\n'), text, 'the parts are the source, in order, nothing lost or repeated');
    for (let i = 1; i < parts.length; i++) {
      assert.ok(parts[i - 1]!.text.endsWith(parts[i]!.context), 'context is the end of the previous part');
      assert.ok(countTokens(parts[i]!.context) <= 31 && countTokens(parts[i]!.context) >= 25);
    }
    const { messages } = partMessages('SYSTEM', parts[1]!, 1, parts.length);
    assert.match(messages[1]!.content, /part 2 of \d+/);
    assert.ok(messages[1]!.content.includes(`<context>\n${parts[1]!.context}\n</context>`));
  });

  it('splits a single paragraph longer than a part by sentences, and an endless sentence by tokens, leaving nothing out', async () => {
    const long = `...and so it began! ${Array.from({ length: 80 }, (_, i) => `Sentence ${i} is here?! Yes.`).join(' ')} .. the end`;
    const parts = await splitIntoParts(long, 100, 10);
    assert.ok(parts.length > 1);
    for (const p of parts) assert.ok(countTokens(p.text) <= 100);
    assert.equal(parts.map((p) => p.text).join(''), long, 'the sentences of a paragraph, in order, leading and trailing dots included');
    const endless = 'word '.repeat(1000);
    const pieces = await splitIntoParts(endless, 100, 10);
    for (const p of pieces) assert.ok(countTokens(p.text) <= 100);
    assert.equal(pieces.map((p) => p.text).join(''), endless);
  });

  it('splits a long document of every kind of paragraph into parts within the budget, in turns that leave the event loop free', async function () {
    this.timeout(120_000);
    const text = `${longProse(1_000_000)}\n\n${'x'.repeat(50_000)} ${'word '.repeat(20_000)}`;
    const { result: parts, ticks } = await timerTicksDuring(() => splitIntoParts(text, 6000, 200));
    assert.ok(ticks >= 3, `a 10 ms timer fired ${ticks} times while 1 MB was split`);
    assert.ok(parts.length >= 40, `${parts.length} parts`);
    for (const p of parts) assert.ok(countTokens(p.text) <= 6000, `a part of ${countTokens(p.text)} tokens`);
    const visible = (s: string) => s.replace(/\s+/g, '');
    assert.ok(visible(parts.map((p) => p.text).join('')) === visible(text), 'every character but whitespace, in order, once');
  });
});

describe('rewrite accounting', () => {
  it('bounds a call by its prompt with a margin plus the whole output allowance, in tokens and list-price dollars', () => {
    const bound = callBound(1000, 4000, { input: 2, output: 8 });
    assert.equal(bound.tokens, 1116 + 4000);
    assert.equal(bound.dollars, '0.034232');
    assert.equal(callBound(1000, 4000, undefined).dollars, undefined, 'an unpriced model reserves no dollars');
  });

  it('prices exactly to 8 decimal places, rounding up', () => {
    assert.equal(costUsd({ input: 2, output: 8 }, 1234, 567), '0.007004');
    assert.equal(costUsd({ input: 0.15, output: 0.6 }, 1, 1), '0.00000075');
    assert.equal(costUsd({ input: 0.1, output: 0 }, 1, 0), '0.0000001');
    assert.equal(costUsd({ input: 0.01, output: 0 }, 1, 0), '0.00000001', 'rounded up, never to zero');
  });

  it('totals the latest attempt: prompt and output tokens over all passes, source tokens over first passes; null where any is unknown', () => {
    const pass = (p: Partial<RewritePass>): RewritePass => ({ pass: 1, part: 0, part_count: 2, model_name: 'm', fallback: false, first_pass: true, prompt_tokens: 100, output_tokens: 50, finish_reason: 'stop', rejected: false, cost_usd: 0.001, operation_key: String(Math.random()), ...p });
    const passes = [
      pass({ prompt_tokens: 120, output_tokens: 10, prompt_overhead_tokens: 20, source_input_tokens: 100, rejected: true, cost_usd: 0.002 }),
      pass({ first_pass: false, prompt_tokens: 120, output_tokens: 90, cost_usd: 0.003 }),
      pass({ part: 1, prompt_tokens: 80, output_tokens: 70, prompt_overhead_tokens: 30, source_input_tokens: 50, cost_usd: 0.001 }),
    ];
    const totals = rewriteTotals(passes);
    assert.equal(totals.rewriteInputTokensTotal, 320, 'rejected output still counts');
    assert.equal(totals.rewriteOutputTokens, 170);
    assert.equal(totals.inputFileTokens, 150, 'first passes only, overlap included');
    assert.ok(Math.abs(totals.rewriteCostUsd! - 0.006) < 1e-12);
    assert.equal(rewriteTotals([...passes, pass({ part: 1, first_pass: false, cost_usd: null })]).rewriteCostUsd, null, 'an unpriced call makes the cost unknown');
    assert.equal(rewriteTotals([...passes, pass({ first_pass: false, prompt_tokens: null, output_tokens: null })]).rewriteInputTokensTotal, null);
  });

  it('rejects empty, truncated, filtered and far too short or long output; judges no ratio for short sources', () => {
    const source = 'a'.repeat(1000);
    assert.equal(validatePartOutput(source, 'b'.repeat(900), 'stop'), null);
    assert.match(validatePartOutput(source, 'b'.repeat(900), 'length')!, /cut off/);
    assert.match(validatePartOutput(source, 'b', 'content_filter')!, /content filter/);
    assert.match(validatePartOutput(source, '  \n', 'stop')!, /empty/);
    assert.match(validatePartOutput(source, 'b'.repeat(100), 'stop')!, /10 %/);
    assert.match(validatePartOutput(source, 'b'.repeat(5000), 'stop')!, /500 %/);
    assert.equal(validatePartOutput('short source', 'a rewrite that is much longer than its very short source text', 'stop'), null);
  });
});

describe('video transcripts', () => {
  it('recognises YouTube video URLs in their usual forms', async () => {
    const { youTubeVideoId } = await import('../../lib/providers/video-transcripts.js');
    assert.equal(youTubeVideoId('https://www.youtube.com/watch?v=dQw4w9WgXcQ&t=10'), 'dQw4w9WgXcQ');
    assert.equal(youTubeVideoId('https://youtu.be/dQw4w9WgXcQ'), 'dQw4w9WgXcQ');
    assert.equal(youTubeVideoId('https://m.youtube.com/shorts/dQw4w9WgXcQ'), 'dQw4w9WgXcQ');
    assert.equal(youTubeVideoId('https://www.youtube.com/live/dQw4w9WgXcQ'), 'dQw4w9WgXcQ');
    assert.equal(youTubeVideoId('https://www.youtube.com/@channel'), null);
    assert.equal(youTubeVideoId('https://example.com/watch?v=dQw4w9WgXcQ'), null);
    assert.equal(youTubeVideoId('https://www.youtube.com/watch?v=../../etc'), null, 'an ID is never a path');
  });

  it('joins caption lines into paragraphs at pauses', async () => {
    const { transcriptToText } = await import('../../lib/providers/video-transcripts.js');
    assert.equal(transcriptToText([{ start: 0, dur: 1, text: 'Hello' }, { start: 1, dur: 1, text: ' there\n' }, { start: 6, dur: 1, text: 'Next topic.' }]), 'Hello there\n\nNext topic.');
  });
});
