import type { SpeechSettings } from '../platform/config.js';
import { AppError } from '../platform/errors.js';
import { audioFormats, encodePcmStream, type AudioFormat } from '../audio/encode.js';
import { OpenAiSpeech, SpeechProviderError } from '../providers/text-to-speech.js';
import { detectLanguage, type DetectedLanguage } from './detect.js';
import { engineFor, synthesizeLocal } from './engines.js';
import type { SpeechLanguage } from './languages.js';
import { builtInVoices, findBuiltInVoice, type BuiltInVoice, type PartnerVoice, type PartnerVoiceSource } from './voices.js';

/**
 * Text to speech: a voice name resolved to an engine, the language chosen (given, or detected),
 * the engine's samples encoded on the fly into the requested format at 24 kHz mono. Used by
 * POST /v2/audio/speech (streamed) and by the voice interface's test samples (`synthesize`).
 */
export const OUTPUT_SAMPLE_RATE = 24000;

export type ResolvedVoice =
  | { kind: 'built-in'; name: string; voice: BuiltInVoice; partnerVoice: string | null }
  | { kind: 'remote'; name: string; remoteVoiceId: string; partnerVoice: string | null };

export interface LanguageChoice {
  /** What the request said (`auto` when it said nothing). */
  requested: SpeechLanguage | 'auto';
  /** What the engine is given; null: its default. */
  used: SpeechLanguage | null;
  /** The detection, when the request said `auto`. */
  detected: DetectedLanguage | null;
}

export interface SpeechInput {
  text: string;
  voice: string;
  /** A supported short code, `auto` (detect), or null/undefined (the same as `auto`). */
  language?: SpeechLanguage | 'auto' | null;
  /** 0.5-1.5; undefined: the engine's default pace (1.0). */
  speed?: number;
  format: AudioFormat;
  /** The partner whose voices may be used (the quota key's partner scope). */
  partnerId?: string | null;
  signal?: AbortSignal;
}

export interface SpeechOutput {
  format: AudioFormat;
  contentType: string;
  sampleRate: number;
  /** `festival:<voice>`, `flite:<voice>`, `espeak-ng:<voice>` or `openai:<model>`. */
  engine: string;
  voice: ResolvedVoice;
  language: LanguageChoice;
  /** Encoded audio; its first chunk already exists when `start` resolves. */
  audio: AsyncGenerator<Buffer>;
}

const refused = (message: string) => new AppError('request_refused', message);

export interface SpeechServiceOptions {
  settings: Pick<SpeechSettings, 'model' | 'baseUrl' | 'apiKey' | 'remoteVoices' | 'languageField' | 'timeoutSeconds' | 'maxConcurrent'>;
  /** The voice interface's voices; null: built-in voices only. */
  partnerVoices?: PartnerVoiceSource | null;
}

export class SpeechService {
  private readonly remote: OpenAiSpeech | null;
  private readonly partnerVoices: PartnerVoiceSource | null;
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly options: SpeechServiceOptions) {
    const s = options.settings;
    this.remote = s.model && s.baseUrl ? new OpenAiSpeech({ baseURL: s.baseUrl, apiKey: s.apiKey, model: s.model, timeoutMs: s.timeoutSeconds * 1000, languageField: s.languageField }) : null;
    this.partnerVoices = options.partnerVoices ?? null;
  }

  /** Built-in names, the remote model's voices (when configured), or OpenAI's names as aliases (when not). */
  private builtInOrRemote(name: string, partnerVoice: string | null): ResolvedVoice | null {
    const remoteName = this.options.settings.remoteVoices.find((v) => v.toLowerCase() === name.trim().toLowerCase());
    const builtIn = findBuiltInVoice(name, !this.remote);
    if (builtIn) return { kind: 'built-in', name: builtIn.name, voice: builtIn, partnerVoice };
    if (this.remote && remoteName) return { kind: 'remote', name: remoteName, remoteVoiceId: remoteName, partnerVoice };
    return null;
  }

  private fromPartnerVoice(v: PartnerVoice): ResolvedVoice {
    if (!v.ready) throw refused(`voice '${v.name}' cannot be spoken yet: ${v.reason ?? 'its embedding is not complete'}`);
    if (this.remote && v.remoteVoiceId) return { kind: 'remote', name: v.name, remoteVoiceId: v.remoteVoiceId, partnerVoice: v.name };
    const builtIn = v.builtInVoice ? findBuiltInVoice(v.builtInVoice, false) : null;
    if (builtIn) return { kind: 'built-in', name: builtIn.name, voice: builtIn, partnerVoice: v.name };
    throw refused(`voice '${v.name}' cannot be spoken by any configured engine${v.remoteVoiceId ? ' (it needs the remote speech model, SPEECH_MODEL, which is not configured)' : ''}`);
  }

  /**
   * A voice name: the partner's own voice of that name first (a partner's voice shadows a built-in
   * of the same name), then the built-in voices (and aliases), then the remote model's voices.
   */
  async resolveVoice(name: string, partnerId: string | null = null): Promise<ResolvedVoice> {
    if (partnerId && this.partnerVoices) {
      const own = await this.partnerVoices.find(partnerId, name);
      if (own) return this.fromPartnerVoice(own);
    }
    const found = this.builtInOrRemote(name, null);
    if (found) return found;
    const known = [...builtInVoices().map((v) => v.name), ...(this.remote ? this.options.settings.remoteVoices : [])];
    throw refused(`voice '${name}' is not a voice of this service (built-in: ${known.join(', ')}${partnerId && this.partnerVoices ? "; nor one of the key's partner's voices" : ''})`);
  }

  /** Every voice a request may name: built-in ones, the remote model's, and the partner's speakable voices. */
  async listVoices(partnerId: string | null) {
    const out: Array<{ name: string; kind: 'built-in' | 'remote' | 'partner'; engine: string; languages: string[]; gender?: string; description?: string; aliases?: string[]; spoken_by?: string }> = [];
    for (const v of builtInVoices()) {
      out.push({ name: v.name, kind: 'built-in', engine: v.engine, languages: v.languages, gender: v.gender, description: v.description, aliases: this.remote ? [] : v.aliases });
    }
    if (this.remote) for (const v of this.options.settings.remoteVoices) out.push({ name: v, kind: 'remote', engine: `openai:${this.remote.model}`, languages: ['auto'] });
    if (partnerId && this.partnerVoices) {
      for (const pv of await this.partnerVoices.list(partnerId)) {
        try {
          const r = this.fromPartnerVoice(pv);
          out.push({ name: pv.name, kind: 'partner', engine: r.kind === 'remote' ? `openai:${this.remote!.model}` : r.voice.engine, languages: r.kind === 'remote' ? ['auto'] : r.voice.languages, spoken_by: r.kind === 'remote' ? r.remoteVoiceId : r.voice.name });
        } catch {
          // not speakable (yet): not listed
        }
      }
    }
    return out;
  }

  /** The language given to the engine: the requested one, or a confident detection, or none (the engine's default). */
  async chooseLanguage(text: string, requested: SpeechLanguage | 'auto' | null | undefined): Promise<LanguageChoice> {
    if (requested && requested !== 'auto') return { requested, used: requested, detected: null };
    const detected = await detectLanguage(text);
    return { requested: 'auto', used: detected.confident ? detected.language : null, detected };
  }

  /**
   * Waits for a synthesis slot (at most SPEECH_MAX_CONCURRENT per process). After `waitMs` without
   * one: 503 with Retry-After. Returns the release function.
   */
  async acquire(waitMs = 10_000): Promise<() => void> {
    if (this.running >= this.options.settings.maxConcurrent) {
      await new Promise<void>((resolve, reject) => {
        const wake = () => {
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          this.waiting.splice(this.waiting.indexOf(wake), 1);
          reject(new AppError('unavailable', `speech synthesis is busy (${this.options.settings.maxConcurrent} at once on this server); retry shortly`, { retryAfterSeconds: 2 }));
        }, waitMs);
        this.waiting.push(wake);
      });
    }
    this.running++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.running--;
      this.waiting.shift()?.();
    };
  }

  /** Starts a synthesis and waits for its first encoded bytes, so that failures before any audio surface as errors. */
  async start(input: SpeechInput): Promise<SpeechOutput> {
    const voice = await this.resolveVoice(input.voice, input.partnerId ?? null);
    const language = await this.chooseLanguage(input.text, input.language);
    const timeoutMs = this.options.settings.timeoutSeconds * 1000;
    const encode = { format: input.format, sampleRate: OUTPUT_SAMPLE_RATE, channels: 1, timeoutMs, signal: input.signal };
    let audio: AsyncGenerator<Buffer>;
    let engine: string;
    if (voice.kind === 'remote') {
      const remote = this.remote!;
      engine = `openai:${remote.model}`;
      try {
        const pcm = await remote.synthesize({ voice: voice.remoteVoiceId, input: input.text, speed: input.speed, language: language.used, signal: input.signal });
        audio = encodePcmStream(remoteChunks(pcm.chunks), { sampleRate: pcm.sampleRate, channels: pcm.channels }, encode);
      } catch (err) {
        throw providerFailure(err);
      }
    } else {
      const choice = await engineFor(voice.voice, language.used);
      engine = `${choice.engine}:${choice.voice}`;
      const pcm = synthesizeLocal(choice, input.text, language.used, input.speed ?? 1, { timeoutMs, signal: input.signal });
      audio = encodePcmStream(pcm, { sampleRate: choice.sampleRate }, encode);
    }
    const first = await audio.next();
    async function* all(): AsyncGenerator<Buffer> {
      if (first.done) return;
      yield first.value;
      yield* audio;
    }
    return { format: input.format, contentType: audioFormats[input.format].contentType, sampleRate: OUTPUT_SAMPLE_RATE, engine, voice, language, audio: all() };
  }
}

function providerFailure(err: unknown): unknown {
  if (!(err instanceof SpeechProviderError)) return err;
  switch (err.kind) {
    case 'refused':
      return new AppError('request_refused', err.message);
    case 'rate_limited':
      return new AppError('unavailable', err.message, { retryAfterSeconds: err.retryAfterSeconds ?? 5 });
    case 'timeout':
      return new AppError('upstream_error', err.message, undefined, 504);
    case 'unavailable':
      return new AppError('upstream_error', err.message);
  }
}

async function* remoteChunks(chunks: AsyncGenerator<Buffer>): AsyncGenerator<Buffer> {
  try {
    yield* chunks;
  } catch (err) {
    throw providerFailure(err);
  }
}

let localService: SpeechService | null = null;

/**
 * One synthesis with the local engines, collected into one buffer (the voice interface's test
 * samples). `voice` is a built-in voice name; `language` null or undefined detects it.
 */
export async function synthesize(req: { text: string; voice: string; language?: SpeechLanguage | 'auto' | null; speed?: number; format: AudioFormat; signal?: AbortSignal }): Promise<{
  audio: Buffer;
  contentType: string;
  sampleRate: number;
  engine: string;
  voice: string;
  language: SpeechLanguage | null;
}> {
  localService ??= new SpeechService({ settings: { model: null, baseUrl: null, apiKey: null, remoteVoices: [], languageField: null, timeoutSeconds: 120, maxConcurrent: 1_000_000 } });
  const out = await localService.start({ ...req, partnerId: null });
  const parts: Buffer[] = [];
  for await (const chunk of out.audio) parts.push(chunk);
  return { audio: Buffer.concat(parts), contentType: out.contentType, sampleRate: out.sampleRate, engine: out.engine, voice: out.voice.name, language: out.language.used };
}
