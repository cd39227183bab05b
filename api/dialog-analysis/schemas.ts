import type { JsonSchema } from '../http/validation.js';

/**
 * JSON Schemas of the dialog-analysis interface (POST/GET /v2/dialog_analyses). They check the
 * request's shape; the size limit, Unicode and the caller's own schemas are checked by
 * lib/dialog-analysis/request.ts. No `default` keywords: the shared validator would add them to
 * `input` before its size is counted; the domain applies the defaults after counting.
 */
const callerSchema = (what: string): JsonSchema => ({
  type: 'object',
  minProperties: 1,
  description:
    `JSON Schema of \`output.${what}\`. Either a map of field names to the JSON Schema of each field (every \`type\` a string; the ${what} then has exactly these fields, all required), ` +
    'or a full JSON Schema whose root `type` is "object" (its own `required` and `additionalProperties` apply). Draft-07, or 2020-12 when `$schema` says so.',
});

export const dialogAnalysisBody: JsonSchema = {
  type: 'object',
  required: ['input'],
  additionalProperties: false,
  properties: {
    input: {
      type: 'object',
      required: ['messages', 'profile_schema', 'feedback_schema'],
      additionalProperties: false,
      description: 'At most 100,000 characters: Unicode code points of `input` written as compact JSON (`[...JSON.stringify(input)].length`).',
      properties: {
        messages: {
          type: 'array',
          minItems: 1,
          description: 'The dialog, in order. The profile describes the person in the `user` role.',
          items: {
            type: 'object',
            required: ['role', 'content'],
            additionalProperties: false,
            properties: { role: { type: 'string', enum: ['user', 'assistant', 'system'] }, content: { type: 'string' } },
          },
        },
        language: { type: 'string', minLength: 1, maxLength: 64, description: 'Language of the feedback, a code (`de`) or a name (`German`). Default `en`.' },
        current_profile: { type: ['object', 'null'], description: 'The profile the model starts from and updates. Default `{}`. Not checked against `profile_schema` (the output is).' },
        profile_schema: callerSchema('profile'),
        feedback_schema: callerSchema('feedback'),
        prompt_extra_text: { type: 'string', description: 'Extra instructions appended to the system prompt. Default empty.' },
      },
    },
  },
};

export const dialogAnalysisIdParams: JsonSchema = { type: 'object', required: ['id'], properties: { id: { type: 'string', minLength: 1, description: 'The UUID of the analysis' } } };

const message: JsonSchema = { type: 'object', required: ['message'], properties: { message: { type: 'string' } } };

export const dialogAnalysisView: JsonSchema = {
  type: 'object',
  required: ['id', 'state', 'created_at'],
  properties: {
    id: { type: 'string', description: '`/v2/dialog_analyses/<uuid>`' },
    state: { type: 'string', enum: ['in-progress', 'completed', 'failed'] },
    created_at: { type: 'string', format: 'date-time' },
    server_runtime: { type: 'number', description: 'Seconds from acceptance to completion; when completed' },
    output: {
      type: 'object',
      required: ['profile', 'feedback'],
      properties: { profile: { type: 'object' }, feedback: { type: 'object' } },
      description: 'When completed; conforms to `profile_schema` and `feedback_schema`',
    },
    error: { type: 'string', description: 'Why the analysis failed; when failed' },
  },
};

export const dialogAnalysisErrors = {
  401: { description: 'Missing or invalid key (a partner key or the administrator key)', schema: message },
  422: {
    description: 'Invalid request: `errors` maps each field (dotted path, e.g. `input.profile_schema.age.type`) to its messages; `input` when the input is over 100,000 characters',
    schema: {
      type: 'object',
      required: ['message', 'errors'],
      properties: { message: { type: 'string' }, errors: { type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } } } },
    },
  },
  429: { description: "The partner's rate of creations is exceeded; `Retry-After` says when to come back", schema: message },
};

export const notFoundResponse = { description: 'Unknown, expired, or not this partner\'s', schema: message };
