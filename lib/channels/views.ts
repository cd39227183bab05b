import type { Db } from '../platform/db.js';
import { channelVideoStatuses, type ChannelVideoStatus } from '../contracts/channel-source.js';
import type { ChannelSource, Folder } from '../../generated/prisma/client.js';

/** `folder_details` entries of a KB's combined data (spec 2.4): one per channel source whose folder is not being deleted. */
const MAX_DUPLICATE_DOCUMENTS = 100;

export interface DuplicateSourceRef {
  id: string;
  folder: string;
  channel_url: string;
  channel_id: string | null;
}

export const duplicateSourceRef = (s: ChannelSource & { folder: Folder }): DuplicateSourceRef => ({
  id: s.id,
  folder: s.folder.name,
  channel_url: s.channelUrl,
  channel_id: s.channelId,
});

/** The documents an owner source imported, newest first (what a duplicate alias names). */
export async function importedDocumentIds(db: Db, sourceId: string): Promise<string[]> {
  const rows = await db.channelVideo.findMany({
    where: { sourceId, status: 'imported', documentId: { not: null }, document: { deletionRequestedAt: null } },
    orderBy: [{ publishedAt: { sort: 'desc', nulls: 'last' } }, { importedAt: 'desc' }],
    select: { documentId: true },
    take: MAX_DUPLICATE_DOCUMENTS,
  });
  return rows.map((r) => r.documentId!);
}

/** For a duplicate source, the owner's documents; otherwise the documents elsewhere in the KB behind its duplicate videos. */
async function duplicateDocumentIds(db: Db, source: ChannelSource): Promise<string[]> {
  if (source.status === 'duplicate' && source.duplicateOfId) return importedDocumentIds(db, source.duplicateOfId);
  const rows = await db.channelVideo.findMany({
    where: { sourceId: source.id, status: 'duplicate', duplicateDocumentId: { not: null } },
    orderBy: [{ publishedAt: { sort: 'desc', nulls: 'last' } }],
    select: { duplicateDocumentId: true },
    take: MAX_DUPLICATE_DOCUMENTS,
  });
  return [...new Set(rows.map((r) => r.duplicateDocumentId!))];
}

type SourceWithFolders = ChannelSource & { folder: Folder; duplicateOf: (ChannelSource & { folder: Folder }) | null };

async function presentSource(db: Db, source: SourceWithFolders, counts: Record<ChannelVideoStatus, number>) {
  return {
    id: source.id,
    name: source.folder.name,
    type: 'video_channel' as const,
    channel_url: source.channelUrl,
    channel_id: source.channelId,
    enabled: source.enabled,
    model_tier: source.modelTier,
    status: source.status,
    last_error: source.lastError,
    last_sync_at: source.lastSyncAt?.toISOString() ?? null,
    // While paused nothing is scheduled.
    next_sync_at: source.enabled ? (source.nextSyncAt?.toISOString() ?? null) : null,
    counts,
    duplicate_source: source.status === 'duplicate' && source.duplicateOf ? duplicateSourceRef(source.duplicateOf) : null,
    duplicate_document_ids: await duplicateDocumentIds(db, source),
  };
}

export type ChannelFolderDetails = Awaited<ReturnType<typeof presentSource>>;

async function sourcesWithCounts(db: Db, where: { knowledgeBaseId?: string; id?: string }) {
  const sources = await db.channelSource.findMany({
    where: { ...where, deletionRequestedAt: null, folder: { deletionRequestedAt: null } },
    include: { folder: true, duplicateOf: { include: { folder: true } } },
    orderBy: { folder: { name: 'asc' } },
  });
  const grouped = await db.channelVideo.groupBy({ by: ['sourceId', 'status'], where: { sourceId: { in: sources.map((s) => s.id) } }, _count: { _all: true } });
  return Promise.all(
    sources.map((s) => {
      const counts = Object.fromEntries(channelVideoStatuses.map((st) => [st, 0])) as Record<ChannelVideoStatus, number>;
      for (const g of grouped) if (g.sourceId === s.id && g.status in counts) counts[g.status as ChannelVideoStatus] = g._count._all;
      return presentSource(db, s, counts);
    }),
  );
}

export async function channelFolderDetails(db: Db, knowledgeBaseId: string): Promise<ChannelFolderDetails[]> {
  return sourcesWithCounts(db, { knowledgeBaseId });
}

export async function channelSourceDetails(db: Db, sourceId: string): Promise<ChannelFolderDetails> {
  const [entry] = await sourcesWithCounts(db, { id: sourceId });
  if (!entry) throw new Error(`channel source ${sourceId} is gone`);
  return entry;
}
