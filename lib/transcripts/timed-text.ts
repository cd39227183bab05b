import { comparableForm, comparableWords, type FormattedWord } from './text-format.js';

/**
 * AssemblyAI's views of a transcript's timed words (times in milliseconds): the words of the
 * transcript itself, its sentences, paragraphs, SRT and WebVTT subtitles, and word search. Built
 * from the formatted sentences kept with a completed transcript (`Transcript.sentences`), so every
 * view shows the words of its `text`, with the same capitals and punctuation. No speaker labels
 * are made here: `speaker` is always null.
 */

export interface TimedWordView {
  text: string;
  start: number;
  end: number;
  /** 0-1; null when the engine gave none. */
  confidence: number | null;
  speaker: null;
}

export interface TimedSpan {
  text: string;
  start: number;
  end: number;
  confidence: number | null;
  words: TimedWordView[];
  speaker: null;
}

/** A paragraph starts after a pause of this length between sentences ... */
export const PARAGRAPH_PAUSE_SECONDS = 1.5;
/** ... or once the paragraph holds this many words (at a sentence end). */
export const PARAGRAPH_MAX_WORDS = 150;
/** Longest subtitle cue when the request names no `chars_per_caption`. */
export const DEFAULT_CHARS_PER_CAPTION = 80;
/** AssemblyAI's bound on a searched phrase. */
export const MAX_SEARCH_PHRASE_WORDS = 5;

/** A completed transcript's formatted sentences with times, as completeTranscript kept them (null: the engine gave text only). */
export const timedSentencesOf = (row: { sentences: unknown }) => (Array.isArray(row.sentences) ? (row.sentences as FormattedWord[][]) : null);

const ms = (seconds: number) => Math.round(seconds * 1000);

const wordView = (w: FormattedWord): TimedWordView => ({ text: w.text, start: ms(w.s), end: ms(w.e), confidence: w.c, speaker: null });

/** The mean confidence of the words that have one (null: none has). */
export function meanConfidence(words: ReadonlyArray<{ c: number | null }>): number | null {
  const known = words.map((w) => w.c).filter((c): c is number => c !== null);
  return known.length ? Math.round((known.reduce((a, b) => a + b, 0) / known.length) * 1e4) / 1e4 : null;
}

export const wordsOf = (sentences: readonly FormattedWord[][]): TimedWordView[] => sentences.flat().map(wordView);

function spanOf(words: readonly FormattedWord[]): TimedSpan {
  return {
    text: words.map((w) => w.text).join(' '),
    start: ms(words[0]!.s),
    end: ms(words.at(-1)!.e),
    confidence: meanConfidence(words),
    words: words.map(wordView),
    speaker: null,
  };
}

export const sentencesOf = (sentences: readonly FormattedWord[][]): TimedSpan[] => sentences.filter((s) => s.length > 0).map(spanOf);

/** Sentences joined into paragraphs: a new one after a pause of PARAGRAPH_PAUSE_SECONDS, or at PARAGRAPH_MAX_WORDS words. */
export function paragraphsOf(sentences: readonly FormattedWord[][]): TimedSpan[] {
  const paragraphs: FormattedWord[][] = [];
  let current: FormattedWord[] = [];
  for (const sentence of sentences.filter((s) => s.length > 0)) {
    const last = current.at(-1);
    if (last && (sentence[0]!.s - last.e >= PARAGRAPH_PAUSE_SECONDS || current.length >= PARAGRAPH_MAX_WORDS)) {
      paragraphs.push(current);
      current = [];
    }
    current.push(...sentence);
  }
  if (current.length) paragraphs.push(current);
  return paragraphs.map(spanOf);
}

function clock(milliseconds: number, fractionSeparator: ',' | '.'): string {
  const pad = (n: number, width = 2) => String(n).padStart(width, '0');
  const h = Math.floor(milliseconds / 3_600_000);
  const m = Math.floor((milliseconds % 3_600_000) / 60_000);
  const s = Math.floor((milliseconds % 60_000) / 1000);
  return `${pad(h)}:${pad(m)}:${pad(s)}${fractionSeparator}${pad(milliseconds % 1000, 3)}`;
}

/**
 * Subtitle cues: a cue ends at a sentence end, or before the word that would make it longer than
 * `charsPerCaption` characters (a longer word is a cue of its own).
 */
export function captionsOf(sentences: readonly FormattedWord[][], charsPerCaption: number): Array<{ start: number; end: number; text: string }> {
  const cues: FormattedWord[][] = [];
  for (const sentence of sentences) {
    let cue: FormattedWord[] = [];
    let length = 0;
    for (const w of sentence) {
      if (cue.length && length + 1 + w.text.length > charsPerCaption) {
        cues.push(cue);
        cue = [];
        length = 0;
      }
      length += (cue.length ? 1 : 0) + w.text.length;
      cue.push(w);
    }
    if (cue.length) cues.push(cue);
  }
  return cues.map((cue) => ({ start: ms(cue[0]!.s), end: ms(cue.at(-1)!.e), text: cue.map((w) => w.text).join(' ') }));
}

export function subtitles(sentences: readonly FormattedWord[][], format: 'srt' | 'vtt', charsPerCaption: number): string {
  const cues = captionsOf(sentences, charsPerCaption);
  if (format === 'srt') return cues.map((c, i) => `${i + 1}\n${clock(c.start, ',')} --> ${clock(c.end, ',')}\n${c.text}\n`).join('\n');
  return ['WEBVTT\n', ...cues.map((c) => `${clock(c.start, '.')} --> ${clock(c.end, '.')}\n${c.text}\n`)].join('\n');
}

/** The searched terms of `words=a,b c`: each a word or a phrase of up to MAX_SEARCH_PHRASE_WORDS words. */
export function searchTerms(words: string): string[][] {
  const terms = words.split(',').map(comparableWords).filter((t) => t.length > 0);
  return [...new Map(terms.map((t) => [t.join(' '), t])).values()];
}

/** Where each term occurs: its count, the [start, end] of each occurrence and the index of its first word. */
export function searchWords(sentences: readonly FormattedWord[][], terms: readonly string[][]) {
  const words = sentences.flat();
  const forms = words.map((w) => comparableForm(w.text));
  const matches = terms.map((term) => {
    const timestamps: number[][] = [];
    const indexes: number[] = [];
    for (let i = 0; i + term.length <= forms.length; i++) {
      if (term.every((t, k) => forms[i + k] === t)) {
        timestamps.push([ms(words[i]!.s), ms(words[i + term.length - 1]!.e)]);
        indexes.push(i);
      }
    }
    return { text: term.join(' '), count: indexes.length, timestamps, indexes };
  });
  return { total_count: matches.reduce((n, m) => n + m.count, 0), matches: matches.filter((m) => m.count > 0) };
}
