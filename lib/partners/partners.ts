import type { Db } from '../platform/db.js';
import type { Partner } from '../../generated/prisma/client.js';
import { conflict, notFound } from '../platform/errors.js';
import { generatePartnerKey, hashKey } from '../platform/api-keys.js';

/**
 * Where every file of a partner's voices lives in storage (lib/voices/files.ts builds on it), so
 * that deleting the partner removes them all with one prefix.
 */
export const partnerVoiceFilesPrefix = (partnerId: string) => `voices/${partnerId}`;

/** A partner by name: 404 when there is none, 409 while it is being deleted (nothing may be added to it). */
export async function findPartner(db: Db, partner: string) {
  const row = await db.partner.findUnique({ where: { name: partner } });
  if (!row) throw notFound(`partner ${JSON.stringify(partner)} does not exist`);
  if (row.deletionRequestedAt) throw conflict(`partner ${JSON.stringify(partner)} is being deleted`);
  return row;
}

/** A partner as the knowledge-base spec shows it (never its key). */
export function presentPartner(p: Partner) {
  return {
    name: p.name,
    max_documents: p.maxDocuments,
    allow_audio_video: p.allowAudioVideo,
    vendor_sync_enabled: p.vendorSyncEnabled,
    created_at: p.createdAt.toISOString(),
    updated_at: p.updatedAt.toISOString(),
  };
}

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
