/**
 * Splits final rewritten content into retrieval chunks that follow its structure: a heading starts
 * a new chunk, paragraphs are packed together up to the size limit, an over-long paragraph is cut
 * at sentence ends, and each chunk repeats the tail of the previous one within a section so that
 * a sentence that spans a boundary can still be found. Output is a pure function of the input, so
 * re-chunking unchanged text yields the same chunks (and the same chunk IDs).
 */
import { splitsSurrogatePair } from '../platform/text.js';

export interface Chunk {
  index: number;
  text: string;
  /** The nearest heading above the chunk, if any. */
  heading: string | null;
  /** The heading trail above the chunk, outermost first (for the table of contents). */
  section: Array<{ level: number; title: string }>;
}

export interface ChunkingOptions {
  maxChars: number;
  overlapChars: number;
}

export const defaultChunking: ChunkingOptions = { maxChars: 1200, overlapChars: 150 };

const headingPattern = /^#{1,6}\s+\S/;

/**
 * Where an over-long block may be cut, best first: after a sentence's closing punctuation (with its
 * quotes or brackets) where whitespace or the end follows (so "1.5" is not a sentence end; CJK marks
 * need no space), after a line (a table's row, a list's item), after a word. Each pattern's
 * suffixes are optional, so a long run of dots (a table of contents' leaders) is matched once, not
 * retried from each dot.
 */
const cutPoints: Array<{ pattern: RegExp; ends?: (match: string, atEndOfText: boolean) => boolean }> = [
  { pattern: /[.!?。！？]+["')\]]*\s*/g, ends: (match, atEndOfText) => atEndOfText || /\s$|[。！？]/.test(match) },
  { pattern: /\n/g },
  { pattern: /\s+/g },
];

/** The text in consecutive slices that each end just after a cut point (the last one at the text's end). */
function sliceAfter(text: string, { pattern, ends }: (typeof cutPoints)[number]): string[] {
  const slices: string[] = [];
  let from = 0;
  for (const match of text.matchAll(pattern)) {
    const to = match.index + match[0].length;
    if (ends && !ends(match[0], to === text.length)) continue;
    if (to > from) slices.push(text.slice(from, to));
    from = to;
  }
  if (from < text.length) slices.push(text.slice(from));
  return slices;
}

/** Cuts every `max` characters, never between the two halves of a surrogate pair (an emoji, a rare CJK character). */
function cutEvery(text: string, max: number): string[] {
  const pieces: string[] = [];
  for (let from = 0; from < text.length; ) {
    let to = Math.min(from + max, text.length);
    if (splitsSurrogatePair(text, to) && to - 1 > from) to -= 1;
    pieces.push(text.slice(from, to));
    from = to;
  }
  return pieces;
}

/**
 * Cuts a block into pieces of at most `max` characters at the best cut points it has. Nothing is
 * dropped or rewritten: the pieces, in order, are the block (pieces are trimmed at their ends only).
 */
function splitLong(block: string, max: number, level = 0): string[] {
  if (block.length <= max) return [block];
  const cutPoint = cutPoints[level];
  if (!cutPoint) return cutEvery(block, max);
  const pieces: string[] = [];
  let current = '';
  for (const unit of sliceAfter(block, cutPoint)) {
    if (unit.trimEnd().length > max) {
      if (current) pieces.push(current);
      current = '';
      pieces.push(...splitLong(unit, max, level + 1));
      continue;
    }
    if (current && current.length + unit.trimEnd().length > max) {
      pieces.push(current);
      current = '';
    }
    current += unit;
  }
  if (current) pieces.push(current);
  return pieces.map((piece) => piece.trim()).filter(Boolean);
}

function tail(text: string, chars: number): string {
  if (chars <= 0 || text.length <= chars) return chars <= 0 ? '' : text;
  const start = text.length - chars;
  const cut = text.slice(start);
  const boundary = cut.search(/\s/);
  if (boundary >= 0) return cut.slice(boundary + 1);
  return splitsSurrogatePair(text, start) ? cut.slice(1) : cut;
}

/** A line that is one whole HTML comment: a note for readers of the Markdown, not content (e.g. OCR page marks). */
const isCommentLine = (line: string) => {
  const t = line.trim();
  return t.startsWith('<!--') && t.endsWith('-->');
};

export function chunkText(text: string, options: ChunkingOptions = defaultChunking): Chunk[] {
  const { maxChars, overlapChars } = options;
  const blocks = text
    .replace(/\r\n?/g, '\n')
    .split('\n')
    .filter((line) => !isCommentLine(line))
    .join('\n')
    .split(/\n\s*\n|\n(?=#{1,6}\s)/)
    .map((b) => b.trim())
    .filter(Boolean);

  const chunks: Chunk[] = [];
  let heading: string | null = null;
  let trail: Array<{ level: number; title: string }> = [];
  let current = '';
  let carried = '';
  const flush = () => {
    if (current.trim() && current !== carried) {
      chunks.push({ index: chunks.length, text: current.trim(), heading, section: trail });
      carried = tail(current, overlapChars);
    }
    current = carried;
  };

  for (const block of blocks) {
    if (headingPattern.test(block)) {
      flush();
      carried = '';
      current = '';
      const line = block.split('\n')[0]!;
      const level = line.match(/^#+/)![0].length;
      heading = line.replace(/^#+\s*/, '').trim();
      trail = [...trail.filter((h) => h.level < level), { level, title: heading }];
    }
    for (const piece of splitLong(block, maxChars - overlapChars)) {
      if (current && current.length + 2 + piece.length > maxChars) flush();
      current = current ? `${current}\n\n${piece}` : piece;
    }
  }
  flush();
  return chunks;
}
