import type { JsonSchema } from '../http/validation.js';
import { transcriptLanguageCodes } from '../../lib/transcripts/languages.js';

/** Request and answer schemas of the transcription interface (spec 4.2). */
export const transcriptBody: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    audio_url: { type: 'string', format: 'uri', maxLength: 2048, description: 'http(s) URL of the audio; required unless `audio` is uploaded' },
    audio: { description: 'The audio file (multipart only; at most 100 MB; mp3, wav, ogg, flac, m4a, mp4, webm); required unless `audio_url` is given' },
    language_code: { type: 'string', enum: [...transcriptLanguageCodes], default: 'en_us' },
    language_auto: { type: 'boolean', default: false, description: 'The engine identifies the language (language_code is then ignored)' },
    filler_words: { type: 'boolean', default: false, description: 'Keep hesitations (uh, um, ...)' },
    format_text: { type: 'boolean', default: true, description: 'Capitals and sentence punctuation' },
    boosted_words: {
      type: 'array',
      maxItems: 100,
      items: { type: 'string', minLength: 1, maxLength: 100 },
      description: 'Terms to recognise more readily (at most 100, each 1-100 characters); in multipart, repeat the field `boosted_words[]`',
    },
  },
};

export const transcriptIdParams: JsonSchema = { type: 'object', properties: { id: { type: 'string', maxLength: 100 } } };

const errorBody: JsonSchema = { type: 'object', required: ['error'], properties: { error: { type: 'string' } } };
const invalidBody: JsonSchema = {
  type: 'object',
  required: ['message', 'errors'],
  properties: { message: { type: 'string' }, errors: { type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } } } },
};

export const transcriptObject: JsonSchema = {
  type: 'object',
  required: ['id', 'status'],
  properties: {
    id: { type: 'string', description: '/v2/transcript/<id>' },
    status: { type: 'string', enum: ['queued', 'processing', 'completed', 'error'] },
    text: { type: 'string', description: 'present when completed' },
    audio_duration: { type: 'integer', description: 'seconds, present when completed' },
    error: { type: 'string', description: 'present when status is error' },
  },
};

export const transcriptionErrors = {
  401: { description: 'Missing or invalid key (a partner key or the administrator key, in X-Api-Key)', schema: errorBody },
  404: { description: 'Unknown transcript, another partner\'s, or past its retention period', schema: errorBody },
  422: { description: 'Invalid request: `{message, errors: {<field>: [<message>]}}`', schema: invalidBody },
  429: { description: "The partner's transcription rate or concurrency limit; `Retry-After` says when to retry", schema: errorBody },
};
