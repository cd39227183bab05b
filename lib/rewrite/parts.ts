import type { ChatMessage } from '../providers/llm.js';
import { countTokens, lastTokens, splitAtToken } from '../platform/tokens.js';

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

function splitLongBlock(block: string, maxTokens: number): string[] {
  if (countTokens(block) <= maxTokens) return [block];
  const sentences = block.match(/[^.!?\n]+(?:[.!?]+|\n)?\s*/g) ?? [block];
  const out: string[] = [];
  let current = '';
  for (const sentence of sentences) {
    if (countTokens(current + sentence) <= maxTokens) {
      current += sentence;
      continue;
    }
    if (current) out.push(current);
    let rest = sentence;
    while (countTokens(rest) > maxTokens) {
      const [head, tail] = splitAtToken(rest, maxTokens);
      out.push(head);
      rest = tail;
    }
    current = rest;
  }
  if (current) out.push(current);
  return out;
}

/**
 * Splits a long input into parts of at most `partTokens` source tokens, on paragraph boundaries
 * where possible (then sentences, then tokens). Every part after the first carries the last
 * `overlapTokens` of its predecessor as context, so that a sentence cut at a boundary is understood.
 */
export function splitIntoParts(text: string, partTokens: number, overlapTokens: number): RewritePart[] {
  const blocks = text.split(/\n{2,}/).filter((b) => b.trim()).flatMap((b) => splitLongBlock(b, partTokens));
  const texts: string[] = [];
  let current = '';
  for (const block of blocks) {
    const candidate = current ? `${current}\n\n${block}` : block;
    if (current && countTokens(candidate) > partTokens) {
      texts.push(current);
      current = block;
    } else {
      current = candidate;
    }
  }
  if (current) texts.push(current);
  return texts.map((t, i) => ({ text: t, context: i === 0 ? '' : lastTokens(texts[i - 1]!, overlapTokens) }));
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

