import { Prisma } from '../db.js';
import type { ModelPrice } from '../config.js';
import type { ChatMessage } from '../providers/llm.js';
import { AUDIO_VIDEO_EXTENSIONS } from './extractors/media.js';
import { countTokens, lastTokens, splitAtToken } from './tokens.js';

/** Rewriting as the knowledge-base spec defines it: prompts, parts, bounds, validation, prices. */

export type RewriteContentType = 'article' | 'video' | 'book';
export type RequestedContentType = RewriteContentType | 'auto';
export const rewriteContentTypes: RewriteContentType[] = ['article', 'video', 'book'];

const VIDEO_HOSTS = ['youtube.com', 'youtu.be', 'vimeo.com', 'dailymotion.com', 'tiktok.com'];

export function isVideoUrl(url: string | null | undefined): boolean {
  if (!url) return false;
  try {
    const host = new URL(url).hostname.toLowerCase().replace(/^(www\.|m\.)/, '');
    return VIDEO_HOSTS.some((h) => host === h || host.endsWith(`.${h}`));
  } catch {
    return false;
  }
}

/**
 * Spec 4.5: video URLs and audio (and video) files use `video`; PDF, EPUB and Word documents use
 * `book`; everything else uses `article`.
 */
export function resolveContentType(requested: RequestedContentType, doc: { type: string; url: string | null; originalExtension: string | null }): RewriteContentType {
  if (requested !== 'auto') return requested;
  if (doc.type === 'url') return isVideoUrl(doc.url) ? 'video' : 'article';
  const ext = doc.originalExtension ?? '';
  if ((AUDIO_VIDEO_EXTENSIONS as readonly string[]).includes(ext)) return 'video';
  if (['pdf', 'epub', 'doc', 'docx'].includes(ext)) return 'book';
  return 'article';
}

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
  const sentences = block.match(/[^.!?\n]+(?:[.!?]+|\n|$)\s*/g) ?? [block];
  const out: string[] = [];
  let current = '';
  for (const sentence of sentences) {
    if (countTokens(current + sentence) <= maxTokens) {
      current += sentence;
      continue;
    }
    if (current) out.push(current);
    current = '';
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

/**
 * The admission bound of one call: the prompt as counted here plus a 10 % margin (a provider's
 * tokenizer may count differently) plus the whole output allowance. Priced models also bound
 * dollars; an unpriced model records no charge, so it reserves none.
 */
export function callBound(promptTokens: number, maxOutputTokens: number, price: ModelPrice | undefined): { tokens: number; dollars: string | undefined } {
  const prompt = Math.ceil(promptTokens * 1.1) + 16;
  return { tokens: prompt + maxOutputTokens, dollars: price ? costUsd(price, prompt, maxOutputTokens) : undefined };
}

/** List-price cost in USD, exact to 8 decimal places (rounded up), as a decimal string. */
export function costUsd(price: ModelPrice, inputTokens: number, outputTokens: number): string {
  const cost = new Prisma.Decimal(price.input).times(inputTokens).plus(new Prisma.Decimal(price.output).times(outputTokens)).dividedBy(1_000_000);
  return cost.toDecimalPlaces(8, Prisma.Decimal.ROUND_UP).toFixed();
}

/**
 * Checks a model's rewrite of one part before it may become content. The output is rejected when
 * it is empty, cut at the output limit (finish_reason `length`), withheld by a content filter, or
 * far shorter or longer than its source (under 15 % or over 400 % of the source's characters; the
 * ratio is not judged for sources under 400 characters, where a rewrite may rightly differ a lot).
 */
export function validatePartOutput(source: string, output: string, finishReason: string | null): string | null {
  if (finishReason === 'length') return 'the output was cut off at the output token limit';
  if (finishReason === 'content_filter') return 'the output was withheld by the provider\'s content filter';
  if (!output.trim()) return 'the output is empty';
  if (source.length >= 400) {
    const ratio = output.trim().length / source.trim().length;
    if (ratio < 0.15) return `the output is ${Math.round(ratio * 100)} % of the source's length (at least 15 % expected)`;
    if (ratio > 4) return `the output is ${Math.round(ratio * 100)} % of the source's length (at most 400 % expected)`;
  }
  return null;
}

/** One provider call of a rewrite attempt, as `rewrite_input_tokens_passes` shows it. */
export interface RewritePass {
  pass: number;
  part: number;
  part_count: number;
  model_name: string;
  fallback: boolean;
  /** The first call for its part; only these carry the overhead / source split. */
  first_pass: boolean;
  prompt_tokens: number | null;
  output_tokens: number | null;
  prompt_overhead_tokens?: number;
  source_input_tokens?: number | null;
  finish_reason: string | null;
  rejected: boolean;
  rejection_reason?: string;
  cost_usd: number | null;
  operation_key: string;
}

/** Totals of an attempt (spec 2.6): null where any call's usage or price is unknown. */
export function rewriteTotals(passes: RewritePass[]) {
  const sum = (values: Array<number | null | undefined>) => (values.some((v) => v == null) ? null : values.reduce<number>((a, v) => a + v!, 0));
  const first = passes.filter((p) => p.first_pass);
  return {
    rewriteInputTokensTotal: passes.length ? sum(passes.map((p) => p.prompt_tokens)) : null,
    rewriteOutputTokens: passes.length ? sum(passes.map((p) => p.output_tokens)) : null,
    inputFileTokens: first.length ? sum(first.map((p) => p.source_input_tokens)) : null,
    rewriteCostUsd: passes.length ? sum(passes.map((p) => p.cost_usd)) : null,
  };
}
