import { franc } from 'franc-min';

/** Franc reports some languages under a macro-language's member code. */
const aliases: Record<string, string> = { nno: 'nob', nor: 'nob', ary: 'arb', arz: 'arb', zho: 'cmn' };

/** ISO 639-3 code of a text's language (franc), or `und` when it is too short to tell. */
export function detectLanguage(text: string): string {
  const code = franc(text, { minLength: 20 });
  return aliases[code] ?? code;
}
