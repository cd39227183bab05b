import type { Db } from '../db.js';

/**
 * Derives a knowledge base's embedding_status from its documents: in_progress while any document
 * waits for or runs embedding, fail when the latest outcome of any document is a failure,
 * success when at least one document is embedded, none otherwise. A KB being deleted keeps
 * delete_pending.
 */
export async function refreshKnowledgeBaseEmbeddingStatus(db: Db, knowledgeBaseId: string): Promise<void> {
  const rows = await db.document.groupBy({
    by: ['embeddingStatus'],
    where: { knowledgeBaseId, deletionRequestedAt: null },
    _count: { _all: true },
  });
  const has = (s: string) => rows.some((r) => r.embeddingStatus === s && r._count._all > 0);
  const status = has('pending') || has('in_progress') ? 'in_progress' : has('failed') ? 'fail' : has('success') ? 'success' : 'none';
  await db.knowledgeBase.updateMany({ where: { id: knowledgeBaseId, deletionRequestedAt: null }, data: { embeddingStatus: status } });
}
