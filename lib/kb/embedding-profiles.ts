import type { Db } from '../db.js';
import type { EmbeddingProfile } from '../providers/embeddings.js';

/** The row of an embedding profile (created on first use; its integer id is `embedding_profile_id`). */
export async function ensureEmbeddingProfile(db: Db, profile: EmbeddingProfile) {
  return db.embeddingProfile.upsert({
    where: { name: profile.name },
    create: { name: profile.name, provider: profile.provider, model: profile.model, dimensions: profile.dimensions },
    update: {},
  });
}
