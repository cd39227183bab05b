/**
 * The local speech-to-text engine: Moonshine base (Useful Sensors, English, MIT), quantized ONNX
 * weights from the npm tarball `@usefulsensors/moonshine-js@0.1.15` (scripts/fetch-models.sh puts
 * them in the tools cache), run by onnxruntime-node on the CPU.
 *
 * - The model is loaded once per process, on first use, and shared; at most `concurrency` runs at
 *   once, each on `threads` CPU threads (TRANSCRIPTION_LOCAL_*, docs/transcription-engine.md).
 * - A segment is cut in its pauses into stretches of at most 15 s (the model was trained on
 *   utterances up to 30 s and drifts on longer ones; a run's memory grows with its stretch); silent
 *   stretches are not sent to the model.
 *   Inside a stretch, pauses longer than 0.6 s are shortened to 0.6 s before the model hears them:
 *   a sound (a click, a beep, a breath) followed by a second or more of silence makes the model
 *   answer nothing at all for the speech that follows (measured: docs/transcription-engine.md).
 *   When the model still ends at once on a stretch with sound, its next most likely text is kept if
 *   the model is sure enough of it.
 * - Decoding is greedy with the merged decoder's key/value cache: the first step fills the cache of
 *   the cross-attention, later steps feed one token. Tokens are the Llama SentencePiece vocabulary.
 * - Boosted words: contextual biasing. Their token sequences get a bonus in the logits (larger once
 *   their first token has been chosen), so a word the audio supports wins over a near miss; a word
 *   that was not said still loses to what the audio says.
 * - Word times are estimated (lib/audio/word-times.ts), confidences are the mean probability of a
 *   word's tokens.
 */
import path from 'node:path';
import { access } from 'node:fs/promises';
import * as ort from 'onnxruntime-node';
import llamaTokenizer from 'llama-tokenizer-js';
import { frameLevels, quietRuns, silenceThreshold, type Levels } from '../audio/levels.js';
import { readWavSamples } from '../audio/wav.js';
import { spreadWordTimes } from '../audio/word-times.js';
import { Semaphore } from '../platform/semaphore.js';
import { assertLanguageSupported, type LanguageRequest, type RecognizedWord, type SegmentRequest, type SegmentResult, type SpeechToTextEngine } from './speech-to-text-engine.js';

export interface MoonshineOptions {
  /** Holds encoder_model.onnx and decoder_model_merged.onnx. */
  modelDir: string;
  /** CPU threads of one model run (default 1). */
  threads?: number;
  /** Model runs at once (default 1). */
  concurrency?: number;
  /**
   * Longest stretch of audio one model run hears, in seconds (default MAX_STRETCH_SECONDS); stretches
   * are cut in pauses near TARGET_STRETCH_SHARE of it. A run's memory grows with its stretch.
   */
  maxStretchSeconds?: number;
  /** onnxruntime session options over the engine's own, per model (for measurements: bench/transcription-memory.ts). */
  session?: { encoder?: ort.InferenceSession.SessionOptions; decoder?: ort.InferenceSession.SessionOptions };
}

const SAMPLE_RATE = 16_000;
const BOS = 1;
const EOS = 2;
/** Moonshine base: decoder layers, attention heads and their width. */
const LAYERS = 8;
const HEADS = 8;
const HEAD_DIM = 52;
/**
 * Stretches given to the model: cut in a pause near the target (this share of the maximum), never
 * longer than the maximum. A run's memory grows with its stretch (the encoder's attention over all
 * its frames, the cross-attention's keys and values): measured with two runs at once on speech
 * without pauses, the engine took 466 MB at 25 s, 423 MB at 20 s and 372 MB at 15 s (goal: under
 * 500 MB), with the same WER on speech with pauses (bench/transcription-memory.ts,
 * docs/transcription-engine.md#memory).
 */
const MAX_STRETCH_SECONDS = 15;
const TARGET_STRETCH_SHARE = 0.6;
/** Silence kept around the speech of a stretch. */
const STRETCH_PAD_SECONDS = 0.25;
/**
 * Longest pause the model hears inside a stretch: longer ones lose their middle. After a sound and
 * 0.9-1 s of silence the model often ends its transcript before the speech that follows (nothing
 * at all for a short utterance); up to 0.8 s it did not, in the measurements.
 */
const MAX_MODEL_PAUSE_SECONDS = 0.6;
/**
 * When the model ends its text at once on a stretch that holds sound, the text it finds next most
 * likely is kept if the mean natural log-probability of its tokens (the end included) is at least
 * this. Measured: speech after a click and a pause, which the model answered with nothing, came back
 * at -0.4 to -1.1 (flite, espeak-ng and human voices); a click, a beep, a hum or a noise burst alone
 * come back as "You" at -2.0 to -4.3.
 */
const MIN_MEAN_LOGP_AFTER_EARLY_END = -1.5;
/** More tokens than this per second of audio is a decoder repeating itself (speech runs at ~3-4). */
const MAX_TOKENS_PER_SECOND = 8;
/**
 * Boosted words: how much less likely (natural log) than the model's own word a boosted word may be
 * and still be written; how far below the model's first token a boosted word's first token may be to
 * be tried at all; and how different the two may be spelled (edit distance over the longer length).
 * Tuned on the human recordings of the evaluation: "cloves" heard for a boosted "clubs" is 4.5-4.8
 * below and becomes "clubs"; "queen" with a boosted "quinoa" is 4.4 below but spelled too differently.
 */
const BOOST_LOGP = 5;
const BOOST_FIRST_TOKEN_LOGP = 12;
const BOOST_SPELLING_DISTANCE = 0.5;
/** Longest word followed when comparing it with a boosted one, in tokens. */
const MAX_WORD_TOKENS = 12;

interface Model {
  encoder: ort.InferenceSession;
  decoder: ort.InferenceSession;
}

/** A decoded token with the probability the model gave it. */
interface Token {
  id: number;
  p: number;
}

export class MoonshineEngine implements SpeechToTextEngine {
  readonly id = 'moonshine-base';
  readonly description = 'the local Moonshine engine (English only)';
  /** Segments are cut into stretches the model takes inside the engine. */
  readonly maxSegmentSeconds = 600;
  private model: Promise<Model> | null = null;
  private readonly runs: Semaphore;

  constructor(private readonly options: MoonshineOptions) {
    this.runs = new Semaphore(options.concurrency ?? 1);
  }

  supports(language: LanguageRequest): boolean {
    return language === 'en' || language === 'default';
  }

  /** Loads the model (once per process; a failed load is tried again on the next call). */
  load(): Promise<Model> {
    this.model ??= this.open().catch((err: unknown) => {
      this.model = null;
      throw err;
    });
    return this.model;
  }

  private async open(): Promise<Model> {
    const file = (name: string) => path.join(this.options.modelDir, name);
    for (const name of ['encoder_model.onnx', 'decoder_model_merged.onnx']) {
      await access(file(name)).catch(() => {
        throw new Error(`the Moonshine weights are missing (${file(name)}): run scripts/setup.sh, or set TRANSCRIPTION_LOCAL_MODEL_DIR`);
      });
    }
    const threads = this.options.threads ?? 1;
    // No memory pattern: it plans one block per input shape and only uses it from the second run of
    // that shape on, so the arena holds both layouts; stretches rarely repeat a length. Off, the
    // engine took 30 MB less at the same speed (bench/transcription-memory.ts).
    const session: ort.InferenceSession.SessionOptions = { intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all', enableMemPattern: false };
    const [encoder, decoder] = await Promise.all([
      ort.InferenceSession.create(file('encoder_model.onnx'), { ...session, ...this.options.session?.encoder }),
      ort.InferenceSession.create(file('decoder_model_merged.onnx'), { ...session, ...this.options.session?.decoder }),
    ]);
    return { encoder, decoder };
  }

  async transcribeSegment(req: SegmentRequest): Promise<SegmentResult> {
    assertLanguageSupported(this, req.language);
    const { samples, sampleRate } = await readWavSamples(req.wavPath);
    if (sampleRate !== SAMPLE_RATE) throw new Error(`${this.description} takes 16 kHz audio, got ${sampleRate} Hz`);
    const duration = samples.length / SAMPLE_RATE;
    const levels = frameLevels(samples, SAMPLE_RATE);
    const threshold = silenceThreshold(levels);
    if (threshold.silent) return { text: '', words: [] };
    const pauses = quietRuns(levels, threshold.noiseDb, 0.3);
    const maxStretch = this.options.maxStretchSeconds ?? MAX_STRETCH_SECONDS;
    const stretches = planStretches(levels, duration, pauses, maxStretch * TARGET_STRETCH_SHARE, maxStretch);
    const longPauses = quietRuns(levels, threshold.noiseDb, MAX_MODEL_PAUSE_SECONDS);
    const boosts = boostSequences(req.boostedWords ?? []);

    const words: RecognizedWord[] = [];
    for (const stretch of stretches) {
      req.signal?.throwIfAborted();
      const speech = speechBounds(levels, threshold.noiseDb, stretch.start, stretch.end);
      if (!speech) continue;
      const from = Math.max(stretch.start, speech.start - STRETCH_PAD_SECONDS);
      const to = Math.min(stretch.end, speech.end + STRETCH_PAD_SECONDS);
      const audio = modelInput(samples, from, to, longPauses);
      const tokens = await this.runs.run(() => this.decode(audio, boosts));
      const said = wordsOf(tokens);
      const spans = spreadWordTimes(said.map((w) => w.text), levels, threshold.noiseDb, from, to);
      said.forEach((w, i) => {
        const last = i === said.length - 1;
        words.push({ w: w.text, s: spans[i]!.s, e: spans[i]!.e, c: w.c, formatted: true, ...(last || /[.?!]["')\]]*$/.test(w.text) ? { end: true } : {}) });
      });
    }
    return { text: words.map((w) => w.w).join(' '), words };
  }

  /**
   * The model alone on a whole recording, as given: one call, no cutting, trimming or shortened
   * pauses, greedy, no boosted words. For the evaluation, which compares it with the pipeline.
   */
  async modelText(wavPath: string): Promise<string> {
    const { samples, sampleRate } = await readWavSamples(wavPath);
    if (sampleRate !== SAMPLE_RATE) throw new Error(`${this.description} takes 16 kHz audio, got ${sampleRate} Hz`);
    const tokens = await this.runs.run(() => this.decode(modelInput(samples, 0, samples.length / SAMPLE_RATE, []), [], false));
    return llamaTokenizer.decode(tokens.map((t) => t.id), false, false).trim();
  }

  /**
   * Greedy decoding of one stretch (16 kHz samples in [-1, 1]). With `recoverEarlyEnd`, an end of
   * text as the very first token is not taken at once (see MIN_MEAN_LOGP_AFTER_EARLY_END).
   */
  private async decode(audio: Float32Array, boosts: readonly number[][], recoverEarlyEnd = true): Promise<Token[]> {
    const { encoder, decoder } = await this.load();
    const encoded = await encoder.run({ input_values: new ort.Tensor('float32', audio, [1, audio.length]) });
    const hidden = encoded.last_hidden_state!;
    const empty = new ort.Tensor('float32', new Float32Array(0), [1, HEADS, 0, HEAD_DIM]);
    const start: Cache = {};
    for (let l = 0; l < LAYERS; l++) for (const part of ['decoder', 'encoder']) for (const kv of ['key', 'value']) start[`past_key_values.${l}.${part}.${kv}`] = empty;

    /** Feeds one token: the log-probabilities of the next one, and the cache after it. */
    const advance = async (cache: Cache, token: number, first = false): Promise<Step> => {
      const result = await decoder.run({
        input_ids: new ort.Tensor('int64', BigInt64Array.of(BigInt(token)), [1, 1]),
        encoder_hidden_states: hidden,
        use_cache_branch: new ort.Tensor('bool', [!first], [1]),
        ...cache,
      });
      const next: Cache = { ...cache };
      for (let l = 0; l < LAYERS; l++) {
        for (const kv of ['key', 'value']) {
          next[`past_key_values.${l}.decoder.${kv}`] = result[`present.${l}.decoder.${kv}`]!;
          // The cross-attention's keys and values depend on the audio only: the first step computes them.
          if (first) next[`past_key_values.${l}.encoder.${kv}`] = result[`present.${l}.encoder.${kv}`]!;
        }
      }
      const logits = result.logits!;
      const width = logits.dims[2]!;
      return { cache: next, logp: logSoftmax((logits.data as Float32Array).subarray((logits.dims[1]! - 1) * width, logits.dims[1]! * width)) };
    };

    const maxTokens = Math.ceil((audio.length / SAMPLE_RATE) * MAX_TOKENS_PER_SECOND) + 4;
    const out: Token[] = [];
    let step = await advance(start, BOS, true);
    // The model may end at once on audio that holds speech (after a sound and a pause, most often):
    // its next most likely text is kept when the model is sure enough of it (not noise heard as "You").
    const endedAtOnce = recoverEarlyEnd && argmax(step.logp) === EOS;
    if (endedAtOnce) step.logp[EOS] = -Infinity;
    let endLogp: number | null = null;
    while (out.length < maxTokens) {
      const best = argmax(step.logp);
      if (best === EOS) {
        endLogp = step.logp[EOS]!;
        break;
      }
      if (boosts.length > 0 && startsWord(best)) {
        const word = await boostedWord(step, best, boosts, advance);
        out.push(...word.tokens);
        step = word.after;
        continue;
      }
      out.push({ id: best, p: Math.exp(step.logp[best]!) });
      step = await advance(step.cache, best);
    }
    if (endedAtOnce) {
      const logps = [...out.map((t) => Math.log(t.p)), ...(endLogp === null ? [] : [endLogp])];
      if (logps.reduce((a, b) => a + b, 0) / Math.max(1, logps.length) < MIN_MEAN_LOGP_AFTER_EARLY_END) return [];
    }
    return out;
  }
}

type Cache = Record<string, ort.Tensor>;
interface Step {
  cache: Cache;
  /** Log-probabilities of the next token (the ids of the tokenizer's vocabulary only). */
  logp: Float32Array;
}

/** Log-softmax over the tokenizer's vocabulary (the model's table is padded past it to 32768). */
function logSoftmax(row: Float32Array): Float32Array {
  const n = Math.min(row.length, llamaTokenizer.vocabById.length);
  let max = -Infinity;
  for (let i = 0; i < n; i++) max = Math.max(max, row[i]!);
  let sum = 0;
  for (let i = 0; i < n; i++) sum += Math.exp(row[i]! - max);
  const log = max + Math.log(sum);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = row[i]! - log;
  return out;
}

function argmax(values: Float32Array): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i]! > values[best]!) best = i;
  return best;
}

const startsWord = (id: number) => (llamaTokenizer.vocabById[id] ?? '').startsWith('▁');
/** A token that goes on spelling the current word (letters, digits or an apostrophe, no leading space). */
const continuesWord = (id: number) => id !== EOS && /^[\p{L}\p{N}']/u.test(llamaTokenizer.vocabById[id] ?? '');

/**
 * The next word at a word start when boosted words are given: the model's own word (greedy), or a
 * boosted word whose tokens the model finds almost as likely: within BOOST_LOGP of the model's word
 * in log-probability, and complete (the model would not go on spelling it). Whole words are
 * compared, so a boosted word never replaces only the start of a word that merely begins alike.
 */
async function boostedWord(
  at: Step,
  best: number,
  boosts: readonly number[][],
  advance: (cache: Cache, token: number) => Promise<Step>,
): Promise<{ tokens: Token[]; after: Step }> {
  const follow = async (tokens: readonly number[]) => {
    let step = at;
    let logp = 0;
    const taken: Token[] = [];
    for (const id of tokens) {
      logp += step.logp[id]!;
      taken.push({ id, p: Math.exp(step.logp[id]!) });
      step = await advance(step.cache, id);
    }
    return { taken, logp, step };
  };
  // The model's word: its first token, then tokens while they continue it.
  const own = await follow([best]);
  for (let i = 0; i < MAX_WORD_TOKENS; i++) {
    const next = argmax(own.step.logp);
    if (!continuesWord(next)) break;
    own.logp += own.step.logp[next]!;
    own.taken.push({ id: next, p: Math.exp(own.step.logp[next]!) });
    own.step = await advance(own.step.cache, next);
  }
  let chosen = { tokens: own.taken, after: own.step, logp: own.logp };
  for (const seq of boosts) {
    if (seq.length === own.taken.length && seq.every((id, i) => own.taken[i]!.id === id)) return { tokens: own.taken, after: own.step };
    if (at.logp[seq[0]!]! < at.logp[best]! - BOOST_FIRST_TOKEN_LOGP) continue;
    if (!spelledAlike(wordText(own.taken), wordText(seq))) continue;
    const alt = await follow(seq);
    if (continuesWord(argmax(alt.step.logp))) continue;
    if (alt.logp + BOOST_LOGP >= own.logp && alt.logp > chosen.logp - (chosen.tokens === own.taken ? BOOST_LOGP : 0)) chosen = { tokens: alt.taken, after: alt.step, logp: alt.logp };
  }
  return { tokens: chosen.tokens, after: chosen.after };
}

const wordText = (ids: ReadonlyArray<number | Token>) =>
  llamaTokenizer
    .decode(ids.map((t) => (typeof t === 'number' ? t : t.id)), false, false)
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]/gu, '');

/** Two spellings whose edit distance is at most BOOST_SPELLING_DISTANCE of the longer. */
function spelledAlike(a: string, b: string): boolean {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length]! <= BOOST_SPELLING_DISTANCE * Math.max(a.length, b.length, 1);
}

/**
 * The samples of [from, to) seconds in [-1, 1] as the model gets them: every pause in `pauses`
 * longer than MAX_MODEL_PAUSE_SECONDS inside the range loses its middle, keeping half of that
 * length of it on each side (its own room noise, not digital silence).
 */
function modelInput(samples: Int16Array, from: number, to: number, pauses: ReadonlyArray<{ start: number; end: number }>): Float32Array {
  const keep = MAX_MODEL_PAUSE_SECONDS / 2;
  const kept: Array<[number, number]> = [];
  let at = from;
  for (const p of pauses) {
    const start = Math.max(p.start, at);
    const end = Math.min(p.end, to);
    if (end - start <= MAX_MODEL_PAUSE_SECONDS) continue;
    kept.push([at, start + keep]);
    at = end - keep;
  }
  kept.push([at, to]);
  const ranges = kept.map(([a, b]) => [Math.floor(a * SAMPLE_RATE), Math.min(samples.length, Math.floor(b * SAMPLE_RATE))] as const).filter(([a, b]) => b > a);
  const audio = new Float32Array(ranges.reduce((n, [a, b]) => n + b - a, 0));
  let o = 0;
  for (const [a, b] of ranges) for (let i = a; i < b; i++) audio[o++] = samples[i]! / 32768;
  return audio;
}

/**
 * Consecutive stretches covering [0, duration]: each cut in the middle of the pause nearest to
 * start + target among those in [start + target / 2, start + max]; where the speaker never paused
 * that long, in the quietest 20 ms frame of that window (a gap between words, most often) rather
 * than at the maximum itself, which would cut a word in two.
 */
function planStretches(levels: Levels, duration: number, pauses: ReadonlyArray<{ start: number; end: number }>, target: number, max: number): Array<{ start: number; end: number }> {
  const f = levels.frameSeconds;
  const middles = pauses.map((p) => (p.start + p.end) / 2);
  const stretches: Array<{ start: number; end: number }> = [];
  let start = 0;
  while (duration - start > max) {
    const from = start + target / 2;
    const to = start + max;
    const inPause = middles.filter((m) => m >= from && m <= to).sort((a, b) => Math.abs(a - start - target) - Math.abs(b - start - target))[0];
    let cut = inPause;
    if (cut === undefined) {
      let quietest = Math.floor(to / f) - 1;
      for (let i = Math.ceil(from / f); i < Math.min(levels.db.length, Math.floor(to / f)); i++) if (levels.db[i]! < levels.db[quietest]!) quietest = i;
      cut = Math.min(to, (quietest + 0.5) * f);
    }
    stretches.push({ start, end: cut });
    start = cut;
  }
  stretches.push({ start, end: Math.max(start, duration) });
  return stretches;
}

/** Where speech begins and ends in [from, to), or null when the stretch is silent. */
function speechBounds(levels: Levels, noiseDb: number, from: number, to: number): { start: number; end: number } | null {
  const f = levels.frameSeconds;
  let start = -1;
  let end = -1;
  // A stretch needs at least 60 ms above the threshold to hold speech (a click is not a word).
  let loud = 0;
  for (let i = Math.floor(from / f); i < Math.min(levels.db.length, Math.ceil(to / f)); i++) {
    if (levels.db[i]! < noiseDb) continue;
    loud++;
    if (start < 0) start = i;
    end = i + 1;
  }
  return loud * f >= 0.06 ? { start: start * f, end: end * f } : null;
}

/** Words of decoded tokens: a token whose piece starts with `▁` begins a word. */
function wordsOf(tokens: readonly Token[]): Array<{ text: string; c: number }> {
  const groups: Token[][] = [];
  for (const t of tokens) {
    const piece = llamaTokenizer.vocabById[t.id] ?? '';
    if (piece.startsWith('▁') || groups.length === 0) groups.push([t]);
    else groups.at(-1)!.push(t);
  }
  return groups
    .map((g) => ({ text: modernSpelling(llamaTokenizer.decode(g.map((t) => t.id), false, false).trim()), c: Math.round((g.reduce((sum, t) => sum + t.p, 0) / g.length) * 1000) / 1000 }))
    .filter((w) => w.text.length > 0)
    .flatMap((w) => w.text.split(/\s+/).map((text) => ({ text, c: w.c })));
}

/** The model learnt from old books to write "to-morrow", "to-day" and "to-night"; readers today expect one word. */
const modernSpelling = (word: string) => word.replace(/^([Tt])o-(morrow|day|night)\b/, '$1o$2');

/** Token sequences of each boosted word or phrase, as said mid-sentence and sentence-initially. */
function boostSequences(boosted: readonly string[]): number[][] {
  const seqs = new Map<string, number[]>();
  for (const phrase of boosted) {
    const p = phrase.trim().replace(/\s+/g, ' ');
    if (!p) continue;
    for (const variant of new Set([p, p.charAt(0).toUpperCase() + p.slice(1)])) {
      const ids = llamaTokenizer.encode(variant, false, true);
      if (ids.length > 0) seqs.set(ids.join(','), ids);
    }
  }
  return [...seqs.values()];
}
