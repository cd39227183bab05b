import type { ChatMessage } from '../providers/llm.js';
import { countTokens, countTokensInTurns, lastTokens, tokenPieces } from '../platform/tokens.js';
import { EventLoopTurns } from '../platform/turns.js';

/**
 * The model calls of a rewrite: the prompt, the parts a long text is split into (with overlap),
 * and each part's messages.
 */

/** `{person_name}` in a prompt becomes the person the text is written for or by. */
export function renderPrompt(template: string, personName: string | null | undefined): string {
  return template.replaceAll('{person_name}', personName?.trim() || 'the author');
}

export interface RewritePart {
  /** Source text this call rewrites. */
  text: string;
  /** The end of the previous part, given as context only (the overlap). */
  context: string;
}

/** A piece of the source a part is made of, and what joins it to the piece before it. */
interface Unit {
  text: string;
  tokens: number;
  joiner: string;
}

/** Sentences with their trailing whitespace; nothing of the block is left out. */
const sentences = (block: string) => (block.match(/[^.!?\n]*(?:[.!?]+|\n)?\s*/g) ?? [block]).filter(Boolean);

/** Paragraphs, then the sentences of a paragraph longer than a part, then tokens of a sentence longer than a part. */
async function unitsOf(text: string, partTokens: number, turns: EventLoopTurns): Promise<Unit[]> {
  const units: Unit[] = [];
  for (const block of text.split(/\n{2,}/)) {
    if (!block.trim()) continue;
    let joiner = units.length ? '\n\n' : '';
    const tokens = await countTokensInTurns(block, turns);
    if (tokens <= partTokens) {
      units.push({ text: block, tokens, joiner });
      continue;
    }
    for (const sentence of sentences(block)) {
      const n = await countTokensInTurns(sentence, turns);
      for (const piece of n <= partTokens ? [sentence] : await tokenPieces(sentence, partTokens, turns)) {
        units.push({ text: piece, tokens: piece === sentence ? n : countTokens(piece), joiner });
        joiner = '';
      }
    }
  }
  return units;
}

/** Tokens a join may add: the count of joined text is checked, so this only makes rechecks rare. */
const JOIN_ALLOWANCE = 1;

/**
 * Splits a long input into parts of at most `partTokens` source tokens, on paragraph boundaries
 * where possible (then sentences, then tokens). Every part after the first carries the last
 * `overlapTokens` of its predecessor as context, so that a sentence cut at a boundary is understood.
 * Each piece is counted once and parts are packed by the sums, then each part is counted once as a
 * whole: linear in the text (counting every growing candidate part again took 24.6 s for 3 MB), and
 * the event loop gets turns throughout.
 */
export async function splitIntoParts(text: string, partTokens: number, overlapTokens: number): Promise<RewritePart[]> {
  const turns = new EventLoopTurns();
  const texts: string[] = [];
  const join = (group: Unit[]) => group.map((u, i) => (i ? u.joiner : '') + u.text).join('');
  // A group whose joined text counts more than its sum allowed is halved (a single unit fits).
  const emit = async (group: Unit[]): Promise<void> => {
    const joined = join(group);
    if (group.length > 1 && (await countTokensInTurns(joined, turns)) > partTokens) {
      const half = Math.ceil(group.length / 2);
      await emit(group.slice(0, half));
      await emit(group.slice(half));
    } else {
      texts.push(joined);
    }
  };
  let group: Unit[] = [];
  let sum = 0;
  for (const unit of await unitsOf(text, partTokens, turns)) {
    const cost = unit.tokens + (group.length ? JOIN_ALLOWANCE : 0);
    if (group.length && sum + cost > partTokens) {
      await emit(group);
      group = [unit];
      sum = unit.tokens;
    } else {
      group.push(unit);
      sum += cost;
    }
  }
  if (group.length) await emit(group);
  const parts: RewritePart[] = [];
  for (const [i, t] of texts.entries()) {
    parts.push({ text: t, context: i === 0 ? '' : lastTokens(texts[i - 1]!, overlapTokens) });
    await turns.give();
  }
  return parts;
}

/** The messages of one call, and the same messages with the source left out (the prompt overhead). */
export function partMessages(systemPrompt: string, part: RewritePart, index: number, count: number): { messages: ChatMessage[]; overheadMessages: ChatMessage[] } {
  const build = (context: string, text: string): ChatMessage[] => {
    if (count === 1) return [{ role: 'system', content: systemPrompt }, { role: 'user', content: text }];
    const header = `This is part ${index + 1} of ${count} of a longer text.`;
    const user = context
      ? `${header}\nThe end of the previous part, for context only (it is rewritten already; do not repeat it):\n<context>\n${context}\n</context>\nRewrite this part:\n<part>\n${text}\n</part>`
      : `${header}\nRewrite this part:\n<part>\n${text}\n</part>`;
    return [{ role: 'system', content: systemPrompt }, { role: 'user', content: user }];
  };
  return { messages: build(part.context, part.text), overheadMessages: build('', '') };
}

/** Per-message framing tokens of the chat format, counted generously. */
const FRAMING_TOKENS_PER_MESSAGE = 4;
const FRAMING_TOKENS = 3;

export function localPromptTokens(messages: ChatMessage[]): number {
  return messages.reduce((n, m) => n + countTokens(m.content) + FRAMING_TOKENS_PER_MESSAGE, FRAMING_TOKENS);
}

