import { Tiktoken } from 'js-tiktoken/lite';
import o200k from 'js-tiktoken/ranks/o200k_base';

/**
 * Token counts with the o200k_base encoding (GPT-4o, GPT-4.1, GPT-5 families). Used for admission
 * bounds and for splitting long inputs; what is recorded as usage always comes from the provider.
 * The encoder is built on first use (about a second), so processes that never count pay nothing.
 */
let encoder: Tiktoken | null = null;
const tokenizer = () => (encoder ??= new Tiktoken(o200k));

/**
 * The encoder's byte-pair merges take time quadratic in the length of one pre-tokenized piece, and
 * a piece is a whole run of letters, of punctuation or of whitespace: 30,000 characters of `x`
 * took 69 s, and 3 MB of them would have held the event loop of the counting process (an API
 * request's admission, a worker's pipeline step) for days. A run longer than LONG_RUN characters
 * is encoded RUN_PIECE characters at a time instead: linear, at worst ~1.5 µs a character here
 * (`x`, base64). The tokens still decode to the text; their count differs from the whole run's
 * only on such runs (same for `x`, +1.6 % for base64), and ordinary text is encoded in one call,
 * exactly as before.
 */
const LONG_RUN = 64;
const RUN_PIECE = 16;
const longRuns = new RegExp(`\\S{${LONG_RUN + 1},}|\\s{${LONG_RUN + 1},}`, 'gu');

function encode(text: string): number[] {
  const enc = tokenizer();
  const runs = [...text.matchAll(longRuns)];
  if (runs.length === 0) return enc.encode(text);
  const tokens: number[] = [];
  const add = (part: string) => {
    for (const t of enc.encode(part)) tokens.push(t);
  };
  let at = 0;
  for (const run of runs) {
    if (run.index > at) add(text.slice(at, run.index));
    const end = run.index + run[0].length;
    for (let i = run.index; i < end; ) {
      let cut = Math.min(end, i + RUN_PIECE);
      // Never between the two halves of a surrogate pair.
      const before = text.charCodeAt(cut - 1);
      if (cut < end && before >= 0xd800 && before <= 0xdbff) cut++;
      add(text.slice(i, cut));
      i = cut;
    }
    at = end;
  }
  if (at < text.length) add(text.slice(at));
  return tokens;
}

export function countTokens(text: string): number {
  return text ? encode(text).length : 0;
}

/** The first `n` tokens of `text` and the rest, split on a token boundary. */
export function splitAtToken(text: string, n: number): [string, string] {
  const tokens = encode(text);
  if (tokens.length <= n) return [text, ''];
  // A cut inside a multi-byte character decodes to a replacement character: cut a token earlier.
  for (let cut = n; cut > 0; cut--) {
    const head = tokenizer().decode(tokens.slice(0, cut));
    if (text.startsWith(head)) return [head, text.slice(head.length)];
  }
  return [text, ''];
}

/** The last `n` tokens of `text`. */
export function lastTokens(text: string, n: number): string {
  if (n <= 0) return '';
  const tokens = encode(text);
  return tokens.length <= n ? text : tokenizer().decode(tokens.slice(tokens.length - n));
}
