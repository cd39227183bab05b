/** Characters as users count them: Unicode code points, not UTF-16 units. */
export function countCharacters(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

