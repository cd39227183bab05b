import type { Db } from '../db.js';
import { conflict } from '../errors.js';
import { generatePartnerKey, hashKey } from '../auth.js';
import type { VectorIndex } from '../providers/vector-index.js';
import type { FileStorage } from '../storage.js';
import { documentFiles } from '../storage.js';
import { findPartner } from './lookup.js';

export interface PartnerSettings {
  max_documents?: number;
  allow_audio_video?: boolean;
  vendor_sync_enabled?: boolean;
}

const settingsData = (s: PartnerSettings) => ({
  ...(s.max_documents !== undefined ? { maxDocuments: s.max_documents } : {}),
  ...(s.allow_audio_video !== undefined ? { allowAudioVideo: s.allow_audio_video } : {}),
  ...(s.vendor_sync_enabled !== undefined ? { vendorSyncEnabled: s.vendor_sync_enabled } : {}),
});

const isUniqueViolation = (err: unknown) => (err as { code?: string }).code === 'P2002';

/** Creates a partner and returns its key, which exists nowhere else afterwards. */
export async function createPartner(db: Db, name: string, settings: PartnerSettings) {
  const apiKey = generatePartnerKey();
  try {
    const partner = await db.partner.create({ data: { name, keyHash: hashKey(apiKey), ...settingsData(settings) } });
    return { partner, apiKey };
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`partner ${JSON.stringify(name)} already exists`);
    throw err;
  }
}

export async function updatePartner(db: Db, name: string, settings: PartnerSettings & { new_name?: string }) {
  const partner = await findPartner(db, name);
  try {
    return await db.partner.update({
      where: { id: partner.id },
      data: { ...settingsData(settings), ...(settings.new_name ? { name: settings.new_name } : {}) },
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`partner ${JSON.stringify(settings.new_name)} already exists`);
    throw err;
  }
}

export async function regeneratePartnerKey(db: Db, name: string) {
  const partner = await findPartner(db, name);
  const apiKey = generatePartnerKey();
  const updated = await db.partner.update({ where: { id: partner.id }, data: { keyHash: hashKey(apiKey) } });
  return { partner: updated, apiKey };
}

/**
 * Deletes a partner with its knowledge bases, documents, stored files and vectors. Refused (409)
 * while any of its documents still has work in flight, because that work would write vectors
 * or files after the cleanup.
 */
export async function deletePartner(db: Db, storage: FileStorage, index: VectorIndex, name: string) {
  const partner = await findPartner(db, name);
  const busy = await db.document.count({ where: { knowledgeBase: { partnerId: partner.id }, NOT: { inQueues: { isEmpty: true } } } });
  if (busy > 0) throw conflict(`partner ${JSON.stringify(name)} has ${busy} document(s) with processing in flight; delete it when they finish`, { active_documents: busy });
  const unsettled = await db.budgetReservation.count({ where: { knowledgeBase: { partnerId: partner.id }, status: { in: ['pending', 'uncertain'] } } });
  if (unsettled > 0) throw conflict(`partner ${JSON.stringify(name)} has ${unsettled} unsettled budget reservation(s); delete it once they are settled or resolved`, { unsettled_reservations: unsettled });
  const mirrored = await db.document.count({ where: { knowledgeBase: { partnerId: partner.id }, vendorFileId: { not: null } } });
  if (mirrored > 0) {
    throw conflict(`partner ${JSON.stringify(name)} has ${mirrored} document(s) mirrored to the vendor vector store; delete its knowledge bases first (their deletion removes the vendor files)`, { vendor_synced_documents: mirrored });
  }
  const documents = await db.document.findMany({ where: { knowledgeBase: { partnerId: partner.id } }, select: { id: true } });
  for (const { id } of documents) {
    await index.deleteDocumentChunks(id);
    await storage.removePrefix(documentFiles.prefix(id));
  }
  await db.partner.delete({ where: { id: partner.id } });
  return { status: 'deleted', name, deleted_documents: documents.length };
}
