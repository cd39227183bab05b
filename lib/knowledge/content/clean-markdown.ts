import { normalizeLineEnds, trimEndOf, trimStartOf } from '../../platform/text.js';

/**
 * Renders stored rewritten content as clean Markdown (GET ...?format=markdown). The rule, applied
 * outside fenced code blocks (whose lines are kept as they are, apart from line ends):
 * 1. a BOM is dropped and line ends become LF;
 * 2. a document wholly wrapped in one ```markdown (or ```md) fence, as language models sometimes
 *    answer, is unwrapped;
 * 3. trailing spaces and tabs are removed from every line (so a two-space hard break becomes a soft
 *    break);
 * 4. runs of blank lines collapse to one blank line, and leading and trailing blank lines go;
 * 5. every ATX heading (`#` to `######`) and every code fence has a blank line before it, and every
 *    heading a blank line after it;
 * 6. the result ends with exactly one newline (empty content stays empty).
 */
export function renderCleanMarkdown(text: string): string {
  const src = unwrapWholeDocumentFence(normalizeLineEnds(text));

  const out: string[] = [];
  const last = () => out[out.length - 1];
  const blankBefore = () => {
    if (out.length > 0 && last() !== '') out.push('');
  };
  let fence: { char: string; length: number } | null = null;
  let afterHeading = false;
  for (const raw of src.split('\n')) {
    if (fence) {
      out.push(raw);
      const close = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(raw);
      if (close && close[1]![0] === fence.char && close[1]!.length >= fence.length) fence = null;
      continue;
    }
    const line = trimEndOf(raw, ' \t');
    if (line === '') {
      if (out.length > 0 && last() !== '') out.push('');
      continue;
    }
    if (afterHeading) blankBefore();
    afterHeading = false;
    const open = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (open) {
      blankBefore();
      out.push(line);
      fence = { char: open[1]![0]!, length: open[1]!.length };
      continue;
    }
    if (/^ {0,3}#{1,6}(?:[ \t]|$)/.test(line)) {
      blankBefore();
      afterHeading = true;
    }
    out.push(line);
  }
  while (out.length > 0 && last() === '') out.pop();
  return out.length ? `${out.join('\n')}\n` : '';
}

/**
 * The inside of a document that is wholly one ```markdown (or ```md, or ~~~) fence: the opening
 * line is the first non-blank line, the closing line the last, and it repeats the opening fence
 * exactly. Anything else is returned as it is. Done line by line: the single expression this
 * replaces backtracked quadratically over long runs of spaces.
 */
function unwrapWholeDocumentFence(src: string): string {
  const body = src.trim();
  const firstBreak = body.indexOf('\n');
  const lastBreak = body.lastIndexOf('\n');
  if (firstBreak < 0 || lastBreak <= firstBreak) return src;
  const opening = /^(`{3,}|~{3,})[ \t]*(?:markdown|md)[ \t]*$/i.exec(body.slice(0, firstBreak));
  if (!opening || trimStartOf(body.slice(lastBreak + 1), ' \t') !== opening[1]) return src;
  return body.slice(firstBreak + 1, lastBreak);
}
