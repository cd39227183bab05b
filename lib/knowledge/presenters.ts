import type { Document, Folder, KnowledgeBase } from '../../generated/prisma/client.js';
import type { UsageTotals } from '../budget/status.js';
import { processingErrorOf } from './state.js';

/** Database rows to the field names and types of the knowledge-base spec (section 2). */
const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);
const num = (v: { toString(): string } | null | undefined) => (v === null || v === undefined ? null : Number(v.toString()));

function presentLimits(kb: KnowledgeBase) {
  return {
    character_limit: num(kb.characterLimit),
    token_limit: num(kb.tokenLimit),
    dollar_limit_usd: num(kb.dollarLimitUsd),
  };
}

export interface KnowledgeBaseUsage {
  lifetime: UsageTotals;
  rewrite_usage: unknown[];
  digitization_usage: unknown;
}

export function presentKnowledgeBase(kb: KnowledgeBase, usage: KnowledgeBaseUsage) {
  return {
    name: kb.name,
    embedding_status: kb.deletionRequestedAt ? 'delete_pending' : kb.embeddingStatus,
    expert_name: kb.expertName,
    user_email: kb.userEmail,
    limits: presentLimits(kb),
    ocr_languages: kb.ocrLanguages,
    lifetime_usage: usage.lifetime,
    rewrite_usage: usage.rewrite_usage,
    digitization_usage: usage.digitization_usage,
    created_at: iso(kb.createdAt),
    deletion_requested_at: iso(kb.deletionRequestedAt),
  };
}

export function presentDocument(doc: Document & { folder: Folder }, options: { admin: boolean; usage?: UsageTotals }) {
  const out: Record<string, unknown> = {
    id: doc.id,
    name: doc.name,
    folder: doc.folder.name,
    type: doc.type,
    url: doc.url,
    file_original: doc.fileOriginal,
    file_digitized: doc.fileDigitized,
    file_rewritten_draft: doc.fileRewrittenDraft,
    file_rewritten: doc.fileRewritten,
    user_email: doc.userEmail,
    in_queues: doc.inQueues,
    expert_name: doc.expertName,
    auto_rewrite: doc.autoRewrite,
    use_original_as_rewritten: doc.useOriginalAsRewritten,
    model_tier: doc.modelTier,
    ocr_languages: doc.ocrLanguages,
    digitization_provider: doc.digitizationProvider,
    digitization_cost_usd: num(doc.digitizationCostUsd),
    rewrite_model: doc.rewriteModel,
    input_file_tokens: doc.inputFileTokens,
    rewrite_input_tokens_total: doc.rewriteInputTokensTotal,
    rewrite_input_tokens_passes: doc.rewriteInputTokensPasses,
    rewrite_output_tokens: doc.rewriteOutputTokens,
    rewrite_cost_usd: num(doc.rewriteCostUsd),
    rewrite_completed_at: iso(doc.rewriteCompletedAt),
    processing_error: processingErrorOf(doc),
    embedding_status: doc.embeddingStatus,
    embedding_error: doc.embeddingError,
    embedded_at: iso(doc.embeddedAt),
    embedding_chunk_count: doc.embeddingChunkCount,
    embedding_dense_vector_count: doc.embeddingDenseVectorCount,
    embedding_bm25_language_counts: doc.embeddingBm25LanguageCounts ?? {},
    vectorstore_document_id: doc.vectorstoreDocumentId,
    deletion_requested_at: iso(doc.deletionRequestedAt),
    digitized_char_count: doc.digitizedCharCount,
    draft_rewrite_char_count: doc.draftRewriteCharCount,
    final_rewrite_char_count: doc.finalRewriteCharCount,
    created_at: iso(doc.createdAt),
    updated_at: iso(doc.updatedAt),
  };
  if (options.usage) out.lifetime_usage = options.usage;
  if (options.admin) {
    out.rewrite_provider = doc.rewriteProvider;
    out.rewrite_provider_inferred = doc.rewriteProviderInferred;
  }
  return out;
}
