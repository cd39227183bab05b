import type { JsonSchema } from '../http/validation.js';
import { arrayOf, object, text, texts } from '../http/answer-schemas.js';
import { speechLanguages } from '../../lib/speech/languages.js';
import { audioFormats } from '../../lib/audio/encode.js';

/** The one public speech model name (spec 4.3: "exactly one model name is currently accepted"). */
export const publicSpeechModel = 'tts-1';

/** Request and answer schemas of the speech interface (spec 4.3). */
export const speechBody: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['model', 'voice', 'input'],
  properties: {
    model: { type: 'string', enum: [publicSpeechModel] },
    voice: {
      description: 'A built-in voice, an OpenAI voice name (an alias of a built-in voice, or a voice of the remote model when one is configured), or one of the key\'s partner\'s voices (by name or by its id); the openai client\'s `{id}` form is accepted',
      oneOf: [
        { type: 'string', minLength: 1, maxLength: 255 },
        { type: 'object', additionalProperties: false, required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 255 } } },
      ],
    },
    input: { type: 'string', minLength: 1, maxLength: 2000, description: '1-2,000 characters (Unicode code points)' },
    language: { type: 'string', enum: ['auto', ...speechLanguages], default: 'auto', description: 'auto (detected) or a short code: send en, not en-US' },
    response_format: { type: 'string', enum: Object.keys(audioFormats), default: 'mp3' },
    speed: { type: 'number', minimum: 0.5, maximum: 1.5, description: 'absent: the engine\'s own pace' },
    stream_format: { type: 'string', enum: ['audio'], description: 'accepted for the openai client; the answer is always the raw audio' },
  },
};

/** GET /v2/audio/voices (lib/speech/synthesize.ts listVoices). */
export const voiceListAnswer: JsonSchema = object({
  voices: arrayOf(
    object(
      {
        name: text,
        kind: { enum: ['built-in', 'remote', 'partner'] },
        engine: text,
        languages: texts,
        gender: text,
        description: text,
        aliases: { ...texts, description: 'OpenAI voice names that speak with this voice' },
        spoken_by: { ...text, description: 'A partner voice: the engine voice that speaks it' },
      },
      { optional: ['gender', 'description', 'aliases', 'spoken_by'] },
    ),
  ),
});

const errorBody: JsonSchema = { type: 'object', required: ['error'], properties: { error: { type: 'string' }, code: { type: 'string' } } };

export const speechErrors = {
  400: { description: 'Voice problem (unknown, not ready, not speakable) or the remote speech model refused the input: `{error}`', schema: errorBody },
  401: { description: 'Missing, unknown or revoked quota key: `{error}`', schema: errorBody },
  403: { description: 'The key\'s quota type is not speech or any: `{error}`', schema: errorBody },
  422: { description: 'Invalid request (model, input, speed, format, language): `{message, errors}`' },
  429: { description: 'Quota exhausted: `{error, code: "QUOTA_EXHAUSTED"}`, `x-should-retry: false`', schema: errorBody },
  500: { description: 'A speech engine is not installed: `{error}`', schema: errorBody },
  502: { description: 'A speech engine failed, or the remote speech model failed (5xx, unreachable): `{error}`', schema: errorBody },
  503: { description: 'Synthesis is busy on this server, or the remote model rate-limits: `{error}` with Retry-After', schema: errorBody },
  504: { description: 'Synthesis did not finish within SPEECH_TIMEOUT_SECONDS: `{error}`', schema: errorBody },
};
