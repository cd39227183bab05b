import type { Services } from '../../lib/services.js';
import { chunkClassFor } from '../../lib/providers/vector-index.js';
import { chunkRecord, prepareDocument, type DocumentIdentity } from '../../lib/retrieval/indexing.js';

/** Chunks, embeds and writes one document's text as the embed step would (no workflow, no database row). */
export async function indexText(services: Services, identity: Omit<DocumentIdentity, 'embeddingProfile'>, text: string): Promise<void> {
  const prepared = await prepareDocument(text);
  const vectors = await services.embedder.embed(prepared.embeddedText);
  const document = { ...identity, embeddingProfile: services.embedder.profile.name };
  await services.index.upsertChunks(chunkClassFor(services.embedder.profile.name), prepared.chunks.map((_, i) => chunkRecord(document, prepared, i, vectors[i]!)));
}
