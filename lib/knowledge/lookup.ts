import type { Db } from '../platform/db.js';
import { conflict, notFound } from '../platform/errors.js';
import { findPartner } from '../partners/partners.js';
import { isUuid } from '../platform/ids.js';

/** Path lookups shared by every knowledge-base endpoint; each answers 404 with a clear detail. */
export async function findKnowledgeBase(db: Db, partner: string, kb: string) {
  const p = await findPartner(db, partner);
  const row = await db.knowledgeBase.findUnique({ where: { partnerId_name: { partnerId: p.id, name: kb } } });
  if (!row) throw notFound(`knowledge base ${JSON.stringify(kb)} does not exist for partner ${JSON.stringify(partner)}`);
  return { partner: p, kb: row };
}

export async function findDocument(db: Db, partner: string, kb: string, documentId: string) {
  const found = await findKnowledgeBase(db, partner, kb);
  const doc = isUuid(documentId)
    ? await db.document.findFirst({ where: { id: documentId, knowledgeBaseId: found.kb.id }, include: { folder: true } })
    : null;
  if (!doc) throw notFound(`document ${JSON.stringify(documentId)} does not exist in knowledge base ${JSON.stringify(kb)}`);
  return { ...found, document: doc };
}

/** A folder new documents may go into: 409 while its KB is being deleted, 404 while it is. */
export async function findLiveFolder(db: Db, partner: string, kb: string, folder: string) {
  const found = await findKnowledgeBase(db, partner, kb);
  if (found.kb.deletionRequestedAt) throw conflict(`knowledge base ${JSON.stringify(kb)} is being deleted`);
  const row = await db.folder.findUnique({ where: { knowledgeBaseId_name: { knowledgeBaseId: found.kb.id, name: folder } } });
  if (!row || row.deletionRequestedAt) throw notFound(`folder ${JSON.stringify(folder)} does not exist in knowledge base ${JSON.stringify(kb)}`);
  return { ...found, folder: row };
}
