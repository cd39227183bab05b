import assert from 'node:assert/strict';
import { chunkText } from '../../lib/retrieval/chunking.js';
import { prepareDocument } from '../../lib/retrieval/indexing.js';
import { timerTicksDuring } from '../support/event-loop.js';
import { longProse } from '../support/samples.js';

describe('chunking of final rewritten content', () => {
  it('starts a new chunk at each heading and remembers the heading', () => {
    const chunks = chunkText('# Intro\n\nHello there.\n\n## Details\n\nMore text here.');
    assert.equal(chunks.length, 2);
    assert.equal(chunks[0]!.heading, 'Intro');
    assert.match(chunks[0]!.text, /Hello there/);
    assert.equal(chunks[1]!.heading, 'Details');
    assert.doesNotMatch(chunks[1]!.text, /Hello there/, 'no overlap across sections');
  });

  it('leaves comment lines (the OCR page marks of scanned PDFs) out of the chunks', () => {
    const chunks = chunkText('Typed page.\n\n<!-- page 2: OCR (tesseract, eng) -->\nScanned page text.');
    assert.equal(chunks.length, 1);
    assert.equal(chunks[0]!.text, 'Typed page.\n\nScanned page text.');
  });

  it('keeps every chunk within the size limit, cutting long paragraphs at sentence ends', () => {
    const sentence = 'The quick brown fox jumps over the lazy dog near the river bank. ';
    const text = Array.from({ length: 6 }, () => sentence.repeat(20)).join('\n\n');
    const chunks = chunkText(text, { maxChars: 500, overlapChars: 80 });
    assert.ok(chunks.length > 5);
    for (const c of chunks) {
      assert.ok(c.text.length <= 500, `chunk ${c.index} has ${c.text.length} characters`);
      assert.match(c.text, /\.$/, 'ends at a sentence end');
    }
  });

  it('cuts an over-long paragraph without dropping or changing any of it: no "..." lost, "1.5" kept whole, tables cut at rows, emoji kept whole', () => {
    const sentences = Array.from({ length: 40 }, (_, i) => `Release ${i}.5 of the parser handled case ${i} well... and then it did not?! "Odd." ... (see note ${i}.) `);
    const table = ['| Column A | Column B | Column C |', '|---|---|---|', ...Array.from({ length: 60 }, (_, i) => `| row ${i} value | 😀 ${i} | another cell ${i} |`)].join('\n');
    const unbroken = '😀'.repeat(700);
    const text = [sentences.join(''), table, unbroken].join('\n\n');
    const chunks = chunkText(text, { maxChars: 500, overlapChars: 0 });
    const overlapping = chunkText(text, { maxChars: 500, overlapChars: 75 });
    const squeeze = (s: string) => s.replace(/\s+/g, '');
    assert.equal(squeeze(chunks.map((c) => c.text).join('')), squeeze(text), 'the chunks hold every character of the text, in order');
    for (const c of [...chunks, ...overlapping]) {
      assert.ok(c.text.length <= 500, `chunk ${c.index} has ${c.text.length} characters`);
      assert.doesNotMatch(c.text, /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/, `chunk ${c.index} has half an emoji`);
    }
    const prose = chunks.filter((c) => c.text.includes('Release'));
    assert.ok(prose.length > 1);
    for (const c of prose.slice(1)) {
      const at = text.indexOf(c.text.slice(0, 60));
      assert.match(text.slice(at - 2, at), /[.!?"')]\s/, `chunk ${c.index} starts where a sentence starts: ${c.text.slice(0, 60)}`);
    }
    assert.ok(prose.every((c) => !/\d\. 5/.test(c.text)), 'a decimal is no sentence end');
    const rows = chunks.filter((c) => c.text.startsWith('|'));
    assert.ok(rows.length > 1);
    for (const c of rows) assert.match(c.text, /^\|.*\|$/s, 'the table is cut between rows');
  });

  it('repeats the tail of the previous chunk so text across a boundary stays findable', () => {
    const paragraphs = Array.from({ length: 10 }, (_, i) => `Paragraph ${i} talks about topic number ${i} in some detail, enough to fill space.`);
    const chunks = chunkText(paragraphs.join('\n\n'), { maxChars: 200, overlapChars: 60 });
    for (let i = 1; i < chunks.length; i++) {
      const prevTail = chunks[i - 1]!.text.slice(-30);
      assert.ok(chunks[i]!.text.includes(prevTail), `chunk ${i} starts with the end of chunk ${i - 1}`);
    }
  });

  it('is deterministic and numbers chunks from zero, so chunk IDs are stable', () => {
    const text = '# A\n\none two three.\n\n# B\n\nfour five six.';
    assert.deepEqual(chunkText(text), chunkText(text));
    assert.deepEqual(chunkText(text).map((c) => c.index), [0, 1]);
  });

  it('returns nothing for blank content', () => {
    assert.deepEqual(chunkText('  \n\n \n'), []);
  });

  it('prepares a long document for the index (chunks, their languages) in turns that leave the event loop free', async function () {
    this.timeout(60_000);
    const text = longProse(400_000);
    const { result: prepared, ticks } = await timerTicksDuring(() => prepareDocument(text));
    assert.ok(ticks >= 3, `a 10 ms timer fired ${ticks} times while ${prepared.chunks.length} chunks were prepared`);
    assert.deepEqual(prepared.chunks, chunkText(text));
    assert.equal(prepared.languages.length, prepared.chunks.length);
    assert.ok(prepared.languages.includes('eng'), prepared.languages.slice(0, 20).join(' '));
  });
});
