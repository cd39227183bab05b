import type { JsonSchema } from '../http/validation.js';

/** JSON Schemas of the knowledge-base interface: request validation and the OpenAPI document. */
export const nameString = (what: string): JsonSchema => ({ type: 'string', minLength: 1, maxLength: 200, description: what });

export const partnerName: JsonSchema = {
  type: 'string',
  pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$',
  description: 'Partner name: letters, digits, dot, underscore, hyphen; at most 64 characters',
};

export const pathParams = (...names: Array<'partner' | 'kb' | 'folder' | 'doc_id'>): JsonSchema => ({
  type: 'object',
  required: names,
  properties: Object.fromEntries(
    names.map((n) => [n, n === 'partner' ? { type: 'string', minLength: 1 } : nameString(n === 'kb' ? 'Knowledge base name' : n === 'folder' ? 'Folder name' : 'Document ID (UUID)')]),
  ),
});

// Upper bounds keep values exact in JavaScript and inside their database columns (BIGINT, INTEGER).
const nonNegativeInteger: JsonSchema = { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER };
const positiveInteger: JsonSchema = { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER };
const int32Max = 2_147_483_647;
const formBoolean: JsonSchema = { type: 'boolean', default: false };
const dollarAmount: JsonSchema = {
  type: 'string',
  pattern: '^\\d{1,20}(\\.\\d{1,8})?$',
  description: 'Decimal amount in USD, at most 8 decimal places; stored exactly',
};

export const partnerSettingsForm: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    max_documents: { ...positiveInteger, maximum: int32Max, description: 'Default 100000000' },
    allow_audio_video: { type: 'boolean', description: 'Default true' },
    vendor_sync_enabled: { type: 'boolean', description: 'Default false' },
  },
};

export const partnerUpdateForm: JsonSchema = {
  ...partnerSettingsForm,
  properties: { ...(partnerSettingsForm.properties as object), new_name: partnerName },
};

export const partnerObject: JsonSchema = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    max_documents: { type: 'integer' },
    allow_audio_video: { type: 'boolean' },
    vendor_sync_enabled: { type: 'boolean' },
    created_at: { type: 'string', format: 'date-time' },
    updated_at: { type: 'string', format: 'date-time' },
  },
};

export const partnerWithKey: JsonSchema = {
  type: 'object',
  properties: { ...(partnerObject.properties as object), api_key: { type: 'string', description: 'Shown once; only a hash is stored' } },
};

export const createKnowledgeBaseForm: JsonSchema = {
  type: 'object',
  required: ['name'],
  additionalProperties: false,
  properties: {
    name: nameString('Knowledge base name, unique within the partner'),
    character_limit: nonNegativeInteger,
    token_limit: nonNegativeInteger,
    dollar_limit_usd: dollarAmount,
    expert_name: { type: 'string', maxLength: 500 },
    user_email: { type: 'string', maxLength: 320 },
  },
};

export const createFolderForm: JsonSchema = {
  type: 'object',
  required: ['name'],
  additionalProperties: false,
  properties: {
    name: nameString('Folder name, unique within the knowledge base'),
    type: { type: 'string', enum: ['regular', 'video_channel'], default: 'regular' },
    channel_url: { type: 'string' },
    model_tier: { type: 'string', enum: ['standard', 'economy'], default: 'standard' },
  },
};

export const createDocumentForm: JsonSchema = {
  type: 'object',
  required: ['type', 'folder'],
  additionalProperties: false,
  properties: {
    type: { type: 'string', enum: ['file', 'url'] },
    folder: nameString('Target folder name'),
    url: { type: 'string', maxLength: 8192 },
    name: { type: 'string', maxLength: 500 },
    expert_name: { type: 'string', maxLength: 500 },
    user_email: { type: 'string', maxLength: 320 },
    auto_rewrite: formBoolean,
    model_tier: { type: 'string', enum: ['standard', 'economy'], default: 'standard' },
    use_original_as_rewritten: formBoolean,
    character_limit: { ...positiveInteger, description: 'Request-level cap on digitized characters' },
  },
};

export const ragSearchBody: JsonSchema = {
  type: 'object',
  required: ['partner', 'kb', 'user_message'],
  additionalProperties: false,
  properties: {
    partner: { type: 'string', minLength: 1 },
    kb: { type: 'string', minLength: 1 },
    user_message: { type: 'string', minLength: 1, maxLength: 20000 },
    robot_message: { type: 'string', maxLength: 20000 },
    character_replacement_name: { type: 'string', maxLength: 200 },
    top_k: { type: 'integer', minimum: 1, maximum: 200 },
    search_multiplier: { type: 'integer', minimum: 1, maximum: 50 },
    rrf_k: { type: 'integer', minimum: 1, maximum: 1000 },
    rrf_weight_dense: { type: 'number', minimum: 0 },
    rrf_weight_sparse: { type: 'number', minimum: 0 },
    rrf_weight_bm25: { type: 'number', minimum: 0 },
    query_weight_original: { type: 'number', minimum: 0 },
    query_weight_replaced: { type: 'number', minimum: 0 },
    collection_override: { type: 'string' },
    rag_index_override: { type: 'string' },
  },
};

export const detailError: JsonSchema = { type: 'object', required: ['detail'], properties: { detail: { type: 'string' } } };

export const documentObject: JsonSchema = {
  type: 'object',
  description: 'Document (knowledge-base spec 2.5)',
  properties: {
    id: { type: 'string', format: 'uuid' },
    name: { type: 'string' },
    folder: { type: 'string' },
    type: { type: 'string', enum: ['file', 'url'] },
    in_queues: { type: 'array', items: { type: 'string' } },
    processing_error: { type: ['string', 'null'] },
    embedding_status: { type: ['string', 'null'], enum: ['pending', 'in_progress', 'success', 'failed', null] },
    embedded_at: { type: ['string', 'null'], format: 'date-time' },
    embedding_chunk_count: { type: ['integer', 'null'] },
  },
};

const limitValue: JsonSchema = { anyOf: [{ type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER }, { type: 'null' }] };

export const limitsPatchBody: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  description: 'Omitted: unchanged. null: no limit. 0: blocks further consumption.',
  properties: {
    character_limit: limitValue,
    token_limit: limitValue,
    dollar_limit_usd: {
      anyOf: [
        { type: 'string', pattern: '^\\d{1,20}(\\.\\d{1,8})?$' },
        { type: 'number', minimum: 0 },
        { type: 'null' },
      ],
      description: 'Decimal USD, at most 8 decimal places',
    },
  },
};

export const budgetStatusObject: JsonSchema = {
  type: 'object',
  description: 'KB budget status (spec 2.3)',
  properties: {
    limits: { type: 'object' },
    characters: { type: 'object' },
    tokens: { type: 'object' },
    dollars: { type: 'object' },
    uncertain_operations: { type: 'integer' },
    blocking_reasons: { type: 'array', items: { type: 'object', properties: { type: { enum: ['limit_exhausted', 'unknown_historical_usage', 'unresolved_provider_outcome'] }, dimension: { type: 'string' }, detail: { type: 'string' } } } },
    blocked: { type: 'boolean' },
  },
};

export const resolveOperationBody: JsonSchema = {
  type: 'object',
  required: ['operation_key', 'used'],
  additionalProperties: false,
  properties: {
    operation_key: { type: 'string', minLength: 1 },
    used: { type: 'boolean', description: 'false: the operation consumed nothing (its hold is released)' },
    characters: { type: 'integer', minimum: 0 },
    input_tokens: { type: 'integer', minimum: 0 },
    output_tokens: { type: 'integer', minimum: 0 },
    cost_usd: { type: 'string', pattern: '^\\d{1,20}(\\.\\d{1,8})?$' },
    model: { type: 'string' },
  },
};

export const emptyDocumentForm: JsonSchema = {
  type: 'object',
  required: ['name', 'folder', 'type'],
  additionalProperties: false,
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 500 },
    folder: nameString('Target folder name'),
    type: { type: 'string', enum: ['file', 'url'] },
    url: { type: 'string', maxLength: 8192 },
  },
};

export const renameForm: JsonSchema = { type: 'object', required: ['name'], additionalProperties: false, properties: { name: { type: 'string', minLength: 1, maxLength: 500 } } };
export const typeForm: JsonSchema = { type: 'object', required: ['type'], additionalProperties: false, properties: { type: { type: 'string', enum: ['file', 'url'] } } };
export const urlForm: JsonSchema = { type: 'object', required: ['url'], additionalProperties: false, properties: { url: { type: 'string', minLength: 1, maxLength: 8192 } } };
export const forceQuery: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: { force: { type: 'boolean', default: true, description: 'false: answer 409 instead of cancelling active processing' } },
};

export const deletionResult: JsonSchema = {
  type: 'object',
  properties: {
    status: { enum: ['deleted', 'delete_pending'] },
    deletion_workflow_id: { type: 'string' },
    pending_cleanup: { type: 'object', properties: { documents: { type: 'integer' }, active_processing_workflows: { type: 'integer' }, vectors: { type: 'boolean' }, files: { type: 'boolean' } } },
  },
};

export const batchUploadForm: JsonSchema = {
  type: 'object',
  required: ['folder'],
  additionalProperties: false,
  properties: {
    folder: nameString('Target folder name'),
    names: { anyOf: [{ type: 'string', maxLength: 500 }, { type: 'array', items: { type: 'string', maxLength: 500 } }], description: 'Document names in the order of the files' },
    expert_name: { type: 'string', maxLength: 500 },
    user_email: { type: 'string', maxLength: 320 },
    auto_rewrite: formBoolean,
    model_tier: { type: 'string', enum: ['standard', 'economy'], default: 'standard' },
    use_original_as_rewritten: formBoolean,
    character_limit: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
  },
};

export const batchUrlBody: JsonSchema = {
  type: 'object',
  required: ['folder', 'urls'],
  additionalProperties: false,
  properties: {
    folder: nameString('Target folder name'),
    urls: { type: 'array', minItems: 1, maxItems: 1000, items: { type: 'string', minLength: 1, maxLength: 8192 } },
    use_original_as_rewritten: { type: 'boolean', default: false },
    auto_rewrite: { type: 'boolean', default: false },
    model_tier: { type: 'string', enum: ['standard', 'economy'], default: 'standard' },
    expert_name: { type: 'string', maxLength: 500 },
    user_email: { type: 'string', maxLength: 320 },
    character_limit: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
  },
};
