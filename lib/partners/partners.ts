import type { Db } from '../platform/db.js';
import type { Partner } from '../../generated/prisma/client.js';
import { conflict, notFound } from '../platform/errors.js';
import { generatePartnerKey, hashKey, type Principal } from '../platform/api-keys.js';
import { RecentLookups } from '../platform/recent-lookups.js';
import { describedPattern } from '../platform/schema-errors.js';

/** A partner's name (`{partner}` in paths): what a URL path segment, a log line and a file name all take as is. */
export const partnerNamePattern = describedPattern('^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$', 'must be a partner name: 1-64 letters, digits, ".", "_" or "-", the first a letter or digit');

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
    const updated = await db.partner.update({
      where: { id: partner.id },
      data: { ...settingsData(settings), ...(settings.new_name ? { name: settings.new_name } : {}) },
    });
    // A cached key carries the partner's name, which its requests' paths are checked against.
    if (settings.new_name) forgetPartnerKeys(partner.id);
    return updated;
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`partner ${JSON.stringify(settings.new_name)} already exists`);
    throw err;
  }
}

export async function regeneratePartnerKey(db: Db, name: string) {
  const partner = await findPartner(db, name);
  const apiKey = generatePartnerKey();
  const updated = await db.partner.update({ where: { id: partner.id }, data: { keyHash: hashKey(apiKey) } });
  forgetPartnerKeys(partner.id);
  return { partner: updated, apiKey };
}

/**
 * Partner keys this process has seen lately (lib/platform/recent-lookups.ts), so that a request does
 * not wait for its key's lookup: an entry is served for at most PARTNER_KEY_CACHE_SECONDS after the
 * lookup that found the key valid. A key regenerated, or a partner renamed or deleted, through
 * another API replica is refused (or shows its new name) on this one within that bound; through
 * this one, at once. Whatever the bound, nothing can be added to a partner being deleted: every
 * creation checks the partner's row itself.
 */
const partnerKeys = new RecentLookups<Principal>();

/** One round trip: the partner a key belongs to, or null when none (or it is being deleted: its key no longer works). */
async function lookUpPartnerKey(db: Db, hash: string): Promise<Principal | null> {
  const { rows } = await db.pool.query<{ id: string; name: string }>({
    name: 'partner-by-key-hash',
    text: 'SELECT id, name FROM partners WHERE "keyHash" = $1 AND "deletionRequestedAt" IS NULL',
    values: [hash],
  });
  const row = rows[0];
  return row ? { isAdmin: false, partnerId: row.id, partnerName: row.name } : null;
}

/** The partner a key belongs to (null: an unknown key, or a partner being deleted), cached for up to `cacheSeconds`. */
export function authenticatePartnerKey(db: Db, key: string, cacheSeconds: number): Promise<Principal | null> {
  const hash = hashKey(key);
  return partnerKeys.find(hash, cacheSeconds, () => lookUpPartnerKey(db, hash));
}

/** Forgets a partner's cached key at once (its key regenerated, the partner renamed or being deleted through this replica). */
export function forgetPartnerKeys(partnerId: string): void {
  partnerKeys.forget((principal) => principal.partnerId === partnerId);
}
