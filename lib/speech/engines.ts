import { access, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { runTool, streamTool, ToolFailed } from '../platform/child-process.js';
import type { SystemTool } from '../platform/system-tools.js';
import { AppError } from '../platform/errors.js';
import { splitsSurrogatePair } from '../platform/text.js';
import { parseWavHeader } from '../audio/wav.js';
import { espeakVoiceOf, localeOf, type SpeechLanguage } from './languages.js';
import type { BuiltInVoice, LocalEngine } from './voices.js';
import { makeScratchDir } from '../platform/scratch.js';

/**
 * The local engines, run through runTool/streamTool: festival (`text2wave`, the HTS voice
 * cmu_us_slt_arctic_hts), flite and espeak-ng, plus kakasi for Japanese. Speed uses each engine's
 * own rate control: festival HTS `-r <speed>`, flite `duration_stretch = 1 / speed`, espeak-ng
 * `-s 175 × speed` words per minute. Audio is handed on as soon as an engine writes it.
 */
export interface EngineChoice {
  engine: LocalEngine;
  /** The engine's voice: festival voice name, flite voice, espeak-ng voice (+variant). */
  voice: string;
  /** Output sample rate of the engine (festival is asked for 24 kHz). */
  sampleRate: number;
  /** Japanese: kanji converted to kana first. */
  kana: boolean;
}

const FESTIVAL_VOICE_DIR = '/usr/share/festival/voices/us/cmu_us_slt_arctic_hts';
let festivalInstalled: Promise<boolean> | null = null;
const hasFestival = () => (festivalInstalled ??= access(FESTIVAL_VOICE_DIR).then(() => true, () => false));

/** Which engine and voice speak `language` for a built-in voice (null language: the voice's default, English). */
export async function engineFor(voice: BuiltInVoice, language: SpeechLanguage | null): Promise<EngineChoice> {
  if (language === null || language === 'en') {
    const { engine, voice: v } = voice.english;
    if (engine === 'festival') return (await hasFestival()) ? { engine, voice: v, sampleRate: 24000, kana: false } : { engine: 'flite', voice: 'slt', sampleRate: 16000, kana: false };
    return { engine, voice: v, sampleRate: engine === 'flite' ? 16000 : 22050, kana: false };
  }
  return { engine: 'espeak-ng', voice: `${espeakVoiceOf[language]}${voice.espeakVariant}`, sampleRate: 22050, kana: language === 'ja' };
}

const FIRST_PIECE = 200;
const PIECE = 600;

/**
 * Where a sentence longer than `max` is cut: after the last clause mark (`,` `;` `:` and a space) in
 * its second half, where a speaker pauses anyway; else at the last space in its second half; else at
 * `max`, never between the halves of a surrogate pair.
 */
function cutPoint(rest: string, max: number): number {
  const head = rest.slice(0, max + 1);
  let clause = -1;
  for (const m of head.matchAll(/[,;:](?=\s)/g)) if (m.index < max) clause = m.index + 1;
  if (clause > max / 2) return clause;
  const space = rest.lastIndexOf(' ', max);
  if (space > max / 2) return space;
  return splitsSurrogatePair(rest, max) ? max - 1 : max;
}

/** Cuts a long sentence into parts of at most `max` characters (see cutPoint). */
function cutLong(sentence: string, max: number): string[] {
  const out: string[] = [];
  let rest = sentence;
  while (rest.length > max) {
    const at = cutPoint(rest, max);
    out.push(rest.slice(0, at));
    rest = rest.slice(at);
  }
  if (rest.trim()) out.push(rest);
  return out;
}

/**
 * festival's longest utterance (characters). HTS's time grows faster than an utterance's length:
 * 2,000 characters of numbers without a sentence end (13 minutes of speech) took it over 100 s as
 * one utterance, 32 s as utterances of at most 160 characters; ordinary sentences are shorter.
 */
const FESTIVAL_UTTERANCE = 160;

/**
 * The text for festival with a blank line, its utterance break (a pause; no word changes), inside
 * every sentence longer than FESTIVAL_UTTERANCE, at a space where there is one. Utterances are
 * also what festival writes one at a time, so a long sentence's first audio comes early too.
 */
export function festivalUtterances(text: string, language: SpeechLanguage | null): string {
  const segmenter = new Intl.Segmenter(localeOf(language), { granularity: 'sentence' });
  let out = '';
  for (const { segment } of segmenter.segment(text)) out += segment.length > FESTIVAL_UTTERANCE ? cutLong(segment, FESTIVAL_UTTERANCE).join('\n\n') : segment;
  return out;
}

/** The text in pieces at sentence ends: a short first piece (≤ 200 characters), then up to 600 each. */
export function splitText(text: string, language: SpeechLanguage | null): string[] {
  const segmenter = new Intl.Segmenter(localeOf(language), { granularity: 'sentence' });
  const pieces: string[] = [];
  let current = '';
  for (const { segment } of segmenter.segment(text)) {
    const limit = pieces.length === 0 ? FIRST_PIECE : PIECE;
    for (const part of cutLong(segment, PIECE)) {
      if (current && current.length + part.length > limit) {
        pieces.push(current);
        current = '';
      }
      current += part;
      if (pieces.length === 0 && current.length >= FIRST_PIECE / 2) {
        pieces.push(current);
        current = '';
      }
    }
  }
  if (current.trim()) pieces.push(current);
  return pieces.map((p) => p.trim()).filter(Boolean);
}

function engineFailure(err: unknown, choice: EngineChoice): unknown {
  if (!(err instanceof ToolFailed)) return err;
  if (err.kind === 'missing') return new AppError('internal_error', `the speech engine ${choice.engine} is not installed on this server`);
  if (err.kind === 'timeout') return new AppError('upstream_error', `the speech engine ${choice.engine} did not finish in time`, undefined, 504);
  return new AppError('upstream_error', `the speech engine ${choice.engine} failed: ${err.message}`);
}

/** PCM samples of a WAV in memory (sizes written by a pipe writer are ignored). */
function wavData(wav: Buffer, expectedRate: number): Buffer {
  const layout = parseWavHeader(wav);
  if (!layout) throw new Error('the speech engine wrote no WAV header');
  if (layout.sampleRate !== expectedRate || layout.channels !== 1) throw new Error(`the speech engine wrote ${layout.sampleRate} Hz × ${layout.channels}, expected ${expectedRate} Hz mono`);
  const end = layout.declaredDataBytes === null ? wav.length : Math.min(wav.length, layout.dataOffset + layout.declaredDataBytes);
  return wav.subarray(layout.dataOffset, end);
}

/** flite on one piece of text → raw s16le mono samples (it writes only to a file it opens by name). */
async function flitePiece(choice: EngineChoice, text: string, speed: number, limits: { timeoutMs: number; signal?: AbortSignal }): Promise<Buffer> {
  const dir = await makeScratchDir('speech-flite-');
  try {
    const out = path.join(dir, 'piece.wav');
    await runTool('flite', ['-voice', choice.voice, '--setf', `duration_stretch=${(1 / speed).toFixed(3)}`, '-t', text, '-o', out], limits);
    return wavData(await readFile(out), choice.sampleRate);
  } catch (err) {
    if (limits.signal?.aborted) throw err;
    throw engineFailure(err, choice);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Samples of a streamed WAV (its header read from the first bytes; sizes written by a pipe writer ignored). */
async function* wavStreamData(chunks: AsyncIterable<Buffer>, expectedRate: number): AsyncGenerator<Buffer> {
  let head: Buffer | null = Buffer.alloc(0);
  for await (const chunk of chunks) {
    if (head === null) {
      yield chunk;
      continue;
    }
    head = Buffer.concat([head, chunk]);
    const layout = parseWavHeader(head);
    if (!layout) continue;
    if (layout.sampleRate !== expectedRate || layout.channels !== 1) throw new Error(`the speech engine wrote ${layout.sampleRate} Hz × ${layout.channels}, expected ${expectedRate} Hz mono`);
    const data = head.subarray(layout.dataOffset);
    head = null;
    if (data.length) yield data;
  }
}

/** One engine process over the whole text, its samples delivered as the engine writes them. */
async function* streamEngine(choice: EngineChoice, text: string, speed: number, limits: { timeoutMs: number; signal?: AbortSignal }): AsyncGenerator<Buffer> {
  const input = choice.kana ? (await runTool('kakasi', ['-i', 'utf8', '-o', 'utf8', '-JH'], { ...limits, input: text })).stdout : Buffer.from(text);
  const [cmd, args]: [SystemTool, string[]] =
    choice.engine === 'festival'
      ? ['text2wave', ['-eval', `(voice_${choice.voice})`, '-eval', `(set! hts_engine_params (append ${choice.voice}::hts_engine_params (list (list "-r" ${speed.toFixed(3)}))))`, '-F', '24000', '-otype', 'raw', '-o', '-']]
      : ['espeak-ng', ['-v', choice.voice, '-s', String(Math.round(175 * speed)), '--stdout']];
  const tool = streamTool(cmd, args, limits);
  tool.stdin.end(input);
  try {
    const samples = choice.engine === 'festival' ? tool.stdout : wavStreamData(tool.stdout, choice.sampleRate);
    let carry: Buffer | null = null;
    for await (const chunk of samples) {
      // Whole 16-bit samples only: a chunk may end inside one.
      const all: Buffer = carry ? Buffer.concat([carry, chunk as Buffer]) : (chunk as Buffer);
      const whole = all.length - (all.length % 2);
      carry = whole < all.length ? all.subarray(whole) : null;
      if (whole) yield all.subarray(0, whole);
    }
    await tool.done;
  } catch (err) {
    if (limits.signal?.aborted) throw err;
    throw engineFailure(err, choice);
  } finally {
    tool.kill();
  }
}

/**
 * The whole text as a stream of PCM, in order. festival (text2wave writes each utterance as soon as
 * it is made; see festivalUtterances) and espeak-ng (`--stdout`) run once over the whole text and are read as they write.
 * flite writes only a finished file, so the text is cut at sentence ends and the pieces are
 * synthesized one after another (the next one while the current one is sent; it is fast: a
 * 2,000-character text takes it under 0.1 s).
 */
export async function* synthesizeLocal(choice: EngineChoice, text: string, language: SpeechLanguage | null, speed: number, limits: { timeoutMs: number; signal?: AbortSignal }): AsyncGenerator<Buffer> {
  if (choice.engine !== 'flite') {
    yield* streamEngine(choice, choice.engine === 'festival' ? festivalUtterances(text, language) : text, speed, limits);
    return;
  }
  const pieces = splitText(text, language);
  const started: Array<Promise<Buffer>> = [];
  const start = (i: number) => {
    if (i < pieces.length && !started[i]) {
      started[i] = flitePiece(choice, pieces[i]!, speed, limits);
      started[i]!.catch(() => undefined);
    }
  };
  for (let i = 0; i < pieces.length; i++) {
    start(i);
    start(i + 1);
    yield await started[i]!;
  }
}
