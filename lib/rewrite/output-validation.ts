import { isBlank } from '../platform/text.js';

/**
 * Checks a model's rewrite of one part before it may become content. The output is rejected when
 * it is empty, cut at the output limit (finish_reason `length`), withheld by a content filter, or
 * far shorter or longer than its source (under 15 % or over 400 % of the source's characters; the
 * ratio is not judged for sources under 400 characters, where a rewrite may rightly differ a lot).
 */
export function validatePartOutput(source: string, output: string, finishReason: string | null): string | null {
  if (finishReason === 'length') return 'the output was cut off at the output token limit';
  if (finishReason === 'content_filter') return 'the output was withheld by the provider\'s content filter';
  if (isBlank(output)) return 'the output is empty';
  if (source.length >= 400) {
    const ratio = output.trim().length / source.trim().length;
    if (ratio < 0.15) return `the output is ${Math.round(ratio * 100)} % of the source's length (at least 15 % expected)`;
    if (ratio > 4) return `the output is ${Math.round(ratio * 100)} % of the source's length (at most 400 % expected)`;
  }
  return null;
}
