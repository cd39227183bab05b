/**
 * An OpenAI-compatible speech endpoint (`POST <base>/audio/speech`, the `openai` client), asked for
 * WAV so that this service can stream its samples into any output format. One call, no retries
 * (the client waits synchronously). Failures are told apart for the caller:
 * - `refused`: a 4xx other than 408/429 (the request is wrong for that provider; its message kept);
 * - `rate_limited`: 429 (with the provider's Retry-After when it sends one);
 * - `unavailable`: 5xx, connection failures, a body that is not a WAV;
 * - `timeout`: no answer within the bound.
 */
import OpenAI, { APIConnectionTimeoutError, APIError } from 'openai';
import { parseWavHeader } from '../audio/wav.js';

export class SpeechProviderError extends Error {
  override name = 'SpeechProviderError';
  constructor(
    readonly kind: 'refused' | 'rate_limited' | 'unavailable' | 'timeout',
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

export interface RemoteSpeechOptions {
  baseURL: string;
  apiKey: string | null;
  model: string;
  timeoutMs: number;
  /** Body field that carries the language (not part of OpenAI's API); null: never sent. */
  languageField: string | null;
}

export interface RemoteSpeechRequest {
  voice: string;
  input: string;
  speed?: number;
  language?: string | null;
  signal?: AbortSignal;
}

export interface RemotePcm {
  sampleRate: number;
  channels: number;
  /** Raw s16le samples as they arrive. */
  chunks: AsyncGenerator<Buffer>;
}

export class OpenAiSpeech {
  private readonly client: OpenAI;

  constructor(private readonly options: RemoteSpeechOptions) {
    this.client = new OpenAI({ baseURL: options.baseURL, apiKey: options.apiKey || 'unset', timeout: options.timeoutMs, maxRetries: 0 });
  }

  get model(): string {
    return this.options.model;
  }

  private failure(err: unknown): SpeechProviderError {
    if (err instanceof APIConnectionTimeoutError) return new SpeechProviderError('timeout', `the speech model ${this.options.model} did not answer within ${Math.round(this.options.timeoutMs / 1000)} s`);
    if (err instanceof APIError && typeof err.status === 'number') {
      const message = `the speech model ${this.options.model} answered ${err.status}: ${err.message}`;
      if (err.status === 429) {
        const retry = Number(err.headers?.get?.('retry-after'));
        return new SpeechProviderError('rate_limited', message, Number.isFinite(retry) && retry > 0 ? retry : undefined);
      }
      if (err.status >= 400 && err.status < 500 && err.status !== 408) return new SpeechProviderError('refused', message);
      return new SpeechProviderError('unavailable', message);
    }
    return new SpeechProviderError('unavailable', `the speech model ${this.options.model} could not be reached: ${(err as Error).message}`);
  }

  /** Starts the synthesis; resolves when the WAV header has arrived (errors before any audio reject here). */
  async synthesize(req: RemoteSpeechRequest): Promise<RemotePcm> {
    let response: Response;
    try {
      const body = {
        model: this.options.model,
        voice: req.voice,
        input: req.input,
        response_format: 'wav' as const,
        ...(req.speed !== undefined ? { speed: req.speed } : {}),
        ...(this.options.languageField && req.language ? { [this.options.languageField]: req.language } : {}),
      };
      response = await this.client.audio.speech.create(body, { signal: req.signal });
    } catch (err) {
      if (req.signal?.aborted) throw err;
      throw this.failure(err);
    }
    if (!response.body) throw new SpeechProviderError('unavailable', `the speech model ${this.options.model} answered without audio`);
    const reader = response.body.getReader();
    let head = Buffer.alloc(0);
    let layout = null;
    try {
      while (!layout) {
        const { done, value } = await reader.read();
        if (done) throw new SpeechProviderError('unavailable', `the speech model ${this.options.model} answered with no WAV audio`);
        head = Buffer.concat([head, Buffer.from(value)]);
        try {
          layout = parseWavHeader(head);
        } catch (err) {
          throw new SpeechProviderError('unavailable', `the speech model ${this.options.model} answered with audio that is not 16-bit PCM WAV (${(err as Error).message})`);
        }
        if (!layout && head.length > 65536) throw new SpeechProviderError('unavailable', `the speech model ${this.options.model} answered with no WAV header`);
      }
    } catch (err) {
      await reader.cancel().catch(() => undefined);
      if (err instanceof SpeechProviderError || req.signal?.aborted) throw err;
      throw this.failure(err);
    }
    const first = head.subarray(layout.dataOffset);
    const limit = layout.declaredDataBytes;
    const failure = (err: unknown) => this.failure(err);
    async function* chunks(): AsyncGenerator<Buffer> {
      let sent = 0;
      const take = (b: Buffer) => {
        const part = limit === null ? b : b.subarray(0, Math.max(0, limit - sent));
        sent += part.length;
        return part;
      };
      try {
        if (first.length) yield take(first);
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return;
          const part = take(Buffer.from(value));
          if (part.length) yield part;
        }
      } catch (err) {
        throw failure(err);
      } finally {
        await reader.cancel().catch(() => undefined);
      }
    }
    return { sampleRate: layout.sampleRate, channels: layout.channels, chunks: chunks() };
  }
}
