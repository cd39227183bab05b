import type { JsonSchema } from '../http/validation.js';
import { DEFAULT_TTS_TYPE, ttsTypePattern } from '../../lib/voices/files.js';
import { describedPattern } from '../../lib/platform/schema-errors.js';

/** Request and answer schemas of the voice interface (spec 4.1, 2.1): validation and the OpenAPI document. */

/** The query parameter that may carry the key (spec 5: `X-Api-Key` or `api_key`). */
export const API_KEY_PARAMETER = 'api_key';

const apiKeyParameter: JsonSchema = { type: 'string', description: 'The partner key or the administrator key, instead of the `X-Api-Key` header' };

/** A route's query: `api_key` plus its own parameters. */
export const voiceQuery = (properties: Record<string, JsonSchema> = {}): JsonSchema => ({
  type: 'object',
  additionalProperties: false,
  properties: { ...properties, [API_KEY_PARAMETER]: apiKeyParameter },
});

const partner: JsonSchema = { type: 'string', minLength: 1, maxLength: 64, description: 'Partner name' };
const voice: JsonSchema = { type: 'string', minLength: 1, maxLength: 255, description: 'Voice name (URL-encoded)' };
const ttsType: JsonSchema = { type: 'string', pattern: ttsTypePattern, description: `TTS type (default \`${DEFAULT_TTS_TYPE}\`): lower-case letters, digits, \`.\`, \`_\`, \`-\`` };

export const partnerParams: JsonSchema = { type: 'object', required: ['partner'], properties: { partner } };
export const voiceParams: JsonSchema = { type: 'object', required: ['partner', 'voice'], properties: { partner, voice } };
export const sampleParams: JsonSchema = {
  type: 'object',
  required: ['partner', 'voice', 'index'],
  properties: { partner, voice, index: { type: 'integer', minimum: 0, maximum: 1_000_000_000, description: 'Sample index' } },
};
export const testSampleParams: JsonSchema = {
  type: 'object',
  required: ['partner', 'voice', 'filename'],
  properties: { partner, voice, filename: { type: 'string', pattern: describedPattern('^[\\w.-]{1,128}$', 'must be a file name of the test-samples list'), description: 'A file name from the test-samples list' } },
};
export const testFilesParams: JsonSchema = { type: 'object', required: ['partner', 'voice', 'tts_type'], properties: { partner, voice, tts_type: ttsType } };
export const jobFilesParams: JsonSchema = { type: 'object', required: ['token'], properties: { token: { type: 'string', minLength: 1, maxLength: 200 } } };

export const ttsTypeQuery = voiceQuery({ tts_type: ttsType });

const name: JsonSchema = { type: 'string', minLength: 1, maxLength: 255, description: 'Voice name, 1-255 characters, unique per partner' };
const maxSamples: JsonSchema = { type: 'integer', minimum: 1, maximum: 100, default: 25, description: 'At most this many samples (1-100, default 25)' };
const creatorName: JsonSchema = { type: 'string', maxLength: 255 };
const creatorEmail: JsonSchema = { type: 'string', maxLength: 320 };
const sampleDuration: JsonSchema = { type: 'integer', minimum: 5, maximum: 60, default: 15, description: 'Longest sample in seconds (5-60, default 15)' };

export const createVoiceForm: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: {
    name,
    creator_name: creatorName,
    creator_email: creatorEmail,
    embedding_type: { ...ttsType, description: `The voice's TTS type (extension; default \`${DEFAULT_TTS_TYPE}\`)` },
    max_samples: { ...maxSamples, description: 'Splitting of the uploaded file (extension; as for split)' },
    sample_duration: { ...sampleDuration, description: 'Splitting of the uploaded file (extension; as for split)' },
  },
};

export const emptyVoiceForm: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: { name, creator_name: creatorName, creator_email: creatorEmail, embedding_type: { ...ttsType, description: `The voice's TTS type (extension; default \`${DEFAULT_TTS_TYPE}\`)` } },
};

export const nameForm: JsonSchema = { type: 'object', additionalProperties: false, required: ['name'], properties: { name } };

export const sampleForm: JsonSchema = { type: 'object', additionalProperties: false, properties: {} };

export const splitForm: JsonSchema = { type: 'object', additionalProperties: false, properties: { max_samples: maxSamples, sample_duration: sampleDuration } };

export const embedForm: JsonSchema = { type: 'object', additionalProperties: false, properties: { tts_type: { ...ttsType, description: "TTS type of this embedding (default: the voice's embedding_type)" } } };

export const preferredSampleForm: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  // Left out (or no body at all, which is what Python's requests sends for `{'sample_index': None}`)
  // clears it, like an empty value.
  properties: { sample_index: { type: 'string', default: '', pattern: describedPattern('^\\s*(\\d{1,9})?\\s*$', 'must be a sample index (a whole number), or empty to clear it'), description: 'A sample index, or empty (or left out) to clear the preferred sample' } },
};

export const detailError: JsonSchema = { type: 'object', required: ['detail'], properties: { detail: { type: 'string' } } };

export const voiceErrors = {
  400: { description: 'Invalid input (a bad form field, a file that is not usable audio): `{detail}`', schema: detailError },
  401: { description: 'Missing or invalid key (`X-Api-Key` header or `api_key` query parameter): `{detail}`', schema: detailError },
  403: { description: "The key has no access to this partner's voices: `{detail}`", schema: detailError },
  404: { description: 'Unknown partner, voice or sample: `{detail}`', schema: detailError },
};
export const voiceDeletedAnswer: JsonSchema = { type: 'object', required: ['status', 'name'], properties: { status: { const: 'deleted' }, name: { type: 'string' } } };
export const lockedError = { description: 'The voice is being processed (splitting or embedding `in_progress`): `{detail}`', schema: detailError };
export const rateLimited = { description: 'The partner sent more than VOICE_RATE_LIMIT_PER_MINUTE uploads and job requests in a minute; `Retry-After` says when to retry', schema: detailError };
export const unavailable = { description: 'The job could not be queued (Temporal unreachable): `{detail}`', schema: detailError };

const status: JsonSchema = { type: 'string', enum: ['idle', 'in_progress', 'completed', 'failed'] };
const sample: JsonSchema = {
  type: 'object',
  required: ['index', 'source_timestamp', 'duration'],
  properties: {
    index: { type: 'integer' },
    source_timestamp: { type: 'string', description: 'mm:ss of the sample\'s start in the original (`00:00` for an uploaded sample)' },
    duration: { type: 'number', description: 'seconds' },
  },
};

export const voiceListElement: JsonSchema = {
  type: 'object',
  required: ['name', 'has_original', 'sample_count', 'splitting_status', 'embedding_status', 'creator_name', 'creator_email'],
  properties: {
    name: { type: 'string' },
    has_original: { type: 'boolean' },
    sample_count: { type: 'integer' },
    splitting_status: status,
    embedding_status: status,
    creator_name: { type: 'string' },
    creator_email: { type: 'string' },
  },
};

export const voiceDetail: JsonSchema = {
  type: 'object',
  required: ['name', 'original_filename', 'original_uploaded_name', 'original_duration', 'status', 'samples', 'embedding_info', 'embedding_type', 'embedding_zip_url', 'preferred_sample_index', 'creator_name', 'creator_email'],
  properties: {
    id: { type: 'string', description: 'Voice UUID (extension): the last part of its workflow ID' },
    name: { type: 'string' },
    workflow_id: { type: 'string', description: 'Extension: `voice-<partner>-<id>`, the Temporal workflow of its jobs' },
    has_original: { type: 'boolean' },
    original_filename: { type: ['string', 'null'], description: 'Stored name (`original.<ext>`); null for a voice created empty' },
    original_uploaded_name: { type: ['string', 'null'] },
    original_duration: { type: ['number', 'null'], description: 'seconds' },
    status: {
      type: 'object',
      required: ['splitting', 'embedding'],
      properties: { splitting: status, embedding: status, splitting_error: { type: ['string', 'null'] }, embedding_error: { type: ['string', 'null'] } },
    },
    split_settings: { type: 'object', properties: { max_samples: { type: 'integer' }, sample_duration: { type: 'integer' } } },
    sample_count: { type: 'integer' },
    samples: { type: 'array', items: sample },
    embedding_info: {
      type: 'object',
      required: ['tts_type', 'last_update_status', 'last_update_time', 'test_samples', 'sample_scores'],
      properties: {
        tts_type: { type: 'string' },
        last_update_status: { type: ['string', 'null'], enum: ['completed', 'failed', null] },
        last_update_time: { type: ['string', 'null'], format: 'date-time' },
        test_samples: {
          type: 'array',
          items: { type: 'object', properties: { sample_index: { type: ['integer', 'null'] }, sentence_index: { type: 'integer' }, filename: { type: 'string' } } },
        },
        sample_scores: { type: 'array', items: { type: 'object', properties: { sample_index: { type: 'integer' }, score: { type: 'number' } } } },
      },
    },
    embedding_type: { type: 'string' },
    embedding_zip_url: { type: ['string', 'null'], description: 'Download of the current embedding\'s artefact (a ZIP); null before the first embedding' },
    preferred_sample_index: { type: ['integer', 'null'] },
    speech: {
      type: 'object',
      description: 'Extension: whether /v2/audio/speech can speak the voice, and how',
      properties: { ready: { type: 'boolean' }, built_in_voice: { type: ['string', 'null'] }, remote_voice_id: { type: ['string', 'null'] } },
    },
    creator_name: { type: 'string' },
    creator_email: { type: 'string' },
    created_at: { type: 'string', format: 'date-time' },
    updated_at: { type: 'string', format: 'date-time' },
  },
};

export const testSampleList: JsonSchema = {
  type: 'array',
  items: {
    type: 'object',
    properties: {
      filename: { type: 'string' },
      sample_index: { type: ['integer', 'null'] },
      sentence_index: { type: 'integer' },
      sentence: { type: 'string' },
      tts_type: { type: 'string' },
      content_type: { type: 'string' },
      duration: { type: ['number', 'null'] },
      url: { type: 'string' },
    },
  },
};

export const binary = (contentType: string | string[], description: string) => ({ description, contentType, schema: { type: 'string', format: 'binary' } });
