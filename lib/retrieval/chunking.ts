/**
 * Splits final rewritten content into retrieval chunks that follow its structure: a heading starts
 * a new chunk, paragraphs are packed together up to the size limit, an over-long paragraph is cut
 * at sentence ends, and each chunk repeats the tail of the previous one within a section so that
 * a sentence that spans a boundary can still be found. Output is a pure function of the input, so
 * re-chunking unchanged text yields the same chunks (and the same chunk IDs).
 */
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

function splitSentences(text: string): string[] {
  const parts = text.match(/[^.!?。！？]+[.!?。！？]*["')\]]*\s*/g) ?? [text];
  return parts.map((s) => s.trim()).filter(Boolean);
}

/** Cuts a block into pieces of at most `max` characters, at sentence ends where possible. */
function splitLong(block: string, max: number): string[] {
  if (block.length <= max) return [block];
  const pieces: string[] = [];
  let current = '';
  for (const sentence of splitSentences(block)) {
    if (sentence.length > max) {
      if (current) pieces.push(current);
      current = '';
      for (let i = 0; i < sentence.length; i += max) pieces.push(sentence.slice(i, i + max));
      continue;
    }
    if (current && current.length + 1 + sentence.length > max) {
      pieces.push(current);
      current = '';
    }
    current = current ? `${current} ${sentence}` : sentence;
  }
  if (current) pieces.push(current);
  return pieces;
}

function tail(text: string, chars: number): string {
  if (chars <= 0 || text.length <= chars) return chars <= 0 ? '' : text;
  const cut = text.slice(-chars);
  const boundary = cut.search(/\s/);
  return boundary >= 0 ? cut.slice(boundary + 1) : cut;
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
