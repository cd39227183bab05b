import { decimalAmountFormat, decimalAmountPattern, type JsonSchema } from '../http/validation.js';
import { ocrLanguages, ocrLanguagesSetting } from '../../lib/digitization/ocr.js';
import { partnerNamePattern } from '../../lib/partners/partners.js';
import { documentUrlMaxLength } from '../../lib/knowledge/documents.js';

/** JSON Schemas of the knowledge-base interface: request validation and the OpenAPI document. */
export const nameString = (what: string): JsonSchema => ({ type: 'string', minLength: 1, maxLength: 200, description: what });
/** A name being given (created or renamed); lookups take any name, so one given before this rule can still be reached. */
const newName = (what: string): JsonSchema => ({ ...nameString(what), 'x-no-control-characters': true });
const documentName: JsonSchema = { type: 'string', minLength: 1, maxLength: 500, 'x-no-control-characters': true };

export const partnerName: JsonSchema = {
  type: 'string',
  pattern: partnerNamePattern,
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
  pattern: decimalAmountPattern,
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

/** OCR languages of scanned pages and images (README, "Digitization"): up to five, comma-separated. */
const ocrLanguagesField: JsonSchema = {
  type: 'string',
  pattern: ocrLanguagesSetting.pattern,
  description: `OCR languages, ISO 639-3, comma-separated (e.g. \`deu\` or \`deu,fra\`), of: ${Object.keys(ocrLanguages).join(', ')}. Default: the knowledge base's, else detected per document.`,
};

export const createKnowledgeBaseForm: JsonSchema = {
  type: 'object',
  required: ['name'],
  additionalProperties: false,
  properties: {
    name: newName('Knowledge base name, unique within the partner'),
    character_limit: nonNegativeInteger,
    token_limit: nonNegativeInteger,
    dollar_limit_usd: dollarAmount,
    expert_name: { type: 'string', maxLength: 500 },
    user_email: { type: 'string', maxLength: 320 },
    ocr_languages: ocrLanguagesField,
  },
};

export const createFolderForm: JsonSchema = {
  type: 'object',
  required: ['name'],
  additionalProperties: false,
  properties: {
    name: newName('Folder name, unique within the knowledge base'),
    type: { type: 'string', enum: ['regular', 'video_channel'], default: 'regular' },
    channel_url: {
      type: 'string',
      maxLength: 2048,
      description: 'Required for video_channel (and refused otherwise): an @handle, or a youtube.com /@handle, /channel/UC…, /user/… or /c/… URL. Never changes afterwards.',
    },
    model_tier: { type: 'string', enum: ['standard', 'economy'], default: 'standard', description: 'video_channel: the model tier of future video imports' },
  },
};

export const channelSourceObject: JsonSchema = {
  type: 'object',
  description: 'A video-channel folder as folder_details shows it (spec 2.4)',
  properties: {
    id: { type: 'string', format: 'uuid', description: 'Durable source ID; its workflow is channel-source-<id>' },
    name: { type: 'string' },
    type: { enum: ['video_channel'] },
    channel_url: { type: 'string' },
    channel_id: { type: ['string', 'null'] },
    enabled: { type: 'boolean' },
    model_tier: { enum: ['standard', 'economy'] },
    status: { enum: ['pending', 'syncing', 'synced', 'incomplete', 'budget_blocked', 'paused', 'error', 'duplicate'] },
    last_error: { type: ['string', 'null'] },
    last_sync_at: { type: ['string', 'null'], format: 'date-time' },
    next_sync_at: { type: ['string', 'null'], format: 'date-time' },
    counts: { type: 'object', properties: Object.fromEntries(['pending', 'deferred', 'imported', 'duplicate', 'suppressed'].map((k) => [k, { type: 'integer' }])) },
    duplicate_source: { type: ['object', 'null'], properties: { id: { type: 'string' }, folder: { type: 'string' }, channel_url: { type: 'string' }, channel_id: { type: ['string', 'null'] } } },
    duplicate_document_ids: { type: 'array', maxItems: 100, items: { type: 'string' } },
  },
};

export const patchChannelBody: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  description: 'Both optional. The channel URL and the resolved channel identity cannot be changed (channel_url and channel_id are refused).',
  properties: {
    enabled: { type: 'boolean', description: 'false pauses future scans; true resumes them' },
    model_tier: { type: 'string', enum: ['standard', 'economy'], description: 'For videos imported from now on' },
  },
};

export const createDocumentForm: JsonSchema = {
  type: 'object',
  required: ['type', 'folder'],
  additionalProperties: false,
  properties: {
    type: { type: 'string', enum: ['file', 'url'] },
    folder: nameString('Target folder name'),
    url: { type: 'string', maxLength: documentUrlMaxLength },
    name: { ...documentName, minLength: 0 },
    expert_name: { type: 'string', maxLength: 500 },
    user_email: { type: 'string', maxLength: 320 },
    auto_rewrite: formBoolean,
    model_tier: { type: 'string', enum: ['standard', 'economy'], default: 'standard' },
    use_original_as_rewritten: formBoolean,
    character_limit: { ...positiveInteger, description: 'Request-level cap on digitized characters' },
    ocr_languages: ocrLanguagesField,
  },
};

/** A weight of the fusion: relative, so a bound as RETRIEVAL_WEIGHT_*'s loses nothing and keeps sums finite. */
const weightValue: JsonSchema = { type: 'number', minimum: 0, maximum: 1000 };

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
    rrf_weight_dense: weightValue,
    rrf_weight_sparse: weightValue,
    rrf_weight_bm25: weightValue,
    query_weight_original: weightValue,
    query_weight_replaced: weightValue,
    fusion: { type: 'string', enum: ['score', 'rrf'], description: 'How the streams are fused: `score` (default: each stream\'s scores min-max normalised over its candidates, weighted, summed) or `rrf` (weighted reciprocal ranks with rrf_k). The rrf_weight_* fields weight the streams in both.' },
    rerank: { type: 'boolean', description: 'Re-rank the first RERANK_CANDIDATES fused results with the configured cross-encoder (default: true when RERANK_BASE_URL is set); true without a configured re-ranker is a 400' },
    collection_override: { type: 'string' },
    rag_index_override: { type: 'string' },
  },
};

const streamRanks = { type: 'object', description: 'Per stream that found the chunk (dense, sparse, bm25)', additionalProperties: { type: 'number' } };

/** The chunk fields every stream item and every combined result carries. */
const ragHit = {
  rank: { type: 'integer', description: 'Position from 1' },
  document_id: { type: 'string', format: 'uuid' },
  document_name: { type: 'string' },
  chunk_index: { type: 'integer' },
  score: { type: 'number', description: 'Streams: cosine similarity (dense, sparse) or BM25 score. combined_results: the fused score, re-scoring included' },
  text: { type: 'string' },
  chunk_id: { type: 'string', description: 'Administrator only' },
};

/** Response of POST /api/rag-test/search (README, "Embedding and retrieval"). */
export const ragSearchResponse: JsonSchema = {
  type: 'object',
  description:
    'Retrieval diagnostics. Each combined result says why it ranks where it does: its rank (`retrievers`) and score (`stream_scores`) in every stream that found it, ' +
    'what each stream added to its fused score (`contributions`), and what the learned re-scoring\'s features added (`feature_contributions`); ' +
    'with the `replaced_*` ones they add up to `score`. With a re-ranker, ' +
    'combined_results are ordered by `rerank_score` and `fused_rank` keeps the position the fusion gave.',
  properties: {
    config: {
      type: 'object',
      description: 'Effective settings: top_k, search_multiplier, candidates_per_stream, fusion (score or rrf), fusion_formula, rrf_k, rrf_weight_dense/sparse/bm25 (the stream weights of either fusion), query_weight_original/replaced, character_replacement_name, retrievers, sparse_representation, bm25_query_languages, rescoring ({features, weights, unit} or null when RETRIEVAL_RESCORING=off), rerank ({model, candidates, priced} or null); administrator only: collection, collection_overridden, default_collection, knowledge_base_id, embedding_profile',
    },
    query: { type: 'string' },
    query_variants: { type: 'array', items: { type: 'object', properties: { name: { type: 'string', enum: ['original', 'replaced'] }, text: { type: 'string' }, weight: { type: 'number' } } } },
    streams: { type: 'object', description: '{dense, sparse, bm25}: each stream\'s candidates for the original query', additionalProperties: { type: 'array', items: { type: 'object', properties: ragHit } } },
    replaced_streams: { type: 'object', description: 'The same for the replaced query variant, when there is one' },
    combined_results: {
      type: 'array',
      description: 'The final top_k',
      items: {
        type: 'object',
        properties: {
          ...ragHit,
          retrievers: { ...streamRanks, description: 'Rank of the chunk in each stream that found it' },
          stream_scores: { ...streamRanks, description: 'Its score in each of those streams' },
          contributions: { ...streamRanks, description: 'What each of those streams added to the fused score: w_variant · w_stream · normalised score (score fusion) or w_variant · w_stream / (rrf_k + rank) (rrf)' },
          replaced_retrievers: streamRanks,
          replaced_stream_scores: streamRanks,
          replaced_contributions: streamRanks,
          features: { type: 'object', description: 'The learned re-scoring\'s features of the chunk for the original query: name_match and lead_match, each from 0 to 1', additionalProperties: { type: 'number' } },
          feature_contributions: { type: 'object', description: 'What each feature added to `score`: unit · weight · value', additionalProperties: { type: 'number' } },
          replaced_features: { type: 'object', additionalProperties: { type: 'number' } },
          replaced_feature_contributions: { type: 'object', additionalProperties: { type: 'number' } },
          fused_rank: { type: 'integer', description: 'Position in the fused ranking, re-scoring included (before re-ranking)' },
          rank_without_rescoring: { type: 'integer', description: 'Position the streams alone gave it, before the learned re-scoring' },
          rerank_score: { type: 'number', description: 'The re-ranker\'s relevance score, for results it scored' },
        },
      },
    },
    rerank: { type: 'object', description: 'When re-ranking ran: {model, candidates, tokens}', properties: { model: { type: 'string' }, candidates: { type: 'integer' }, tokens: { type: ['integer', 'null'] } } },
    rerank_skipped: { type: 'string', description: 'A configured re-ranker was not used: BUDGET_BLOCKED:<reason>: <detail> (the KB cannot hold the call) or RERANK_FAILED: <message>; the fused order is kept' },
    supported_bm25_languages: { type: 'array', items: { type: 'object', properties: { code: { type: 'string' }, name: { type: 'string' }, analysis: { type: 'string' } } } },
    timings_ms: { type: 'object', description: 'embed_query, search, fuse, rescore (when it ran), rerank (when it ran), total' },
    total_results: { type: 'integer' },
    dense_skipped: { type: 'string', description: 'BUDGET_BLOCKED:<reason>: <detail> when the paid query embedding did not fit the KB budget' },
  },
};

export const detailError: JsonSchema = { type: 'object', required: ['detail'], properties: { detail: { type: 'string' } } };

/** The error answers every knowledge-base route can give, in the interface's `{detail}` shape. */
export const standardErrors = {
  400: { description: 'Invalid input', schema: detailError },
  401: { description: 'Missing or invalid key', schema: detailError },
  403: { description: 'No access', schema: detailError },
  404: { description: 'Not found', schema: detailError },
};

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
        { type: 'string', pattern: decimalAmountPattern },
        { type: 'number', minimum: 0, format: decimalAmountFormat },
        { type: 'null' },
      ],
      description: 'Decimal USD, at most 8 decimal places (as a string, or a number whose shortest form has at most 8)',
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
    cost_usd: { type: 'string', pattern: decimalAmountPattern },
    model: { type: 'string' },
  },
};

export const emptyDocumentForm: JsonSchema = {
  type: 'object',
  required: ['name', 'folder', 'type'],
  additionalProperties: false,
  properties: {
    name: documentName,
    folder: nameString('Target folder name'),
    type: { type: 'string', enum: ['file', 'url'] },
    url: { type: 'string', maxLength: documentUrlMaxLength },
  },
};

export const renameForm: JsonSchema = { type: 'object', required: ['name'], additionalProperties: false, properties: { name: documentName } };
export const typeForm: JsonSchema = { type: 'object', required: ['type'], additionalProperties: false, properties: { type: { type: 'string', enum: ['file', 'url'] } } };
export const urlForm: JsonSchema = { type: 'object', required: ['url'], additionalProperties: false, properties: { url: { type: 'string', minLength: 1, maxLength: documentUrlMaxLength } } };
/** Optional cursor pagination of the document listings (README, "Document listings"); without it the whole list. */
export const listingQuery: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 1000, description: 'At most this many documents, in creation order; the answer then carries `next_cursor` (null on the last page). Absent: every document' },
    cursor: { type: 'string', minLength: 1, maxLength: 200, description: 'The `next_cursor` of the previous page' },
  },
};

export const forceQuery: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: { force: { type: 'boolean', default: true, description: 'false: answer 409 instead of cancelling active processing' } },
};

export const partnerDeletionQuery: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    force: {
      type: 'boolean',
      default: false,
      description: 'true: delete even while vectors, vendor-store copies or unsettled budget holds remain (they are cleaned up by the deletion)',
    },
  },
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
    ocr_languages: ocrLanguagesField,
  },
};

export const batchUrlBody: JsonSchema = {
  type: 'object',
  required: ['folder', 'urls'],
  additionalProperties: false,
  properties: {
    folder: nameString('Target folder name'),
    // Each URL is judged on its own (an empty, malformed or over-long one fails in its result, spec 4.3); only the list's size is the request's.
    urls: { type: 'array', maxItems: 1000, items: { type: 'string' } },
    use_original_as_rewritten: { type: 'boolean', default: false },
    auto_rewrite: { type: 'boolean', default: false },
    model_tier: { type: 'string', enum: ['standard', 'economy'], default: 'standard' },
    expert_name: { type: 'string', maxLength: 500 },
    user_email: { type: 'string', maxLength: 320 },
    character_limit: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
  },
};
