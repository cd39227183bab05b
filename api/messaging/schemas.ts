import type { JsonSchema } from '../http/validation.js';
import { arrayOf, boolean, dateTime, integer, mapOf, nullable, number, object, text, uuid } from '../http/answer-schemas.js';
import { errorSchemas } from '../http/openapi.js';
import { quotaTypes } from '../../lib/messaging/quota-keys.js';
import { serviceMetadataSchema } from '../../lib/messaging/service-metadata.js';
import { partnerNamePattern } from '../../lib/partners/partners.js';

/**
 * Request schemas of the messaging interface. The OpenAI-shaped bodies are validated for the
 * fields the service reads and otherwise forwarded as sent (additional properties allowed), so a
 * provider feature this service does not know about still reaches the model. As in OpenAI's API,
 * an optional field sent as null means the field is not given (clients that serialise unset
 * options as null work unchanged).
 */
const tokenLimit: JsonSchema = { type: ['integer', 'null'], minimum: 1, maximum: 10_000_000 };

const reasoningSchema: JsonSchema = {
  type: ['object', 'null'],
  description: 'Passed to the model request only: `{effort: none|minimal|low|medium|high}` or `{max_tokens: n}` (thinking budget, separate from the answer limit)',
  properties: {
    // null: the model's default, as in OpenAI's Reasoning object (forwarded as sent).
    effort: { type: ['string', 'null'], enum: ['none', 'minimal', 'low', 'medium', 'high', 'xhigh', null] },
    max_tokens: { type: 'integer', minimum: 0, maximum: 10_000_000 },
  },
};

const metadataSchema: JsonSchema = {
  type: ['object', 'null'],
  description: '`service` is the character (validated, applied by this service, never forwarded); other keys are forwarded',
  properties: {
    // Validated by the service itself (lib/messaging/service-metadata.ts), so that its errors name
    // the full path (metadata.service.character...); the schema is shown here for the reference.
    service: {
      type: 'object',
      description: `The character; schema: ${JSON.stringify(serviceMetadataSchema)}`,
    },
  },
};

const common = {
  model: { type: 'string', minLength: 1, maxLength: 200 },
  stream: { type: ['boolean', 'null'] },
  reasoning: reasoningSchema,
  fallback_model: { type: ['string', 'null'], minLength: 1, maxLength: 200, description: 'Tried once when the requested model fails' },
  metadata: metadataSchema,
};

export const chatCompletionBody: JsonSchema = {
  type: 'object',
  required: ['model', 'messages'],
  properties: {
    ...common,
    messages: {
      type: 'array',
      minItems: 1,
      // The roles the OpenAI API takes: another one would be refused by the provider after the
      // quota hold and the knowledge search, so it is refused here first.
      items: { type: 'object', required: ['role'], properties: { role: { enum: ['system', 'developer', 'user', 'assistant', 'tool', 'function'] } } },
    },
    max_completion_tokens: tokenLimit,
    max_tokens: tokenLimit,
    // OpenAI's own bound; each choice may use the whole output limit, and the hold covers them all.
    n: { type: ['integer', 'null'], minimum: 1, maximum: 128, description: 'Choices to generate (1-128); the quota hold covers the output limit for each' },
  },
};

export const responsesBody: JsonSchema = {
  type: 'object',
  required: ['model', 'input'],
  properties: {
    ...common,
    input: { oneOf: [{ type: 'string', minLength: 1 }, { type: 'array', minItems: 1 }] },
    instructions: { type: ['string', 'null'] },
    max_output_tokens: tokenLimit,
    background: { type: ['boolean', 'null'], description: 'Not offered (400 when true): a background answer is read with GET /responses/{id}, which this service does not relay' },
    previous_response_id: { type: ['string', 'null'], description: "The provider's id of an earlier answer, or the service's `resp_service_…` id of a streamed answer with knowledge (same key, 30 days)" },
  },
};

export const legacyCompletionBody: JsonSchema = {
  type: 'object',
  required: ['input'],
  additionalProperties: false,
  properties: {
    input: {
      type: 'object',
      required: ['messages'],
      additionalProperties: false,
      properties: {
        messages: {
          type: 'array',
          minItems: 1,
          items: {
            type: 'object',
            required: ['role', 'content'],
            additionalProperties: false,
            properties: { role: { type: 'string', enum: ['user', 'assistant', 'system'] }, content: { type: 'string', maxLength: 200_000 } },
          },
        },
        audio_files: { type: 'array', items: { type: 'string' }, description: 'Not supported: a non-empty list answers 501' },
        character: {
          oneOf: [
            { type: 'string', minLength: 1, maxLength: 100 },
            {
              type: 'object',
              required: ['name'],
              additionalProperties: false,
              properties: { name: { type: 'string', minLength: 1, maxLength: 100 }, prompt: { type: 'string', maxLength: 50_000 } },
            },
          ],
        },
        character_params: { type: 'object', additionalProperties: { type: ['string', 'number', 'boolean'] }, description: 'Values for `{{name}}` placeholders of the character prompt' },
      },
    },
  },
};

export const modelParams: JsonSchema = { type: 'object', required: ['model'], properties: { model: { type: 'string', minLength: 1, maxLength: 200 } } };

export const legacyIdParams: JsonSchema = { type: 'object', required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 100 } } };

export const createQuotaKeyBody: JsonSchema = {
  type: 'object',
  required: ['name', 'quota_type', 'token_amount'],
  additionalProperties: false,
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 200, description: 'A label for operators' },
    quota_type: { type: 'string', enum: [...quotaTypes], description: 'chat: /v3/chat/completions; responses: /v3/responses; legacy: /v2/completions; speech: /v2/audio/speech; any: all four' },
    token_amount: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'Lifetime allowance of model tokens (input + output)' },
    partner: { type: ['string', 'null'], pattern: partnerNamePattern, description: "Whose knowledge bases characters may use; omitted: none" },
  },
};

export const quotaKeyIdParams: JsonSchema = { type: 'object', required: ['id'], properties: { id: { type: 'string', format: 'uuid' } } };

export const messagingErrors = {
  400: { description: 'Invalid body, metadata.service or character', schema: errorSchemas.messaging },
  401: { description: 'Missing or invalid quota key (`invalid_api_key`)', schema: errorSchemas.messaging },
  403: { description: "Quota type not allowed for this endpoint, or knowledge base outside the key's partner scope", schema: errorSchemas.messaging },
  429: { description: 'Quota exhausted (`quota_exceeded`); `x-should-retry: false` when no retry can pass (the tokens no request in flight holds cannot cover it)', schema: errorSchemas.messaging },
  502: { description: 'Model provider failure (also after fallback_model)', schema: errorSchemas.messaging },
};

// ---------------------------------------------------------------- answers
// OpenAI-shaped answers are OpenAI's own objects (the `openai` package's ChatCompletion, Response,
// Model types; test/support/openai-conformance.ts checks them against those types): declared here
// with the members every client reads, and open to the rest.

const quotaKeyMembers = {
  id: uuid,
  name: text,
  key_prefix: { ...text, description: 'The first characters of the key, to recognise it' },
  quota_type: { enum: [...quotaTypes] },
  unit: { const: 'tokens' },
  period: { const: 'lifetime' },
  token_amount: integer,
  tokens_consumed: integer,
  tokens_reserved: { ...integer, description: 'Held by requests in flight' },
  tokens_remaining: integer,
  partner: nullable(text),
  status: { enum: ['active', 'revoked'] },
  revoked_at: nullable(dateTime),
  last_used_at: nullable(dateTime),
  created_at: dateTime,
};

export const quotaKeyObject: JsonSchema = object(quotaKeyMembers, { description: 'A messaging quota key with its usage' });
export const createdQuotaKeyAnswer: JsonSchema = object({ ...quotaKeyMembers, api_key: { ...text, description: 'The key itself, shown only in this answer' } });

const sse = (what: string): JsonSchema => ({ type: 'string', description: `Server-sent events (\`stream: true\`): \`data: <${what} JSON>\` per event, then \`data: [DONE]\`` });
const usage: JsonSchema = object({}, { open: true, description: "OpenAI's usage object (token counts)" });

const chatCompletionObject: JsonSchema = object(
  {
    id: text,
    object: { const: 'chat.completion' },
    created: integer,
    model: text,
    choices: arrayOf(
      object(
        {
          index: integer,
          message: object({ role: { const: 'assistant' }, content: nullable(text) }, { open: true }),
          finish_reason: nullable(text),
        },
        { open: true },
      ),
    ),
    usage,
  },
  { open: true, optional: ['usage'], description: "OpenAI's ChatCompletion object" },
);

const responseObject: JsonSchema = object(
  {
    id: text,
    object: { const: 'response' },
    created_at: number,
    status: text,
    model: text,
    output: arrayOf(object({ type: text }, { open: true }), 'Output items; a knowledge-enabled character\'s start with the visibility items (`rs_service_`, `fs_service_`)'),
    usage: nullable(usage),
  },
  { open: true, optional: ['usage'], description: "OpenAI's Response object" },
);

const modelObject: JsonSchema = object({ id: text, object: { const: 'model' }, created: integer, owned_by: text }, { open: true, description: "The provider's model object, as it sent it" });

/** The answers of the messaging routes (api/messaging/routes.ts). */
export const messagingAnswers = {
  health: object({ status: { const: 'ok' }, uptime_seconds: integer, version: text }),
  deepHealth: object({
    status: { enum: ['ok', 'degraded'] },
    checks: mapOf(
      object({ ok: boolean, latency_ms: { ...number, description: 'Administrator key only' }, error: { ...text, description: 'Administrator key only' } }, { optional: ['latency_ms', 'error'] }),
      'postgres, temporal, weaviate, storage',
    ),
  }),
  chatCompletion: { 'application/json': chatCompletionObject, 'text/event-stream': sse('chat.completion.chunk') },
  response: { 'application/json': responseObject, 'text/event-stream': sse('response event') },
  modelList: object({ object: { const: 'list' }, data: arrayOf(modelObject) }, { open: true }),
  model: modelObject,
  legacyRequested: object({ id: { ...text, description: '/v2/completions/<id>: the path to poll' }, state: { const: 'in-progress' } }),
  legacyCompletion: object(
    {
      id: text,
      state: { enum: ['in-progress', 'completed', 'failed'] },
      output: { description: 'The completion when `completed`, else null' },
      error: { ...nullable(text), description: 'When `failed`' },
      created_at: dateTime,
      expires_at: nullable(dateTime),
    },
    { optional: ['error'] },
  ),
} satisfies Record<string, JsonSchema | Record<string, JsonSchema>>;
