import { Prisma } from '../platform/db.js';
import type { ModelPrice } from '../platform/config.js';

/** Budget bounds, list-price costs and the recorded passes of rewrite calls (spec 2.6). */

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
