import type { Db } from '../db.js';
import { Prisma } from '../db.js';
import { AppError, badRequest, notFound } from '../errors.js';
import { budgetStatus, usageTotals } from '../budget/status.js';
import { describeKnowledgeBase } from './knowledge-bases.js';
import { findDocument, findKnowledgeBase } from './lookup.js';
import { presentDocument } from './presenters.js';
import { createWithinDocumentQuota } from './documents.js';

/** Read models of a knowledge base's documents (spec 4.3 and 2.6). */
export async function documentsWithUsage(db: Db, knowledgeBaseId: string, admin: boolean) {
  const docs = await db.document.findMany({ where: { knowledgeBaseId }, include: { folder: true }, orderBy: { createdAt: 'asc' } });
  return Promise.all(docs.map(async (d) => presentDocument(d, { admin, usage: await usageTotals(db, { documentId: d.id }) })));
}

/** Aggregate embedding info of a KB (the counting part of spec 2.6's embedding status). */
export async function embeddingSummary(db: Db, knowledgeBaseId: string) {
  const where = { knowledgeBaseId, deletionRequestedAt: null };
  const [kb, eligible, pending, failed, embedded, last] = await Promise.all([
    db.knowledgeBase.findUniqueOrThrow({ where: { id: knowledgeBaseId } }),
    db.document.count({ where: { ...where, fileRewritten: { not: null } } }),
    db.document.count({ where: { ...where, embeddingStatus: { in: ['pending', 'in_progress'] } } }),
    db.document.count({ where: { ...where, embeddingStatus: 'failed' } }),
    db.document.count({ where: { ...where, embeddingStatus: 'success' } }),
    db.document.aggregate({ where, _max: { embeddedAt: true }, _sum: { embeddingChunkCount: true } }),
  ]);
  return {
    embedding_status: kb.deletionRequestedAt ? 'delete_pending' : kb.embeddingStatus,
    eligible_document_count: eligible,
    pending_document_count: pending,
    failed_document_count: failed,
    embedded_document_count: embedded,
    chunk_count: last._sum.embeddingChunkCount ?? 0,
    last_successful_update_time: last._max.embeddedAt?.toISOString() ?? null,
  };
}

export async function knowledgeBaseStats(db: Db, knowledgeBaseId: string) {
  const where = { knowledgeBaseId, deletionRequestedAt: null };
  const [counts, sums] = await Promise.all([
    Promise.all([
      db.document.count({ where }),
      db.document.count({ where: { ...where, fileDigitized: { not: null } } }),
      db.document.count({ where: { ...where, fileRewrittenDraft: { not: null } } }),
      db.document.count({ where: { ...where, fileRewritten: { not: null } } }),
      db.document.count({ where: { ...where, OR: [{ processingError: { not: null } }, { embeddingStatus: 'failed' }] } }),
      db.document.count({ where: { ...where, embeddingStatus: 'success' } }),
    ]),
    db.document.aggregate({ where, _sum: { digitizedCharCount: true, draftRewriteCharCount: true, finalRewriteCharCount: true } }),
  ]);
  const [document_count, digitized_count, draft_rewrite_count, final_rewrite_count, error_count, embedded_count] = counts;
  return {
    document_count,
    digitized_count,
    draft_rewrite_count,
    final_rewrite_count,
    total_digitized_chars: sums._sum.digitizedCharCount ?? 0,
    total_draft_rewrite_chars: sums._sum.draftRewriteCharCount ?? 0,
    total_final_rewrite_chars: sums._sum.finalRewriteCharCount ?? 0,
    error_count,
    embedded_count,
  };
}

export async function listKnowledgeBaseDocuments(db: Db, partner: string, kbName: string, admin: boolean) {
  const { kb } = await findKnowledgeBase(db, partner, kbName);
  const [knowledgeBase, documents, embedding_info] = await Promise.all([describeKnowledgeBase(db, kb), documentsWithUsage(db, kb.id, admin), embeddingSummary(db, kb.id)]);
  return { ...knowledgeBase, documents, embedding_info };
}

/** The combined data of spec 2.6. */
export async function combinedKnowledgeBaseData(db: Db, partner: string, kbName: string, admin: boolean) {
  const { kb } = await findKnowledgeBase(db, partner, kbName);
  const [documents, folders, embedding_info, budget, usage_totals] = await Promise.all([
    documentsWithUsage(db, kb.id, admin),
    db.folder.findMany({ where: { knowledgeBaseId: kb.id }, orderBy: { name: 'asc' } }),
    embeddingSummary(db, kb.id),
    budgetStatus(db, kb.id),
    usageTotals(db, { knowledgeBaseId: kb.id }),
  ]);
  return {
    name: kb.name,
    documents,
    folders: folders.filter((f) => !f.deletionRequestedAt).map((f) => f.name),
    pending_folder_deletions: folders.filter((f) => f.deletionRequestedAt).map((f) => ({ name: f.name, deletion_requested_at: f.deletionRequestedAt!.toISOString() })),
    embedding_info,
    budget,
    folder_details: [],
    usage_totals,
    quota_info: null,
    deletion_requested_at: kb.deletionRequestedAt?.toISOString() ?? null,
  };
}

export async function kbStats(db: Db, partner: string, kbName: string) {
  const { kb } = await findKnowledgeBase(db, partner, kbName);
  return knowledgeBaseStats(db, kb.id);
}

/** Rename, change type or change URL: small edits of a document's metadata. */
export async function updateDocumentFields(db: Db, partner: string, kb: string, documentId: string, change: { name?: string; type?: 'file' | 'url'; url?: string }) {
  const { document } = await findDocument(db, partner, kb, documentId);
  if (document.deletionRequestedAt) throw new AppError('conflict', 'the document is being deleted');
  if (change.url !== undefined && !isHttpUrl(change.url)) throw badRequest('url must be an absolute http or https URL');
  return db.document.update({ where: { id: documentId }, data: change, include: { folder: true } });
}

export function isHttpUrl(value: string): boolean {
  try {
    const u = new URL(value);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
}

/** An empty document (for manual content editing): no original, no processing. */
export async function createEmptyDocument(db: Db, partner: string, kbName: string, input: { name: string; folder: string; type: 'file' | 'url'; url?: string }) {
  const found = await findKnowledgeBase(db, partner, kbName);
  if (found.kb.deletionRequestedAt) throw new AppError('conflict', `knowledge base ${JSON.stringify(kbName)} is being deleted`);
  if (input.type === 'url' && (!input.url || !isHttpUrl(input.url))) throw badRequest('form.url must be an absolute http or https URL when type is url');
  const folder = await db.folder.findUnique({ where: { knowledgeBaseId_name: { knowledgeBaseId: found.kb.id, name: input.folder } } });
  if (!folder || folder.deletionRequestedAt) throw notFound(`folder ${JSON.stringify(input.folder)} does not exist in knowledge base ${JSON.stringify(kbName)}`);
  return createWithinDocumentQuota(db, found.partner, (tx) =>
    tx.document.create({
      data: { knowledgeBaseId: found.kb.id, folderId: folder.id, name: input.name, type: input.type, url: input.type === 'url' ? input.url! : null },
      include: { folder: true },
    }),
  );
}

