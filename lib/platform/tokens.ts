import { Tiktoken } from 'js-tiktoken/lite';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { splitsSurrogatePair } from './text.js';
import { EventLoopTurns } from './turns.js';

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
 * only on such runs (same for `x`, +1.6 % for base64); ordinary text is counted exactly.
 */
const LONG_RUN = 64;
const RUN_PIECE = 16;
const longRuns = new RegExp(`\\S{${LONG_RUN + 1},}|\\s{${LONG_RUN + 1},}`, 'gu');

/**
 * Ordinary text is handed to the encoder in pieces of about PIECE_CHARS, so that counting a long
 * text can give the event loop turns in between. Each cut is where the encoder's pre-tokenizer
 * always cuts (after a line end, before a letter or digit; after a letter, before a space): no
 * pre-tokenized piece spans it, so the pieces' counts add up exactly to the whole text's.
 */
const PIECE_CHARS = 8192;
const safeCut = /\n(?=[\p{L}\p{N}])|(?<=\p{L}) /gu;

function* ordinaryPieces(text: string): Generator<string> {
  let at = 0;
  while (text.length - at > PIECE_CHARS) {
    safeCut.lastIndex = at + PIECE_CHARS;
    const cut = safeCut.exec(text);
    if (!cut) break;
    const end = cut[0] === '\n' ? cut.index + 1 : cut.index;
    yield text.slice(at, end);
    at = end;
  }
  if (at < text.length) yield text.slice(at);
}

/** The pieces of `text` the encoder takes one call each: ordinary text, and long runs cut short. */
function* pieces(text: string): Generator<string> {
  let at = 0;
  for (const run of text.matchAll(longRuns)) {
    if (run.index > at) yield* ordinaryPieces(text.slice(at, run.index));
    const end = run.index + run[0].length;
    for (let i = run.index; i < end; ) {
      let cut = Math.min(end, i + RUN_PIECE);
      if (cut < end && splitsSurrogatePair(text, cut)) cut++;
      yield text.slice(i, cut);
      i = cut;
    }
    at = end;
  }
  if (at < text.length) yield* ordinaryPieces(text.slice(at));
}

function encode(text: string): number[] {
  const enc = tokenizer();
  const tokens: number[] = [];
  for (const piece of pieces(text)) for (const t of enc.encode(piece)) tokens.push(t);
  return tokens;
}

/**
 * Each piece's tokens, in order, with a turn for the event loop whenever `turns`' slice is used up
 * (a caller that counts many texts passes its own, so that short texts share one clock).
 */
async function eachPieceInTurns(text: string, use: (tokens: number[]) => void, turns: EventLoopTurns): Promise<void> {
  const enc = tokenizer();
  for (const piece of pieces(text)) {
    use(enc.encode(piece));
    await turns.give();
  }
}

export function countTokens(text: string): number {
  let n = 0;
  for (const piece of pieces(text)) n += tokenizer().encode(piece).length;
  return n;
}

/** countTokens for a text that may be long (a whole document), in event loop turns. */
export async function countTokensInTurns(text: string, turns = new EventLoopTurns()): Promise<number> {
  let n = 0;
  await eachPieceInTurns(text, (tokens) => (n += tokens.length), turns);
  return n;
}

/**
 * `text` cut on token boundaries into pieces of at most `n` tokens each, in order; the pieces
 * join back to the text. Encoded once, so the work is linear in the text.
 */
export async function tokenPieces(text: string, n: number, turns = new EventLoopTurns()): Promise<string[]> {
  const tokens: number[] = [];
  await eachPieceInTurns(text, (piece) => {
    for (const t of piece) tokens.push(t);
  }, turns);
  const out: string[] = [];
  let offset = 0;
  /** What tokens [start, cut) decode to, if that is the text at `offset` (not so when cut inside a multi-byte character). */
  const pieceAt = (start: number, cut: number) => {
    const piece = tokenizer().decode(tokens.slice(start, cut));
    return text.startsWith(piece, offset) ? piece : null;
  };
  for (let start = 0; start < tokens.length; await turns.give()) {
    let cut = Math.min(tokens.length, start + Math.max(1, n));
    let piece = pieceAt(start, cut);
    // Earlier, until the piece is whole characters and within n tokens counted alone (a piece of
    // a long run may count a few more alone); later, should one token hold part of a character.
    while (cut > start + 1 && (piece === null || countTokens(piece) > n)) piece = pieceAt(start, --cut);
    while (piece === null && cut < tokens.length) piece = pieceAt(start, ++cut);
    piece ??= text.slice(offset);
    out.push(piece);
    offset += piece.length;
    start = cut;
  }
  return out;
}

/** The last `n` tokens of `text`. */
export function lastTokens(text: string, n: number): string {
  if (n <= 0) return '';
  const tokens = encode(text);
  return tokens.length <= n ? text : tokenizer().decode(tokens.slice(tokens.length - n));
}
