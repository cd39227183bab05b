import type { RecognizedWord } from '../providers/speech-to-text.js';

/**
 * The text of a transcript from what the engine recognised:
 * - `filler_words=false` removes hesitations (uh, um, hmm, ...);
 * - `format_text=true` adds capitals and sentence punctuation to the local engine's words (a
 *   sentence ends where the speaker stopped: an utterance end or a pause of 0.5 s; it ends with `?`
 *   when it opens with a question word or an inverted auxiliary and has at least three words, else
 *   `.`; `i`, `i'm`, ... become `I`, `I'm`); a remote engine's text is already formatted and is kept;
 * - `format_text=false` gives lower-case words without punctuation (apostrophes inside words stay).
 */
export const fillerWords: ReadonlySet<string> = new Set(['uh', 'um', 'uhm', 'umm', 'hmm', 'hm', 'mm', 'mhm', 'mmm', 'ah', 'er', 'erm', 'eh']);

const questionStarts = new Set([
  'what', 'where', 'when', 'why', 'who', 'whom', 'whose', 'which', 'how',
  'is', 'are', 'am', 'was', 'were', 'do', 'does', 'did', 'can', 'could', 'will', 'would', 'should', 'shall', 'may', 'might', 'have', 'has', 'had',
  "isn't", "aren't", "don't", "doesn't", "didn't", "can't", "couldn't", "won't", "wouldn't", "shouldn't",
]);

const SENTENCE_PAUSE_SECONDS = 0.5;

export interface FormatOptions {
  fillerWords: boolean;
  formatText: boolean;
}

const capitalize = (w: string) => w.charAt(0).toUpperCase() + w.slice(1);
const pronounI = (w: string) => (w === 'i' || w.startsWith("i'") ? `I${w.slice(1)}` : w);

/** Text from timed words (the local engine). */
export function formatWords(words: readonly RecognizedWord[], options: FormatOptions): string {
  const kept = words.filter((w) => options.fillerWords || !fillerWords.has(w.w.toLowerCase()));
  if (!options.formatText) return kept.map((w) => w.w.toLowerCase()).join(' ');
  const sentences: string[][] = [];
  let current: string[] = [];
  kept.forEach((w, i) => {
    current.push(w.w.toLowerCase());
    const next = kept[i + 1];
    if (!next || w.end || next.s - w.e >= SENTENCE_PAUSE_SECONDS) {
      sentences.push(current);
      current = [];
    }
  });
  return sentences
    .map((s) => {
      const question = s.length >= 3 && questionStarts.has(s[0]!);
      const text = s.map(pronounI).map((w, i) => (i === 0 ? capitalize(w) : w)).join(' ');
      return `${text}${question ? '?' : '.'}`;
    })
    .join(' ');
}

/** A word of a formatted text: its letters (lower case) and what surrounds them. */
function splitToken(token: string): { lead: string; core: string; trail: string } {
  let a = 0;
  let b = token.length;
  while (a < b && !/[\p{L}\p{N}]/u.test(token[a]!)) a++;
  while (b > a && !/[\p{L}\p{N}]/u.test(token[b - 1]!)) b--;
  return { lead: token.slice(0, a), core: token.slice(a, b), trail: token.slice(b) };
}

/** Text from an engine that answers formatted text (the OpenAI-compatible engines). */
export function formatText(text: string, options: FormatOptions): string {
  let tokens = text.split(/\s+/).filter(Boolean);
  if (!options.fillerWords) {
    const out: string[] = [];
    let capitalizeNext = false;
    for (const token of tokens) {
      const { lead, core, trail } = splitToken(token);
      if (fillerWords.has(core.toLowerCase())) {
        // "Um, I think" → "I think"; a filler that ended a sentence hands its full stop on.
        const previous = out.at(-1);
        if (/[.?!]/.test(trail) && previous && !/[.?!]$/.test(previous)) out[out.length - 1] = previous.replace(/[,;:]?$/, trail.replace(/[^.?!]/g, '').slice(0, 1));
        if (/^\p{Lu}/u.test(core) || /[.?!]/.test(trail)) capitalizeNext = true;
        continue;
      }
      out.push(capitalizeNext ? lead + capitalize(core) + trail : token);
      capitalizeNext = false;
    }
    tokens = out;
  }
  if (!options.formatText) {
    return tokens
      .map((t) => splitToken(t).core.toLowerCase().replace(/[^\p{L}\p{N}'’]+/gu, ' ').trim())
      .filter(Boolean)
      .join(' ');
  }
  return tokens.join(' ');
}
