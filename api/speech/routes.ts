import { once } from 'node:events';
import type { NextFunction, Request, Response } from 'express';
import type { ApiDeps } from '../deps.js';
import { defineRoute, type RouteDefinition } from '../http/route.js';
import type { QuotaKeyPrincipal } from '../../lib/messaging/quota-keys.js';
import { nextSpeechRequestId, recordSpeechRequest, serveSpeech, type AudioAnswer, type SpeechBody, type SpeechRecord } from '../../lib/speech/requests.js';
import { SpeechService } from '../../lib/speech/synthesize.js';
import type { PartnerVoiceSource } from '../../lib/speech/voices.js';
import { speechBody, speechErrors, voiceListAnswer } from './schemas.js';

/**
 * The first middleware of every /v2/audio path: takes the request id (`X-Service-TTS-Request-Id`,
 * numeric, on every answer, refusals included) and records the request when its answer is done.
 */
export function speechRequestIds(deps: ApiDeps) {
  return async (req: Request, res: Response, next: NextFunction) => {
    try {
      const record: SpeechRecord = { id: await nextSpeechRequestId(deps.db), startedAt: performance.now() };
      res.locals.speechRecord = record;
      res.setHeader('X-Service-TTS-Request-Id', String(record.id));
      if (req.method === 'POST' && req.path === '/speech') {
        res.once('close', () => {
          const completed = res.writableFinished && res.statusCode === 200 && !record.error;
          if (!record.quotaKeyId && res.locals.quotaKey) record.quotaKeyId = (res.locals.quotaKey as QuotaKeyPrincipal).id;
          void recordSpeechRequest(deps.db, record, res.statusCode, completed, res.locals.log);
        });
      }
      next();
    } catch (err) {
      next(err);
    }
  };
}

/**
 * The speech interface (spec 4.3): POST /v2/audio/speech for the official openai client (baseURL
 * `<api>/v2`), and GET /v2/audio/voices (an extension: the voices a key may name). `partnerVoices`
 * is the voice interface's lookup of a partner's voices (null: built-in voices only).
 */
export function speechRoutes(deps: ApiDeps, partnerVoices: PartnerVoiceSource | null = null): RouteDefinition[] {
  const service = new SpeechService({ settings: deps.config.speech, partnerVoices });
  const auth = 'A quota key of type `speech` or `any` (`Authorization: Bearer <key>` preferred, `X-Api-Key` accepted), checked before the body is read.';
  return [
    defineRoute<unknown, unknown, SpeechBody>({
      method: 'post',
      path: '/v2/audio/speech',
      access: 'quota',
      summary: 'Text to speech (OpenAI-compatible)',
      description: `${auth} Answers the raw audio (mp3 \`audio/mpeg\`, opus \`audio/ogg\`, wav \`audio/wav\`, pcm \`application/octet-stream\`: signed 16-bit little-endian mono at 24,000 Hz), streamed as it is made (wav in one piece with its length). Every answer carries \`X-Service-TTS-Request-Id\`; \`X-Service-TTS-Language\` names the language the engine was given (\`default\`: none) and \`X-Service-TTS-Language-Confidence\` the detection's confidence. Quota: the o200k tokens of \`input\`.`,
      body: { type: 'json', schema: speechBody },
      responses: {
        200: { description: 'The audio (mp3: audio/mpeg, opus: audio/ogg, wav: audio/wav, pcm: application/octet-stream)', contentType: ['audio/mpeg', 'audio/ogg', 'audio/wav', 'application/octet-stream'], schema: { type: 'string', format: 'binary' } },
        ...speechErrors,
      },
      handler: async ({ body, res, log }) => {
        const controller = new AbortController();
        res.once('close', () => {
          if (!res.writableFinished) controller.abort(new Error('the client went away'));
        });
        await serveSpeech(
          { db: deps.db, service, key: res.locals.quotaKey as QuotaKeyPrincipal, record: res.locals.speechRecord as SpeechRecord, answer: audioAnswer(res, controller.signal), log, signal: controller.signal },
          body,
        );
        return undefined;
      },
    }),
    defineRoute({
      method: 'get',
      path: '/v2/audio/voices',
      access: 'quota',
      summary: 'The voices a quota key may name (extension)',
      description: `${auth} \`{voices: [{name, kind: built-in|remote|partner, engine, languages, gender?, description?, aliases?, spoken_by?}]}\`: the built-in voices (with their OpenAI aliases while no remote model is configured), the remote model's voices, and the voices of the key's partner that an engine can speak.`,
      responses: { 200: { description: 'The voices', schema: voiceListAnswer }, 401: speechErrors[401], 403: speechErrors[403] },
      handler: async ({ res }) => ({ body: { voices: await service.listVoices((res.locals.quotaKey as QuotaKeyPrincipal).partnerId) } }),
    }),
  ];
}

/** The speech domain's audio over an HTTP response: its head as headers, its chunks with back-pressure. */
function audioAnswer(res: Response, signal: AbortSignal): AudioAnswer {
  return {
    begin({ contentType, languageUsed, languageConfidence, byteLength }) {
      res.status(200);
      res.setHeader('Content-Type', contentType);
      res.setHeader('X-Service-TTS-Language', languageUsed ?? 'default');
      if (languageConfidence !== null) res.setHeader('X-Service-TTS-Language-Confidence', String(languageConfidence));
      if (byteLength !== null) res.setHeader('Content-Length', String(byteLength));
    },
    write(chunk) {
      if (!res.write(chunk)) return once(res, 'drain', { signal }).then(() => undefined);
    },
    end() {
      res.end();
    },
  };
}
