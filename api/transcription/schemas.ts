import type { JsonSchema } from '../http/validation.js';
import { transcriptLanguageCodes } from '../../lib/transcripts/languages.js';

/** Request and answer schemas of the transcription interface (spec 4.2). */
export const transcriptBody: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    audio_url: { type: 'string', format: 'iri', maxLength: 8192, description: 'http(s) URL of the audio (non-ASCII characters as they are or percent-encoded; at most 8,192 characters, room for a presigned URL); required unless `audio` is uploaded' },
    audio: { description: 'The audio file (multipart only; at most 100 MB; mp3, wav, ogg, flac, m4a, mp4, webm); required unless `audio_url` is given' },
    language_code: { type: 'string', enum: [...transcriptLanguageCodes], default: 'en_us' },
    language_auto: { type: 'boolean', description: 'The engine identifies the language (language_code is then ignored); default false' },
    filler_words: { type: 'boolean', description: 'Keep hesitations (uh, um, ...); default false' },
    format_text: { type: 'boolean', default: true, description: 'Capitals and sentence punctuation' },
    punctuate: { type: 'boolean', description: 'AssemblyAI\'s: false drops every punctuation mark (the capitals of format_text stay); default true' },
    speech_threshold: { type: ['number', 'null'], minimum: 0, maximum: 1, description: 'AssemblyAI\'s: the transcript ends in `error` when less than this fraction of the audio (or of its part) is sound rather than silence' },
    boosted_words: boostedWords('Terms to recognise more readily (at most 100, each 1-100 characters); in multipart, repeat the field `boosted_words[]`'),
    audio_start_from: { type: ['integer', 'null'], minimum: 0, maximum: 86_400_000, description: 'Milliseconds: transcribe from this point of the audio (word times stay the recording\'s)' },
    audio_end_at: { type: ['integer', 'null'], minimum: 1, maximum: 86_400_000, description: 'Milliseconds: transcribe up to this point (after audio_start_from; past the end: to the end)' },
    custom_spelling: {
      type: ['array', 'null'],
      maxItems: 100,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['from', 'to'],
        properties: {
          from: { type: 'array', minItems: 1, maxItems: 20, items: { type: 'string', minLength: 1, maxLength: 100 } },
          to: { type: 'string', minLength: 1, maxLength: 100 },
        },
      },
      description: 'AssemblyAI\'s custom spelling: each word or phrase of `from` is written `to` in the text and words (in multipart: the array as JSON text)',
    },
    webhook_url: { type: ['string', 'null'], format: 'iri', maxLength: 8192, description: 'http(s) URL POSTed `{transcript_id, status}` (JSON) once the transcript is `completed` or `error` (null: none)' },
    webhook_auth_header_name: { type: ['string', 'null'], minLength: 1, maxLength: 256, pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$", description: 'A header sent with every webhook delivery (with `webhook_auth_header_value`)' },
    webhook_auth_header_value: { type: ['string', 'null'], minLength: 1, maxLength: 4096, pattern: '^[^\\u0000-\\u0008\\u000a-\\u001f\\u007f]*$', description: 'Its value: a secret of your receiver, never shown in answers' },
    // AssemblyAI's names for the same options, which its official clients send.
    language_detection: { type: 'boolean', description: 'AssemblyAI\'s name for `language_auto` (send one of the two)' },
    disfluencies: { type: 'boolean', description: 'AssemblyAI\'s name for `filler_words` (send one of the two)' },
    word_boost: boostedWords('AssemblyAI\'s name for `boosted_words` (send one of the two)'),
    keyterms_prompt: boostedWords('AssemblyAI\'s newer name for `boosted_words` (send one of the three)'),
  },
};

function boostedWords(description: string): JsonSchema {
  return { type: 'array', maxItems: 100, items: { type: 'string', minLength: 1, maxLength: 100 }, description };
}

export const transcriptIdParams: JsonSchema = { type: 'object', required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 100 } } };

export const errorBody: JsonSchema = { type: 'object', required: ['error'], properties: { error: { type: 'string' } } };
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
    audio_url: { type: 'string', description: 'The submitted audio_url, when the audio was given by URL (AssemblyAI\'s Python client requires it)' },
    status: { type: 'string', enum: ['queued', 'processing', 'completed', 'error'] },
    text: { type: 'string', description: 'present when completed' },
    audio_duration: { type: 'integer', description: 'seconds, present when completed: the whole recording\'s' },
    audio_start_from: { type: 'integer', description: 'When given: the part transcribed starts here (milliseconds)' },
    audio_end_at: { type: 'integer', description: 'When given: the part transcribed ends here (milliseconds)' },
    words: { type: ['array', 'null'], items: timedWord(), description: 'present when completed: the words of `text` with their times; null when the engine gives text only' },
    confidence: { type: ['number', 'null'], description: 'present when completed: the mean confidence of the words (null: none known)' },
    language_code: { type: ['string', 'null'], description: 'present when completed: the language_code it was transcribed in (null with language_auto)' },
    error: { type: 'string', description: 'present when status is error' },
    webhook_url: { type: 'string', description: 'When one was given: the webhook' },
    webhook_auth: { type: 'boolean', description: 'When a webhook was given: whether its deliveries carry an auth header' },
    webhook_auth_header_name: { type: ['string', 'null'], description: 'When a webhook was given: the auth header\'s name' },
    webhook_status_code: { type: ['integer', 'null'], description: 'When a webhook was given: the HTTP status its receiver answered the last delivery with (null until one answered)' },
  },
};

function timedWord(): JsonSchema {
  return { type: 'object', required: ['text', 'start', 'end', 'confidence', 'speaker'], properties: timedWordProperties() };
}

function timedWordProperties(): Record<string, JsonSchema> {
  return {
    text: { type: 'string', description: 'As in `text`: capitals and punctuation included' },
    start: { type: 'integer', description: 'milliseconds from the start of the audio' },
    end: { type: 'integer', description: 'milliseconds from the start of the audio' },
    confidence: { type: ['number', 'null'], description: '0-1; null when the engine gives none' },
    speaker: { type: 'null', description: 'no speaker labels are made' },
  };
}

/** The answer of /sentences or /paragraphs. */
export function timedSpans(unit: 'sentences' | 'paragraphs'): JsonSchema {
  const span: JsonSchema = {
    type: 'object',
    required: ['text', 'start', 'end', 'confidence', 'words', 'speaker'],
    properties: { ...timedWordProperties(), words: { type: 'array', items: timedWord() } },
  };
  return {
    type: 'object',
    required: ['id', 'confidence', 'audio_duration', unit],
    properties: { id: { type: 'string' }, confidence: { type: ['number', 'null'] }, audio_duration: { type: 'integer' }, [unit]: { type: 'array', items: span } },
  };
}

export const subtitlesQuery: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: { chars_per_caption: { type: 'integer', minimum: 1, maximum: 1000, description: 'Longest cue in characters' } },
};

export const wordSearchQuery: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['words'],
  properties: { words: { type: 'string', minLength: 1, maxLength: 2000, description: 'Comma-separated words or phrases of up to 5 words' } },
};

export const wordSearchResult: JsonSchema = {
  type: 'object',
  required: ['id', 'total_count', 'matches'],
  properties: {
    id: { type: 'string' },
    total_count: { type: 'integer' },
    matches: {
      type: 'array',
      items: {
        type: 'object',
        required: ['text', 'count', 'timestamps', 'indexes'],
        properties: {
          text: { type: 'string' },
          count: { type: 'integer' },
          timestamps: { type: 'array', items: { type: 'array', items: { type: 'integer' }, minItems: 2, maxItems: 2 } },
          indexes: { type: 'array', items: { type: 'integer' } },
        },
      },
    },
  },
};

export const transcriptListQuery: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 200, default: 10, description: 'Transcripts a page holds at most' },
    status: { type: 'string', enum: ['queued', 'processing', 'completed', 'error'] },
    created_on: { type: 'string', pattern: '^\\d{4}-\\d{2}-\\d{2}$', description: 'YYYY-MM-DD: created that day (UTC)' },
    before_id: { type: 'string', minLength: 1, maxLength: 100, description: 'Older than this transcript (its id, or its uuid)' },
    after_id: { type: 'string', minLength: 1, maxLength: 100, description: 'Newer than this transcript (its id, or its uuid)' },
    throttled_only: { type: 'boolean', description: 'AssemblyAI\'s deprecated filter: nothing is throttled here, so `true` lists nothing' },
  },
};

const nullableString: JsonSchema = { type: ['string', 'null'] };

export const transcriptList: JsonSchema = {
  type: 'object',
  required: ['page_details', 'transcripts'],
  properties: {
    page_details: {
      type: 'object',
      required: ['limit', 'result_count', 'current_url', 'prev_url', 'next_url'],
      properties: {
        limit: { type: 'integer' },
        result_count: { type: 'integer' },
        current_url: { type: 'string' },
        prev_url: { ...nullableString, description: 'The page of older transcripts; null: none' },
        next_url: { ...nullableString, description: 'The page of newer transcripts; null: none' },
      },
    },
    transcripts: {
      type: 'array',
      description: 'Newest first',
      items: {
        type: 'object',
        required: ['id', 'resource_url', 'status', 'created', 'completed', 'audio_url', 'error'],
        properties: {
          id: { type: 'string', description: '/v2/transcript/<id>' },
          resource_url: { type: 'string' },
          status: { type: 'string', enum: ['queued', 'processing', 'completed', 'error'] },
          created: { type: 'string', format: 'date-time' },
          completed: { ...nullableString, description: 'When it completed; null otherwise' },
          audio_url: { ...nullableString, description: 'The submitted audio_url; null for an upload' },
          error: { ...nullableString, description: 'Why it failed, when status is error' },
        },
      },
    },
  },
};

export const audioUploadObject: JsonSchema = {
  type: 'object',
  required: ['upload_url'],
  properties: { upload_url: { type: 'string', description: 'http(s)://<this API>/v2/upload/<id>: the audio_url to submit' } },
};

export const transcriptionErrors = {
  401: { description: 'Missing or invalid key (a partner key or the administrator key, in X-Api-Key)', schema: errorBody },
  404: { description: 'Unknown transcript, another partner\'s, or past its retention period', schema: errorBody },
  422: { description: 'Invalid request: `{message, errors: {<field>: [<message>]}}`', schema: invalidBody },
  429: { description: "The partner's transcription rate or concurrency limit; `Retry-After` says when to retry", schema: errorBody },
};
