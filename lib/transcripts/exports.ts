import type { Principal } from '../platform/api-keys.js';
import { conflict } from '../platform/errors.js';
import { transcriptPath } from '../contracts/transcript.js';
import { invalid } from './audio-checks.js';
import { visibleTranscript, type TranscriptApiDeps } from './requests.js';
import { DEFAULT_CHARS_PER_CAPTION, MAX_SEARCH_PHRASE_WORDS, meanConfidence, paragraphsOf, searchTerms, searchWords, sentencesOf, subtitles, timedSentencesOf } from './timed-text.js';

/**
 * AssemblyAI's reads of a completed transcript's timed words: `/sentences`, `/paragraphs`, `/srt`,
 * `/vtt` and `/word-search`. A transcript still queued or processing, or in error, is a 409 (it has
 * no words yet); so is one made by an engine that gives text without times (an OpenAI-compatible
 * TRANSCRIPTION_MODEL), whose `text` is all there is.
 */
async function timedTranscript(deps: Pick<TranscriptApiDeps, 'db'>, principal: Principal, id: string) {
  const row = await visibleTranscript(deps, principal, id);
  if (row.status !== 'completed') throw conflict(`the transcript is ${row.status}: its words can be read once it is completed`);
  const sentences = timedSentencesOf(row);
  if (!sentences) throw conflict(`the transcript has no word times: it was made by ${row.engine ?? 'an engine'} that gives text only (read its text with GET /v2/transcript/{id})`);
  return { row, sentences };
}

export async function readSentences(deps: Pick<TranscriptApiDeps, 'db'>, principal: Principal, id: string) {
  const { row, sentences } = await timedTranscript(deps, principal, id);
  return { id: transcriptPath(row.id), confidence: meanConfidence(sentences.flat()), audio_duration: row.audioDurationSeconds ?? 0, sentences: sentencesOf(sentences) };
}

export async function readParagraphs(deps: Pick<TranscriptApiDeps, 'db'>, principal: Principal, id: string) {
  const { row, sentences } = await timedTranscript(deps, principal, id);
  return { id: transcriptPath(row.id), confidence: meanConfidence(sentences.flat()), audio_duration: row.audioDurationSeconds ?? 0, paragraphs: paragraphsOf(sentences) };
}

export async function readSubtitles(deps: Pick<TranscriptApiDeps, 'db'>, principal: Principal, id: string, format: 'srt' | 'vtt', charsPerCaption: number | undefined) {
  const { sentences } = await timedTranscript(deps, principal, id);
  return subtitles(sentences, format, charsPerCaption ?? DEFAULT_CHARS_PER_CAPTION);
}

export async function searchTranscriptWords(deps: Pick<TranscriptApiDeps, 'db'>, principal: Principal, id: string, words: string) {
  const terms = searchTerms(words);
  if (terms.length === 0) throw invalid('words', 'must name at least one word (comma-separated)');
  const long = terms.find((t) => t.length > MAX_SEARCH_PHRASE_WORDS);
  if (long) throw invalid('words', `'${long.join(' ')}' has ${long.length} words: a phrase has at most ${MAX_SEARCH_PHRASE_WORDS}`);
  const { row, sentences } = await timedTranscript(deps, principal, id);
  return { id: transcriptPath(row.id), ...searchWords(sentences, terms) };
}
