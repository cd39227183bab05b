import type { RecognizedWord } from '../providers/speech-to-text.js';

/**
 * The text of a transcript from what the engine recognised:
 * - `filler_words=false` removes hesitations (uh, um, hmm, ...);
 * - `format_text=true` adds capitals and sentence punctuation to the local engine's words (a
 *   sentence ends where the speaker stopped: a pause of 0.5 s or the engine's utterance end; it ends with `?`
 *   when it opens with a question word or an inverted auxiliary and has at least three words, else
 *   `.`; `i`, `i'm`, ... become `I`, `I'm`); a remote engine's text is already formatted and is kept;
 * - `format_text=false` gives lower-case words without punctuation (apostrophes inside words stay);
 * - `punctuate=false` (AssemblyAI's) drops the punctuation marks and keeps format_text's capitals.
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
  /** AssemblyAI's `punctuate` (default true): false keeps the capitals of format_text without any punctuation mark. */
  punctuate?: boolean;
}

const capitalize = (w: string) => w.charAt(0).toUpperCase() + w.slice(1);
const pronounI = (w: string) => (w === 'i' || w.startsWith("i'") ? `I${w.slice(1)}` : w);

/** A word as the transcript shows it: its text (capitals and punctuation as formatted) and times in seconds. */
export interface FormattedWord {
  text: string;
  s: number;
  e: number;
  c: number | null;
}

/**
 * Timed words (the local engine) formatted, in sentences. Words the engine formatted itself
 * (Moonshine) keep its capitals and punctuation, and a sentence ends where its punctuation or its
 * utterance ends (its word times are estimates: a pause between them says little). Plain words
 * (lower case, no punctuation) end a sentence at an utterance end or a pause of 0.5 s, and
 * `format_text` adds the capitals and the final mark.
 */
export function formatSentences(words: readonly RecognizedWord[], options: FormatOptions): FormattedWord[][] {
  const kept: RecognizedWord[] = [];
  for (const w of words) {
    if (options.fillerWords || !fillerWords.has(splitToken(w.w).core.toLowerCase())) kept.push(w);
    // "test, um." → "test.": a removed filler hands its sentence end on.
    else if (w.end && kept.length > 0) kept[kept.length - 1] = { ...kept.at(-1)!, end: true };
  }
  const sentences: RecognizedWord[][] = [];
  let current: RecognizedWord[] = [];
  kept.forEach((w, i) => {
    current.push(w);
    const next = kept[i + 1];
    if (!next || w.end || (!w.formatted && next.s - w.e >= SENTENCE_PAUSE_SECONDS)) {
      sentences.push(current);
      current = [];
    }
  });
  return sentences.map((sentence) => {
    if (sentence.some((w) => w.formatted)) return formattedSentence(sentence, options);
    const lower = sentence.map((w) => w.w.toLowerCase());
    const question = lower.length >= 3 && questionStarts.has(lower[0]!);
    return sentence.map((w, i) => {
      let text = lower[i]!;
      if (options.formatText) {
        text = pronounI(text);
        if (i === 0) text = capitalize(text);
        if (i === sentence.length - 1 && options.punctuate !== false) text += question ? '?' : '.';
      }
      return { text, s: w.s, e: w.e, c: w.c };
    });
  });
}

/** A sentence of words the engine formatted: kept as written, the punctuation removed on request, ended by a mark. */
function formattedSentence(sentence: readonly RecognizedWord[], options: FormatOptions): FormattedWord[] {
  const out: FormattedWord[] = [];
  sentence.forEach((w, i) => {
    let text = w.w;
    if (!options.formatText || options.punctuate === false) {
      text = bareWord(text);
      if (!options.formatText) text = text.toLowerCase();
    } else {
      if (i === 0) text = capitalize(text);
      // A sentence cut where the engine heard the speaker stop still ends with a mark.
      if (i === sentence.length - 1 && !/[.?!]["')\]]*$/.test(text)) text = text.replace(/[,;:]$/, '') + '.';
    }
    if (text) out.push({ text, s: w.s, e: w.e, c: w.c });
  });
  return out;
}

/** A word without punctuation: letters, digits and apostrophes inside it (AssemblyAI's punctuate=false). */
const bareWord = (token: string) => splitToken(token).core.replace(/[^\p{L}\p{N}'’]+/gu, ' ').trim();

/** The text of formatted sentences. */
export const textOfSentences = (sentences: readonly FormattedWord[][]) => sentences.flat().map((w) => w.text).join(' ');

/** Text from timed words (the local engine). */
export const formatWords = (words: readonly RecognizedWord[], options: FormatOptions) => textOfSentences(formatSentences(words, options));

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
  if (!options.formatText || options.punctuate === false) {
    return tokens
      .map(bareWord)
      .map((t) => (options.formatText ? t : t.toLowerCase()))
      .filter(Boolean)
      .join(' ');
  }
  return tokens.join(' ');
}

/** Words as search and custom spelling compare them: lower case, letters, digits and inner apostrophes only. */
export function comparableForm(text: string): string {
  const trimQuotes = (w: string) => {
    let a = 0;
    let b = w.length;
    while (a < b && w[a] === "'") a++;
    while (b > a && w[b - 1] === "'") b--;
    return w.slice(a, b);
  };
  return text.toLowerCase().replace(/[^\p{L}\p{N}']+/gu, ' ').split(' ').map(trimQuotes).filter(Boolean).join(' ');
}

/** The comparable forms of the words of a phrase (as a transcript's words would have them). */
export const comparableWords = (phrase: string) => phrase.trim().split(/\s+/).map(comparableForm).filter(Boolean);

/** AssemblyAI's custom_spelling: each `from` word or phrase, wherever it is said, is written `to`. */
export interface SpellingRule {
  from: string[];
  to: string;
}

/**
 * Applies custom spelling to formatted sentences: a run of words whose comparable forms are those
 * of a `from` phrase (the longest first) becomes one word written `to`, keeping the punctuation
 * after the run and its times (first start, last end, lowest confidence). Runs do not cross
 * sentences.
 */
export function applyCustomSpelling(sentences: readonly FormattedWord[][], rules: readonly SpellingRule[]): FormattedWord[][] {
  const phrases = rules
    .flatMap((r) => r.from.map((f) => ({ forms: comparableWords(f), to: r.to })))
    .filter((p) => p.forms.length > 0)
    .sort((a, b) => b.forms.length - a.forms.length);
  if (phrases.length === 0) return sentences.map((s) => [...s]);
  return sentences.map((sentence) => {
    const forms = sentence.map((w) => comparableForm(w.text));
    const out: FormattedWord[] = [];
    for (let i = 0; i < sentence.length; ) {
      const hit = phrases.find((p) => p.forms.every((f, k) => forms[i + k] === f));
      if (!hit) {
        out.push(sentence[i]!);
        i++;
        continue;
      }
      const run = sentence.slice(i, i + hit.forms.length);
      const confidences = run.map((w) => w.c).filter((c): c is number => c !== null);
      out.push({ text: hit.to + splitToken(run.at(-1)!.text).trail, s: run[0]!.s, e: run.at(-1)!.e, c: confidences.length ? Math.min(...confidences) : null });
      i += run.length;
    }
    return out;
  });
}

/** The same for a text without times (a remote engine's): one sentence of its words. */
export function spellText(text: string, rules: readonly SpellingRule[]): string {
  if (rules.length === 0 || !text) return text;
  const words = text.split(' ').map((w) => ({ text: w, s: 0, e: 0, c: null }));
  return textOfSentences(applyCustomSpelling([words], rules));
}
