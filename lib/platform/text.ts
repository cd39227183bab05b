/**
 * Text helpers shared by every domain. The trimming helpers loop instead of using expressions like
 * /[ \t]+$/: such an expression is retried at every position of a long run of spaces, which is
 * quadratic, and one 40,000-space line would block the event loop for every tenant.
 */

/** Characters as users count them: Unicode code points, not UTF-16 units. */
export function countCharacters(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** Whether cutting `text` at `at` would part the two halves of a surrogate pair (an emoji, a rare CJK character). */
export function splitsSurrogatePair(text: string, at: number): boolean {
  const before = text.charCodeAt(at - 1);
  const after = text.charCodeAt(at);
  return before >= 0xd800 && before <= 0xdbff && after >= 0xdc00 && after <= 0xdfff;
}

/** Text as it is stored: no byte-order mark, LF line ends. */
export function normalizeLineEnds(text: string): string {
  return text.replace(/^\uFEFF/, '').replace(/\r\n?/g, '\n');
}

/** `text` without any of `chars` at its end. */
export function trimEndOf(text: string, chars: string): string {
  let end = text.length;
  while (end > 0 && chars.includes(text[end - 1]!)) end--;
  return end === text.length ? text : text.slice(0, end);
}

/** `text` without any of `chars` at its start. */
export function trimStartOf(text: string, chars: string): string {
  let start = 0;
  while (start < text.length && chars.includes(text[start]!)) start++;
  return start === 0 ? text : text.slice(start);
}

/** `text` without any of `chars` at either end. */
export const trimOf = (text: string, chars: string) => trimStartOf(trimEndOf(text, chars), chars);

/** Every line of `text` without trailing spaces and tabs. */
export function trimLineEnds(text: string): string {
  return text
    .split('\n')
    .map((line) => trimEndOf(line, ' \t'))
    .join('\n');
}

const isControlCharacter = (code: number) => code < 0x20 || code === 0x7f;

/** Whether `text` holds a C0 control character or DEL (never wanted in a name). */
export function hasControlCharacters(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (isControlCharacter(text.charCodeAt(i))) return true;
  return false;
}

/**
 * Whether `text` shows nothing: only whitespace, control characters and invisible format characters
 * (zero-width spaces and joiners, the byte-order mark, direction marks, soft hyphens), which
 * `trim()` leaves in place. Such a query, speech input or content would be processed (and charged)
 * for nothing.
 */
export function isBlank(text: string): boolean {
  return /^[\s\p{Cc}\p{Cf}]*$/u.test(text);
}

/**
 * A title found in a source (a web page, a video, a document's metadata) as a name: control
 * characters and runs of whitespace become one space, ends trimmed, at most `max` characters
 * (never half a surrogate pair); null when nothing is left. Names a client gives are refused with
 * control characters (api/http/validation.ts); names taken from sources are cleaned the same way.
 */
export function nameFromTitle(title: string | null | undefined, max = 500): string | null {
  if (!title) return null;
  const flat = replaceControlCharacters(title, ' ').replace(/\s+/g, ' ').trim();
  let end = Math.min(flat.length, max);
  if (splitsSurrogatePair(flat, end)) end--;
  return flat.slice(0, end).trimEnd() || null;
}

/** `text` with every C0 control character and DEL replaced by `replacement`. */
export function replaceControlCharacters(text: string, replacement: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) out += isControlCharacter(text.charCodeAt(i)) ? replacement : text[i];
  return out;
}
