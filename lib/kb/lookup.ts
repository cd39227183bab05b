import type { Db } from '../db.js';
import { notFound } from '../errors.js';

/** Path lookups shared by every knowledge-base endpoint; each answers 404 with a clear detail. */
export async function findPartner(db: Db, partner: string) {
  const row = await db.partner.findUnique({ where: { name: partner } });
  if (!row) throw notFound(`partner ${JSON.stringify(partner)} does not exist`);
  return row;
}

export async function findKnowledgeBase(db: Db, partner: string, kb: string) {
  const p = await findPartner(db, partner);
  const row = await db.knowledgeBase.findUnique({ where: { partnerId_name: { partnerId: p.id, name: kb } } });
  if (!row) throw notFound(`knowledge base ${JSON.stringify(kb)} does not exist for partner ${JSON.stringify(partner)}`);
  return { partner: p, kb: row };
}

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export async function findDocument(db: Db, partner: string, kb: string, documentId: string) {
  const found = await findKnowledgeBase(db, partner, kb);
  const doc = uuidPattern.test(documentId)
    ? await db.document.findFirst({ where: { id: documentId, knowledgeBaseId: found.kb.id }, include: { folder: true } })
    : null;
  if (!doc) throw notFound(`document ${JSON.stringify(documentId)} does not exist in knowledge base ${JSON.stringify(kb)}`);
  return { ...found, document: doc };
}
