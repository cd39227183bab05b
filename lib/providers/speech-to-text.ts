/**
 * Speech to text: the one adapter behind transcripts (/v2/transcript) and audio/video documents.
 * Input is always one 16 kHz mono 16-bit PCM WAV segment (callers decode and cut with lib/audio).
 *
 * - `MoonshineEngine` (lib/providers/moonshine.ts): the local engine, chosen when
 *   TRANSCRIPTION_MODEL is unset. English only; formatted text; estimated word times.
 * - `OpenAiTranscriptionEngine`: any OpenAI-compatible `/audio/transcriptions` endpoint (the
 *   `openai` client); the language is passed as ISO 639-1, boosted words go into `prompt`.
 * - `PocketSphinxEngine`: CMU PocketSphinx from Debian (`pocketsphinx` + `pocketsphinx-en-us`,
 *   CLI `pocketsphinx_continuous`; the 5.x `pocketsphinx single` JSON CLI is handled too). The
 *   service no longer uses it: Moonshine's word error rate is a fraction of its own
 *   (docs/transcription-engine.md). It stays as the baseline of `npm run eval:transcription`.
 *   Words come with start, end and confidence (`-time yes`). Boosted words: a second,
 *   keyword-spotting pass (`-kws`) over the words the dictionary knows; a spotted keyword replaces
 *   the language-model words it overlaps only when they were doubtful and sound alike (see
 *   `mergeKeywords`).
 *
 * Errors: `UnsupportedLanguage` and `ProviderRefused` are final (retrying cannot help); everything
 * else (a missing tool, a timeout, a 429 or 5xx, a network error) is worth a retry.
 */
import { createReadStream } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import OpenAI, { APIError } from 'openai';
import { runTool, ToolFailed } from '../platform/child-process.js';
import { readWavInfo, sliceWav } from '../audio/wav.js';
import { connectionFailed, isUnavailableStatus, providerMessage, ServiceUnavailable } from './service-unavailable.js';
import { makeScratchDir } from '../platform/scratch.js';
import type { TranscriptionSettings } from '../platform/config.js';
import { MoonshineEngine } from './moonshine.js';
import {
  assertLanguageSupported,
  ProviderRefused,
  type LanguageRequest,
  type RecognizedWord,
  type SegmentRequest,
  type SegmentResult,
  type SpeechToTextEngine,
} from './speech-to-text-engine.js';

export {
  sttLanguages,
  UnsupportedLanguage,
  ProviderRefused,
  type SttLanguage,
  type LanguageRequest,
  type SegmentRequest,
  type RecognizedWord,
  type SegmentResult,
  type SpeechToTextEngine,
} from './speech-to-text-engine.js';

// ---- PocketSphinx --------------------------------------------------------------------------

const DEBIAN_MODEL_DIR = '/usr/share/pocketsphinx/model/en-us';

export interface PocketSphinxOptions {
  /** Acoustic model, language model and dictionary; defaults are the Debian pocketsphinx-en-us paths. */
  hmm?: string;
  lm?: string;
  dict?: string;
  /** Time bound of one run: base plus a multiple of the audio duration. */
  baseTimeoutMs?: number;
  timeoutPerAudioSecond?: number;
  /** Longest segment (default 600 s). */
  maxSegmentSeconds?: number;
}

/** Tokens of the recogniser that are not words. */
const nonWords = new Set(['<s>', '</s>', '<sil>', '[NOISE]', '[SPEECH]', '[COUGH]', '[BREATH]', '[SMACK]', '[UH]', '[UM]']);
const baseWord = (token: string) => token.replace(/\(\d+\)$/, '');

interface TimedToken {
  token: string;
  s: number;
  e: number;
  c: number;
}

/** `word start end confidence` lines of `-time yes` (keyword-spotting lines have two spaces after the word). */
export function parseTimedTokens(stdout: string): TimedToken[] {
  const tokens: TimedToken[] = [];
  for (const line of stdout.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length !== 4 || !/^\d+\.\d+$/.test(f[1]!) || !/^\d+\.\d+$/.test(f[2]!) || !/^-?\d+(?:\.\d+)?$/.test(f[3]!)) continue;
    tokens.push({ token: f[0]!, s: Number(f[1]), e: Number(f[2]), c: Number(f[3]) });
  }
  return tokens;
}

/** Words of the language-model pass; `</s>` marks the previous word as an utterance end. */
function wordsOf(tokens: TimedToken[]): Array<RecognizedWord & { token: string }> {
  const words: Array<RecognizedWord & { token: string }> = [];
  for (const t of tokens) {
    if (t.token === '</s>') {
      const last = words.at(-1);
      if (last) last.end = true;
      continue;
    }
    if (nonWords.has(t.token) || nonWords.has(baseWord(t.token))) continue;
    words.push({ token: t.token, w: baseWord(t.token), s: t.s, e: t.e, c: Math.max(0, Math.min(1, t.c)) });
  }
  return words;
}

function editDistance(a: readonly string[], b: readonly string[]): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length]!;
}

/**
 * Merges keyword detections into the language-model words. A detection replaces the run of words
 * it covers only when (a) each of them overlaps it by at least half its own duration, (b) the
 * run's lowest confidence is below 0.5 (the recogniser was unsure), and (c) the phones of the
 * keyword and of the run differ by at most 40 % of the longer (they sound alike). Without (c),
 * "jumped" became "gdansk" on synthetic speech; with all three, boosting words that were not said
 * changed nothing in 14 trials.
 */
export function mergeKeywords(
  words: ReadonlyArray<RecognizedWord & { token: string }>,
  detections: readonly TimedToken[],
  pronounce: (token: string) => string[] | null,
): RecognizedWord[] {
  const out = words.map((w) => ({ ...w }));
  for (const d of [...detections].sort((x, y) => y.c - x.c)) {
    // The words the detection covers: each overlaps it by at least half its own duration (a
    // neighbour it only grazes stays). They must be consecutive.
    const run: number[] = [];
    for (let i = 0; i < out.length; i++) {
      const w = out[i]!;
      const overlap = Math.min(w.e, d.e) - Math.max(w.s, d.s);
      if (overlap >= 0.5 * Math.max(0.01, w.e - w.s)) run.push(i);
    }
    if (run.length === 0 || run.at(-1)! - run[0]! !== run.length - 1) continue;
    const replaced = run.map((i) => out[i]!);
    if (replaced.some((w) => w.w === d.token)) continue;
    if (Math.min(...replaced.map((w) => w.c ?? 1)) >= 0.5) continue;
    const keyword = pronounce(d.token);
    const phones = replaced.map((w) => pronounce(w.token));
    if (!keyword || phones.some((p) => !p)) continue;
    const spoken = phones.flatMap((p) => p ?? []);
    if (editDistance(keyword, spoken) > 0.4 * Math.max(keyword.length, spoken.length)) continue;
    const first = run[0]!;
    const merged = { token: d.token, w: d.token, s: replaced[0]!.s, e: replaced.at(-1)!.e, c: Math.min(1, d.c), end: replaced.at(-1)!.end };
    out.splice(first, run.length, merged);
  }
  return out.map(({ token: _token, ...w }) => w);
}

type Dictionary = Map<string, string[]>;

export class PocketSphinxEngine implements SpeechToTextEngine {
  readonly id = 'pocketsphinx';
  readonly description = 'the local PocketSphinx engine (English only)';
  readonly maxSegmentSeconds: number;
  private cli: Promise<'continuous' | 'single'> | null = null;
  private dictionary: Promise<Dictionary> | null = null;

  constructor(private readonly options: PocketSphinxOptions = {}) {
    this.maxSegmentSeconds = options.maxSegmentSeconds ?? 600;
  }

  supports(language: LanguageRequest): boolean {
    return language === 'en' || language === 'default';
  }

  private detectCli(): Promise<'continuous' | 'single'> {
    this.cli ??= runTool('pocketsphinx_continuous', ['-h'], { timeoutMs: 10_000 }).then(
      () => 'continuous' as const,
      (err: unknown) => (err instanceof ToolFailed && err.kind === 'missing' ? 'single' : 'continuous'),
    );
    return this.cli;
  }

  private paths() {
    return {
      hmm: this.options.hmm ?? `${DEBIAN_MODEL_DIR}/en-us`,
      lm: this.options.lm ?? `${DEBIAN_MODEL_DIR}/en-us.lm.bin`,
      dict: this.options.dict ?? `${DEBIAN_MODEL_DIR}/cmudict-en-us.dict`,
    };
  }

  /** The pronunciation dictionary (`word PH ON ES`, variants as `word(2)`), read once per process. */
  private loadDictionary(): Promise<Dictionary> {
    this.dictionary ??= readFile(this.paths().dict, 'utf8').then(
      (text) => {
        const map: Dictionary = new Map();
        for (const line of text.split('\n')) {
          const [word, ...phones] = line.trim().split(/\s+/);
          if (word && phones.length) map.set(word, phones);
        }
        return map;
      },
      () => new Map(),
    );
    return this.dictionary;
  }

  private async modelArgs(): Promise<string[]> {
    const p = this.paths();
    const exists = (f: string) => readFile(f, { flag: 'r' }).then(() => true, () => false);
    const args: string[] = [];
    // Only pass what exists: a build with compiled-in defaults finds its own models.
    if (this.options.hmm || (await exists(path.join(p.hmm, 'mdef')))) args.push('-hmm', p.hmm);
    if (this.options.lm || (await exists(p.lm))) args.push('-lm', p.lm);
    if (this.options.dict || (await exists(p.dict))) args.push('-dict', p.dict);
    return args;
  }

  async transcribeSegment(req: SegmentRequest): Promise<SegmentResult> {
    assertLanguageSupported(this, req.language);
    const info = await readWavInfo(req.wavPath);
    const timeoutMs = Math.ceil((this.options.baseTimeoutMs ?? 60_000) + info.durationSeconds * 1000 * (this.options.timeoutPerAudioSecond ?? 3));
    if ((await this.detectCli()) === 'single') return this.single(req.wavPath, timeoutMs, req.signal);
    // pocketsphinx_continuous skips exactly 44 bytes of header: a WAV with more chunks (ffmpeg
    // writes a LIST chunk) would have them read as samples. Such a file is rewritten first.
    if (info.dataOffset !== 44) {
      const dir = await makeScratchDir('stt-wav-');
      try {
        const clean = path.join(dir, 'segment.wav');
        await sliceWav(req.wavPath, 0, info.durationSeconds, clean);
        return await this.transcribeSegment({ ...req, wavPath: clean });
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    }

    const modelArgs = await this.modelArgs();
    // `-remove_silence no`: with silence removal (the default) the times of an utterance that
    // follows a short silence come out a second or more late (cmusphinx/pocketsphinx#73), and
    // transcripts answer these times. Measured here: the same words, ~8 % more CPU.
    const run = (models: string[]) =>
      runTool('pocketsphinx_continuous', ['-infile', req.wavPath, '-logfn', '/dev/null', '-time', 'yes', '-remove_silence', 'no', ...models], { timeoutMs, signal: req.signal });
    const words = wordsOf(parseTimedTokens((await run(modelArgs)).stdout.toString('utf8')));

    const dictionary = await this.loadDictionary();
    const keywords = [...new Set((req.boostedWords ?? []).map((w) => w.trim().toLowerCase()))].filter((w) => dictionary.has(w));
    let merged: RecognizedWord[] = words.map(({ token: _t, ...w }) => w);
    if (keywords.length > 0 && words.length > 0) {
      const dir = await makeScratchDir('stt-kws-');
      try {
        const kws = path.join(dir, 'keywords.txt');
        await writeFile(kws, keywords.map((k) => `${k} /1e-20/\n`).join(''));
        // The spotting pass searches for the keywords only: with a language model given as well, it would run that instead.
        const withoutLm = modelArgs.filter((a, i) => a !== '-lm' && modelArgs[i - 1] !== '-lm');
        const detections = parseTimedTokens((await run([...withoutLm, '-kws', kws])).stdout.toString('utf8')).filter((t) => keywords.includes(t.token));
        merged = mergeKeywords(words, detections, (token) => dictionary.get(token) ?? null);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    }
    return { text: merged.map((w) => w.w).join(' '), words: merged };
  }

  /** 5.x: `pocketsphinx single FILE` prints one JSON object per utterance, words in `w`. */
  private async single(wavPath: string, timeoutMs: number, signal?: AbortSignal): Promise<SegmentResult> {
    const { stdout } = await runTool('pocketsphinx', ['-loglevel', 'FATAL', 'single', wavPath], { timeoutMs, signal });
    const words: RecognizedWord[] = [];
    for (const line of stdout.toString('utf8').split('\n')) {
      let o: { w?: Array<{ t?: string; b?: number; d?: number; p?: number }> };
      try {
        o = JSON.parse(line) as typeof o;
      } catch {
        continue;
      }
      for (const w of o.w ?? []) {
        if (!w.t || nonWords.has(w.t) || nonWords.has(baseWord(w.t))) continue;
        words.push({ w: baseWord(w.t), s: w.b ?? 0, e: (w.b ?? 0) + (w.d ?? 0), c: w.p ?? null });
      }
      const last = words.at(-1);
      if (last) last.end = true;
    }
    return { text: words.map((w) => w.w).join(' '), words };
  }
}

// ---- OpenAI-compatible ---------------------------------------------------------------------

export interface OpenAiTranscriptionOptions {
  baseURL: string;
  apiKey: string;
  /** e.g. "whisper-1" or "gpt-4o-mini-transcribe". */
  model: string;
  timeoutMs?: number;
}

/** OpenAI's documented way to keep hesitations in Whisper output: a prompt that contains them. */
const fillerPrompt = 'Umm, let me think like, hmm... Okay, here\'s what I\'m, like, thinking.';

export class OpenAiTranscriptionEngine implements SpeechToTextEngine {
  readonly id: string;
  readonly description: string;
  /** 10 minutes of 16 kHz mono 16-bit WAV are 19.2 MB, under the API's 25 MB upload limit. */
  readonly maxSegmentSeconds = 600;
  private readonly client: OpenAI;

  constructor(private readonly options: OpenAiTranscriptionOptions) {
    this.id = `openai:${options.model}`;
    this.description = `the transcription model ${options.model}`;
    // Retries belong to the caller (Temporal retries the activity), so the client makes one call.
    this.client = new OpenAI({ baseURL: options.baseURL, apiKey: options.apiKey || 'unset', timeout: options.timeoutMs ?? 10 * 60_000, maxRetries: 0 });
  }

  supports(): boolean {
    return true;
  }

  async transcribeSegment(req: SegmentRequest): Promise<SegmentResult> {
    const hints = [...(req.fillerWords ? [fillerPrompt] : []), ...(req.boostedWords?.length ? [req.boostedWords.join(', ')] : [])].join(' ');
    try {
      const res = await this.client.audio.transcriptions.create(
        {
          file: createReadStream(req.wavPath),
          model: this.options.model,
          response_format: 'json',
          ...(req.language !== 'auto' && req.language !== 'default' ? { language: req.language } : {}),
          ...(hints ? { prompt: hints.slice(0, 800) } : {}),
        },
        { signal: req.signal },
      );
      const text = typeof (res as { text?: unknown }).text === 'string' ? (res as { text: string }).text : '';
      return { text: text.replace(/\s+/g, ' ').trim(), words: null };
    } catch (err) {
      if (err instanceof APIError && typeof err.status === 'number') {
        const detail = providerMessage(err.status, err.message);
        if (isUnavailableStatus(err.status)) throw new ServiceUnavailable(`${this.description} answered HTTP ${err.status}: ${detail}`);
        if (err.status >= 400 && err.status < 500) throw new ProviderRefused(`${this.description} refused the audio (HTTP ${err.status}): ${detail}`);
      }
      if (connectionFailed(err)) throw new ServiceUnavailable(`${this.description} could not be reached: ${(err as Error).message}`);
      throw err;
    }
  }
}

/** The configured engine: the OpenAI-compatible model when TRANSCRIPTION_MODEL is set, else the local Moonshine engine. */
export function speechToTextFromSettings(
  settings: Pick<TranscriptionSettings, 'model' | 'baseUrl' | 'apiKey' | 'timeoutSeconds' | 'local'>,
): SpeechToTextEngine {
  if (settings.model && settings.baseUrl) {
    return new OpenAiTranscriptionEngine({ baseURL: settings.baseUrl, apiKey: settings.apiKey ?? '', model: settings.model, timeoutMs: settings.timeoutSeconds * 1000 });
  }
  return new MoonshineEngine(settings.local);
}
