import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { Db } from '../platform/db.js';
import { queueEmbedding, refreshKnowledgeBaseEmbeddingStatus } from '../knowledge/embedding-queue.js';
import type { EmbeddingProfile } from '../providers/embeddings.js';

/** The row of an embedding profile (created on first use; its integer id is `embedding_profile_id`). */
export async function ensureEmbeddingProfile(db: Db, profile: EmbeddingProfile) {
  return db.embeddingProfile.upsert({
    where: { name: profile.name },
    create: { name: profile.name, provider: profile.provider, model: profile.model, dimensions: profile.dimensions },
    update: profile.dimensions > 0 ? { dimensions: profile.dimensions } : {},
  });
}

/**
 * Re-embeds every knowledge base whose vectors belong to another profile than the configured
 * embedder's (run by each worker at start; idempotent). The KB switches to the new profile at
 * once, so search never mixes two models' vectors: until a document is re-embedded it is absent
 * from the new profile's class (and its old vectors are removed when its new ones are written).
 * Each document is re-embedded by its ordinary `document-<id>` pipeline with steps ['embed'].
 */
export async function reembedOnProfileChange(deps: { db: Db; temporal: Client; taskQueue: string }, profile: EmbeddingProfile): Promise<number> {
  // An API provider learns its dimensions on first use; its profile name is known before that.
  const current = await ensureEmbeddingProfile(deps.db, profile);
  const stale = await deps.db.knowledgeBase.findMany({
    where: { deletionRequestedAt: null, embeddingProfileId: { not: null }, NOT: { embeddingProfileId: current.id } },
    include: { partner: true },
  });
  let queued = 0;
  for (const kb of stale) {
    await deps.db.knowledgeBase.update({ where: { id: kb.id }, data: { embeddingProfileId: current.id } });
    const docs = await deps.db.document.findMany({ where: { knowledgeBaseId: kb.id, deletionRequestedAt: null, fileRewritten: { not: null } } });
    for (const doc of docs) {
      try {
        await queueEmbedding(deps, kb.partner.name, doc);
        queued++;
      } catch (err) {
        // A running pipeline embeds with the new profile when it reaches its embed step.
        if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      }
    }
    await refreshKnowledgeBaseEmbeddingStatus(deps.db, kb.id);
  }
  return queued;
}
