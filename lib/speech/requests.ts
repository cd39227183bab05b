import type { Db } from '../platform/db.js';
import { AppError } from '../platform/errors.js';
import type { Logger } from '../platform/logger.js';
import { countTokens } from '../platform/tokens.js';
import { isBlank } from '../platform/text.js';
import type { AudioFormat } from '../audio/encode.js';
import type { QuotaKeyPrincipal } from '../messaging/quota-keys.js';
import { holdLifetimeMs, releaseQuota, reserveQuota, settleQuota, type QuotaHold } from '../messaging/quota.js';
import type { SpeechLanguage } from './languages.js';
import type { SpeechService } from './synthesize.js';

/**
 * POST /v2/audio/speech (spec 4.3), synchronous as the spec says: the quota key admits the request
 * (its unit: the o200k tokens of `input`, counted here, exact before synthesis), a synthesis slot
 * is taken, the audio is streamed as it is encoded (wav whole, with its length), and the hold is
 * settled at the token count once the audio is sent, or released if no audio was sent. Every
 * request, refused ones included, is one row of `speech_requests`, whose id is the
 * `X-Service-TTS-Request-Id` header of the answer.
 */
export interface SpeechBody {
  model: string;
  voice: string | { id: string };
  input: string;
  language?: SpeechLanguage | 'auto';
  response_format?: AudioFormat;
  speed?: number;
  stream_format?: 'audio';
}

/** What the request log row records, filled in as the request goes. */
export interface SpeechRecord {
  id: bigint;
  startedAt: number;
  quotaKeyId?: string;
  voice?: string;
  engine?: string;
  languageRequested?: string;
  languageUsed?: string | null;
  detectedLanguage?: string | null;
  detectionConfidence?: number | null;
  responseFormat?: string;
  speed?: number;
  characters?: number;
  tokens?: number;
  audioBytes?: number;
  ttfbMs?: number;
  error?: string;
}

/** The next request id (the `speech_requests` sequence), taken as the request arrives. */
export async function nextSpeechRequestId(db: Db): Promise<bigint> {
  const [row] = await db.$queryRaw<Array<{ id: bigint }>>`SELECT nextval(pg_get_serial_sequence('speech_requests', 'id')) AS id`;
  return row!.id;
}

const RETENTION_DAYS = 30;

/** Writes the request's row once the answer is finished; rows older than 30 days are pruned now and then. */
export async function recordSpeechRequest(db: Db, record: SpeechRecord, httpStatus: number, completed: boolean, log: Logger): Promise<void> {
  try {
    await db.speechRequest.create({
      data: {
        id: record.id,
        quotaKeyId: record.quotaKeyId ?? null,
        // refused: a 4xx before any synthesis; failed: the service or an engine failed, or the audio was cut off.
        status: completed ? 'completed' : httpStatus >= 400 && httpStatus < 500 ? 'refused' : 'failed',
        httpStatus,
        voice: record.voice ?? null,
        engine: record.engine ?? null,
        languageRequested: record.languageRequested ?? null,
        languageUsed: record.languageUsed ?? null,
        detectedLanguage: record.detectedLanguage ?? null,
        detectionConfidence: record.detectionConfidence ?? null,
        responseFormat: record.responseFormat ?? null,
        speed: record.speed ?? null,
        characters: record.characters ?? null,
        tokens: record.tokens ?? null,
        audioBytes: record.audioBytes ?? null,
        ttfbMs: record.ttfbMs ?? null,
        durationMs: Math.round(performance.now() - record.startedAt),
        error: record.error?.slice(0, 2000) ?? null,
      },
    });
    if (Number(record.id % 100n) === 0) {
      await db.speechRequest.deleteMany({ where: { createdAt: { lt: new Date(Date.now() - RETENTION_DAYS * 86400_000) } } });
    }
  } catch (err) {
    log.warn('speech request not recorded', { id: String(record.id), err });
  }
}

/** How the audio reaches the client; api/speech adapts an HTTP response to it. */
export interface AudioAnswer {
  /** Before the first byte: what the audio is; `byteLength` when it is known (a wav comes whole). */
  begin(head: { contentType: string; languageUsed: string | null; languageConfidence: number | null; byteLength: number | null }): void;
  /** A promise when the client must read first, resolved once it has. */
  write(chunk: Buffer): Promise<void> | void;
  end(): void;
}

export interface SpeechRequestContext {
  db: Db;
  service: SpeechService;
  key: QuotaKeyPrincipal;
  record: SpeechRecord;
  answer: AudioAnswer;
  log: Logger;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
}

const invalid = (field: string, message: string) => new AppError('bad_request', `The request is invalid: ${field} ${message}`, { fieldErrors: { [field]: [message] } });

/** Serves one speech request; errors before the first audio byte are thrown (the caller answers them). */
export async function serveSpeech(ctx: SpeechRequestContext, body: SpeechBody): Promise<void> {
  const { record } = ctx;
  const voiceName = typeof body.voice === 'string' ? body.voice : body.voice.id;
  if (isBlank(voiceName)) throw invalid('voice', 'must not be empty');
  if (isBlank(body.input)) throw invalid('input', 'must contain text, not only whitespace');
  const format = body.response_format ?? 'mp3';
  const tokens = countTokens(body.input);
  Object.assign(record, {
    quotaKeyId: ctx.key.id,
    voice: voiceName,
    responseFormat: format,
    speed: body.speed,
    languageRequested: body.language ?? 'auto',
    characters: [...body.input].length,
    tokens,
  });

  // The voice is checked before the quota is touched: an unknown voice costs nothing.
  await ctx.service.resolveVoice(voiceName, ctx.key.partnerId);
  const operationKey = `speech-${record.id}`;
  let hold: QuotaHold;
  try {
    hold = await reserveQuota(ctx.db, { quotaKeyId: ctx.key.id, operationKey, endpoint: 'speech', tokens, holdMs: holdLifetimeMs(60) });
  } catch (err) {
    if (err instanceof AppError && err.code === 'quota_exceeded') {
      throw new AppError('quota_exceeded', err.message, { ...err.details, code: 'QUOTA_EXHAUSTED', retry: false }, 429);
    }
    throw err;
  }

  let sent = 0;
  let release: (() => void) | null = null;
  try {
    release = await ctx.service.acquire();
    const out = await ctx.service.start({
      text: body.input,
      voice: voiceName,
      language: body.language ?? 'auto',
      speed: body.speed,
      format,
      partnerId: ctx.key.partnerId,
      signal: ctx.signal,
    });
    Object.assign(record, {
      voice: out.voice.partnerVoice ?? out.voice.name,
      engine: out.engine,
      languageUsed: out.language.used,
      detectedLanguage: out.language.detected?.language ?? null,
      detectionConfidence: out.language.detected?.confidence ?? null,
    });
    const { answer } = ctx;
    const head = { contentType: out.contentType, languageUsed: out.language.used, languageConfidence: out.language.detected?.confidence ?? null };
    for await (const chunk of out.audio) {
      if (sent === 0) {
        record.ttfbMs = Math.round(performance.now() - record.startedAt);
        // A wav arrives whole (its header needs the length): its size is known.
        answer.begin({ ...head, byteLength: format === 'wav' ? chunk.length : null });
      }
      sent += chunk.length;
      await answer.write(chunk);
    }
    if (sent === 0) answer.begin({ ...head, byteLength: 0 });
    answer.end();
    record.audioBytes = sent;
    await settleQuota(ctx.db, hold, tokens);
  } catch (err) {
    record.audioBytes = sent;
    record.error = (err as Error).message;
    // Audio already sent was delivered (in part): it is charged; otherwise the hold is released.
    if (sent > 0) await settleQuota(ctx.db, hold, tokens).catch(() => undefined);
    else await releaseQuota(ctx.db, operationKey).catch(() => undefined);
    throw err;
  } finally {
    release?.();
  }
}
