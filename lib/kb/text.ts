/** Characters as users count them: Unicode code points, not UTF-16 units. */
export function countCharacters(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/**
 * A local token estimate for text that no model has tokenized (use_original_as_rewritten): about
 * four characters per token, the usual ratio for English with GPT-style tokenizers.
 */
export function estimateTokens(text: string): number {
  return Math.ceil(countCharacters(text) / 4);
}
