import { Tiktoken } from 'js-tiktoken/lite';
import o200k from 'js-tiktoken/ranks/o200k_base';

/**
 * Token counts with the o200k_base encoding (GPT-4o, GPT-4.1, GPT-5 families). Used for admission
 * bounds and for splitting long inputs; what is recorded as usage always comes from the provider.
 * The encoder is built on first use (about a second), so processes that never count pay nothing.
 */
let encoder: Tiktoken | null = null;
const tokenizer = () => (encoder ??= new Tiktoken(o200k));

export function countTokens(text: string): number {
  return text ? tokenizer().encode(text).length : 0;
}

/** The first `n` tokens of `text` and the rest, split on a token boundary. */
export function splitAtToken(text: string, n: number): [string, string] {
  const tokens = tokenizer().encode(text);
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
  const tokens = tokenizer().encode(text);
  return tokens.length <= n ? text : tokenizer().decode(tokens.slice(tokens.length - n));
}
