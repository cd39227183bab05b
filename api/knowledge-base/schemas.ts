import { decimalAmountFormat, decimalAmountPattern, type JsonSchema } from '../http/validation.js';
import { arrayOf, boolean, dateTime, integer, mapOf, nullable, number, object, text, texts, uuid } from '../http/answer-schemas.js';
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

export const partnerObject: JsonSchema = object({
  name: text,
  max_documents: integer,
  allow_audio_video: boolean,
  vendor_sync_enabled: boolean,
  created_at: dateTime,
  updated_at: dateTime,
});

export const partnerWithKey: JsonSchema = object({ ...(partnerObject.properties as Record<string, JsonSchema>), api_key: { type: 'string', description: 'Shown once; only a hash is stored' } });

/** OCR languages of scanned pages and images (docs/api/knowledge-bases.md, "OCR languages"): up to five, comma-separated. */
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

const nullableText = nullable(text);
const nullableDateTime = nullable(dateTime);
const nullableInteger = nullable(integer);
const nullableNumber = nullable(number);

export const channelSourceObject: JsonSchema = object(
  {
    id: { ...uuid, description: 'Durable source ID; its workflow is channel-source-<id>' },
    name: text,
    type: { enum: ['video_channel'] },
    channel_url: text,
    channel_id: nullableText,
    enabled: boolean,
    model_tier: { enum: ['standard', 'economy'] },
    status: { enum: ['pending', 'syncing', 'synced', 'incomplete', 'budget_blocked', 'paused', 'error', 'duplicate'] },
    last_error: nullableText,
    last_sync_at: nullableDateTime,
    next_sync_at: nullableDateTime,
    counts: object(Object.fromEntries(['pending', 'deferred', 'imported', 'duplicate', 'suppressed'].map((k) => [k, integer]))),
    duplicate_source: nullable(object({ id: text, folder: text, channel_url: text, channel_id: nullableText })),
    duplicate_document_ids: { type: 'array', maxItems: 100, items: text },
  },
  { description: 'A video-channel folder as folder_details shows it (spec 2.4)' },
);

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

/** Response of POST /api/rag-test/search (docs/api/retrieval.md, "POST /api/rag-test/search"). */
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

/** lifetime_usage (2.2, 2.5): aggregates of settled usage events. */
export const usageTotalsObject: JsonSchema = object({
  event_count: integer,
  priced_event_count: integer,
  unpriced_event_count: integer,
  cost_usd_total: number,
  rewrite_event_count: integer,
  digitization_event_count: integer,
});

/** One call of a rewrite (lib/rewrite/usage.ts RewritePass); first-pass rows also split the prompt into overhead and source. */
const rewritePass: JsonSchema = object(
  {
    pass: integer,
    part: integer,
    part_count: integer,
    model_name: text,
    fallback: boolean,
    first_pass: boolean,
    prompt_tokens: nullableInteger,
    output_tokens: nullableInteger,
    prompt_overhead_tokens: integer,
    source_input_tokens: nullableInteger,
    finish_reason: nullableText,
    rejected: boolean,
    rejection_reason: text,
    cost_usd: nullableNumber,
    operation_key: text,
  },
  { optional: ['prompt_overhead_tokens', 'source_input_tokens', 'rejection_reason'] },
);

export const documentObject: JsonSchema = object(
  {
    id: uuid,
    name: text,
    folder: text,
    type: { type: 'string', enum: ['file', 'url'] },
    url: nullableText,
    file_original: nullableText,
    file_digitized: nullableText,
    file_rewritten_draft: nullableText,
    file_rewritten: nullableText,
    user_email: nullableText,
    in_queues: texts,
    expert_name: nullableText,
    auto_rewrite: boolean,
    use_original_as_rewritten: boolean,
    model_tier: { enum: ['standard', 'economy'] },
    ocr_languages: texts,
    digitization_provider: nullableText,
    digitization_cost_usd: nullableNumber,
    rewrite_model: nullableText,
    input_file_tokens: nullableInteger,
    rewrite_input_tokens_total: nullableInteger,
    rewrite_input_tokens_passes: arrayOf(rewritePass, 'Per-call breakdown of the latest rewrite (spec 2.5)'),
    rewrite_output_tokens: nullableInteger,
    rewrite_cost_usd: nullableNumber,
    rewrite_completed_at: nullableDateTime,
    processing_error: { type: ['string', 'null'], description: 'null, `BUDGET_BLOCKED:<reason>: <detail>` while the budget holds it back, or the failed step\'s message' },
    embedding_status: nullable({ type: 'string', enum: ['pending', 'in_progress', 'success', 'failed'] }),
    embedding_error: nullableText,
    embedded_at: nullableDateTime,
    embedding_chunk_count: nullableInteger,
    embedding_dense_vector_count: nullableInteger,
    embedding_bm25_language_counts: mapOf(integer, 'Chunks indexed per BM25 analyzer language'),
    vectorstore_document_id: nullableText,
    deletion_requested_at: nullableDateTime,
    digitized_char_count: nullableInteger,
    draft_rewrite_char_count: nullableInteger,
    final_rewrite_char_count: nullableInteger,
    created_at: dateTime,
    updated_at: dateTime,
    lifetime_usage: { ...usageTotalsObject, description: 'In listings (GET /api/documents, /api/kb-data)' },
    rewrite_provider: { type: ['string', 'null'], description: 'Administrator only' },
    rewrite_provider_inferred: { type: ['boolean', 'null'], description: 'Administrator only' },
  },
  { description: 'Document (knowledge-base spec 2.5)', optional: ['lifetime_usage', 'rewrite_provider', 'rewrite_provider_inferred'] },
);

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

const limitsObject: JsonSchema = object({ character_limit: nullableNumber, token_limit: nullableNumber, dollar_limit_usd: nullableNumber }, { description: 'null: no limit' });
const budgetDimension: JsonSchema = object({ limit: nullableNumber, consumed: nullableNumber, reserved: nullableNumber, remaining: nullableNumber, unknown_events: integer });

export const budgetStatusObject: JsonSchema = object(
  {
    limits: limitsObject,
    characters: budgetDimension,
    tokens: budgetDimension,
    dollars: budgetDimension,
    uncertain_operations: integer,
    blocking_reasons: arrayOf(
      object({ type: { enum: ['limit_exhausted', 'unknown_historical_usage', 'unresolved_provider_outcome'] }, dimension: { enum: ['characters', 'tokens', 'dollars'] }, detail: text }, { optional: ['dimension'] }),
    ),
    blocked: boolean,
  },
  { description: 'KB budget status (spec 2.3)' },
);

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
/** Optional cursor pagination of the document listings (docs/api/knowledge-bases.md, "Document listings"); without it the whole list. */
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

/** What a deletion answers: `deleted` when it finished within a few seconds, else `delete_pending` with what is left. */
const deletionMembers = {
  status: { enum: ['deleted', 'delete_pending'] },
  deletion_workflow_id: text,
  pending_cleanup: object(
    { documents: integer, active_processing_workflows: integer, channel_sources: integer, vectors: boolean, files: boolean },
    { optional: ['documents', 'active_processing_workflows', 'channel_sources'] },
  ),
};

export const deletionResult: JsonSchema = object(
  {
    id: { ...uuid, description: 'A document\'s deletion' },
    name: { ...text, description: 'A folder\'s or knowledge base\'s deletion' },
    ...deletionMembers,
  },
  { optional: ['id', 'name', 'deletion_workflow_id', 'pending_cleanup'] },
);

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

// ---------------------------------------------------------------- answers
// The bodies the routes answer, member for member what lib/ presents (lib/knowledge/presenters.ts,
// document-views.ts, queue-admin.ts, lib/retrieval/embedding-status.ts, lib/vendor-sync).

export const contentTypesAnswer: JsonSchema = object({
  content_types: arrayOf(object({ id: { enum: ['auto', 'article', 'video', 'book'] }, name: text }), 'The rewrite templates (spec 4.5)'),
});

export const authMeAnswer: JsonSchema = object({ partner: { type: ['string', 'null'], description: 'null for the administrator key' }, isAdmin: boolean });

export const partnerDeletionAnswer: JsonSchema = object({ name: text, ...deletionMembers }, { optional: ['deletion_workflow_id', 'pending_cleanup'] });

export const knowledgeBaseObject: JsonSchema = object(
  {
    name: text,
    embedding_status: { type: 'string', description: 'The KB\'s aggregate embedding status; `delete_pending` while it is being deleted' },
    expert_name: nullableText,
    user_email: nullableText,
    limits: limitsObject,
    ocr_languages: texts,
    lifetime_usage: usageTotalsObject,
    rewrite_usage: arrayOf(
      object({
        model: nullableText,
        rewritten_count: integer,
        rejected_count: integer,
        complete_usage_count: integer,
        complete_cost_count: integer,
        cost_usd_total: number,
        input_tokens_total: integer,
        output_tokens_total: integer,
        fallback_complete_usage_count: integer,
        fallback_input_tokens_total: integer,
        fallback_output_tokens_total: integer,
      }),
      'Compatibility aggregates of rewrite usage (spec 2.2)',
    ),
    digitization_usage: object({ scraper_document_count: integer, complete_cost_count: integer, cost_usd_total: number }),
    created_at: dateTime,
    deletion_requested_at: nullableDateTime,
  },
  { description: 'Knowledge base (spec 2.2)' },
);

export const uncertainOperationsAnswer: JsonSchema = object({
  operations: arrayOf(
    object({
      operation_key: text,
      workflow_id: text,
      document_id: nullable(uuid),
      category: text,
      bound: object({ characters: number, tokens: number, dollars: number }, { description: 'What the operation holds' }),
      created_at: dateTime,
      note: nullableText,
    }),
  ),
});

export const folderNamesAnswer: JsonSchema = object({ folders: texts });

export const createdFolderAnswer: JsonSchema = object(
  { name: text, type: { enum: ['regular', 'video_channel'] }, created_at: dateTime, channel_source: channelSourceObject },
  { optional: ['channel_source'], description: '`channel_source` for a video_channel folder' },
);

const batchSummary = object({ total: integer, succeeded: integer, failed: integer });

export const batchUrlAnswer: JsonSchema = object({
  summary: batchSummary,
  results: arrayOf(
    object({ url: text, status: { enum: ['success', 'failed'] }, document_id: nullable(uuid), error: text }, { optional: ['error'] }),
    'One per URL, in the order sent',
  ),
});

export const batchUploadAnswer: JsonSchema = object({
  summary: batchSummary,
  results: arrayOf(
    object(
      { filename: text, status: { enum: ['success', 'failed'] }, document_id: nullable(uuid), error: text, http_status: { type: 'integer', description: 'The status a single upload of this file would have answered' } },
      { optional: ['error', 'http_status'] },
    ),
    'One per file, in the order sent',
  ),
});

const embeddingSummary: JsonSchema = object({
  embedding_status: text,
  eligible_document_count: integer,
  pending_document_count: integer,
  failed_document_count: integer,
  embedded_document_count: integer,
  chunk_count: integer,
  last_successful_update_time: nullableDateTime,
});

const nextCursor: JsonSchema = { type: ['string', 'null'], description: 'With `limit` or `cursor`: the cursor of the next page, null on the last' };

export const documentListingAnswer: JsonSchema = object(
  {
    ...(knowledgeBaseObject.properties as Record<string, JsonSchema>),
    documents: arrayOf(documentObject, 'In creation order, each with `lifetime_usage`'),
    next_cursor: nextCursor,
    embedding_info: embeddingSummary,
  },
  { optional: ['next_cursor'], description: 'The KB object (spec 2.2) with its documents' },
);

export const vendorSyncCounts: JsonSchema = object({ eligible: integer, pending: integer, synced: integer, failed: integer, not_queued: integer });

export const combinedDataAnswer: JsonSchema = object(
  {
    name: text,
    documents: arrayOf(documentObject),
    next_cursor: nextCursor,
    folders: texts,
    pending_folder_deletions: arrayOf(object({ name: text, deletion_requested_at: dateTime })),
    embedding_info: embeddingSummary,
    budget: budgetStatusObject,
    folder_details: arrayOf(channelSourceObject, 'The video-channel folders'),
    usage_totals: usageTotalsObject,
    quota_info: { type: 'null', description: 'Kept for compatibility; always null' },
    vendor_sync: object({ counts: vendorSyncCounts, last_synced_at: nullableDateTime }, { description: 'Partners with vendor sync enabled' }),
    deletion_requested_at: nullableDateTime,
  },
  { optional: ['next_cursor', 'vendor_sync'], description: 'Combined knowledge-base data (spec 2.6)' },
);

export const kbStatsAnswer: JsonSchema = object({
  document_count: integer,
  digitized_count: integer,
  draft_rewrite_count: integer,
  final_rewrite_count: integer,
  total_digitized_chars: integer,
  total_draft_rewrite_chars: integer,
  total_final_rewrite_chars: integer,
  error_count: { type: 'integer', description: 'Failed processing or embedding; a budget block is not an error' },
  embedded_count: integer,
});

export const processAnswer: JsonSchema = object({
  status: { const: 'queued' },
  action: { enum: ['digitize', 'rewrite'] },
  document_id: uuid,
  workflow_id: text,
  steps: arrayOf({ enum: ['digitize', 'finalize_original', 'rewrite', 'embed'] }),
  content_type: nullable({ type: 'string', enum: ['article', 'video', 'book'] }),
});

export const queueStatusAnswer: JsonSchema = object({
  queues: mapOf(integer, 'Documents per queue (their `in_queues` markers)'),
  jobs: object({ total: integer, by_status: mapOf(integer) }, { description: 'Running document pipelines' }),
  budget_blocked_documents: integer,
});

export const queueJobsAnswer: JsonSchema = object({
  jobs: arrayOf(
    object({
      workflow_id: text,
      document_id: nullableText,
      document_name: nullableText,
      partner: nullableText,
      knowledge_base_id: nullableText,
      status: nullableText,
      budget_blocked: boolean,
      started_at: nullableDateTime,
      in_queues: texts,
      processing_error: nullableText,
      embedding_error: nullableText,
    }),
  ),
  limit: integer,
});

export const queueDebugAnswer: JsonSchema = object({
  marker_count: integer,
  job_count: integer,
  orphan_markers: arrayOf(object({ document_id: uuid, name: text, in_queues: texts }), 'Queue markers without a running job'),
  unmarked_jobs: arrayOf(object({ workflow_id: text, document_id: nullableText, status: nullableText }), 'Running jobs whose document has no marker'),
});

export const retryFailedAnswer: JsonSchema = object({ status: { const: 'queued' }, retried: integer, document_ids: arrayOf(uuid) });
export const clearOrphansAnswer: JsonSchema = object({ status: { const: 'cleared' }, cleared: integer, document_ids: arrayOf(uuid) });

const embeddingDetails = object({ chunk_count: integer, point_count: integer });

export const embeddingStatusAnswer: JsonSchema = object(
  {
    embedding_status: text,
    knowledge_base_id: uuid,
    embedding_profile_id: nullableInteger,
    embedding_profile_name: nullableText,
    last_successful_update_time: nullableDateTime,
    last_update_time: nullableDateTime,
    last_update_status: nullable({ type: 'string', enum: ['in_progress', 'success', 'fail'] }),
    last_update_details: embeddingDetails,
    last_successful_details: embeddingDetails,
    eligible_document_count: integer,
    pending_document_count: integer,
    failed_document_count: integer,
    embedded_document_count: integer,
    last_error: nullableText,
  },
  { description: 'Aggregate embedding status (spec 2.6)' },
);

export const retryFailedEmbeddingsAnswer: JsonSchema = object({ queued: integer, embedding_info: embeddingStatusAnswer });

export const embedDocumentAnswer: JsonSchema = object({
  job_id: { type: ['string', 'null'], description: 'The embedding workflow, null when nothing was queued' },
  queued: boolean,
  document: documentObject,
  embedding_info: embeddingStatusAnswer,
});

/** A section of the table of contents; `children` are sections of the same shape. */
const tocSection = (depth: number): JsonSchema =>
  object({ title: text, level: integer, chunk_start: integer, chunk_end: integer, children: arrayOf(depth > 0 ? tocSection(depth - 1) : { type: 'object', description: 'A section, as its parent' }) });

export const tocAnswer: JsonSchema = object(
  {
    knowledge_base: text,
    folders: arrayOf(
      object({
        name: text,
        documents: arrayOf(
          object(
            {
              document_id: uuid,
              name: text,
              chunk_count: integer,
              sections: arrayOf(tocSection(4)),
              embedding_status: nullableText,
              embedding_error: nullableText,
              embedded_at: nullableDateTime,
              embedding_chunk_count: nullableInteger,
              embedding_bm25_language_counts: nullable(mapOf(integer)),
              in_queues: texts,
            },
            { optional: ['embedding_status', 'embedding_error', 'embedded_at', 'embedding_chunk_count', 'embedding_bm25_language_counts', 'in_queues'], description: 'The embedding_* members and in_queues with include_status=true' },
          ),
        ),
      }),
    ),
    embedding_status: { type: 'string', description: 'With include_status=true' },
  },
  { optional: ['embedding_status'] },
);

export const vendorSyncStatusAnswer: JsonSchema = object({
  enabled: boolean,
  knowledge_base: text,
  vector_store_id: nullableText,
  deletion_pending: boolean,
  counts: vendorSyncCounts,
  documents: arrayOf(
    object({ document_id: uuid, name: text, eligible: boolean, status: nullableText, error: nullableText, vendor_file_id: nullableText, synced_at: nullableDateTime }),
  ),
});

export const vendorSyncQueuedAnswer: JsonSchema = object({ status: { const: 'queued' }, queued: integer });
