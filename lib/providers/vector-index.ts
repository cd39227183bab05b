import crypto from 'node:crypto';
import weaviateModule, { type WeaviateClient, type WhereFilter } from 'weaviate-ts-client';

// The package's ESM build default-exports the client factory, while its CommonJS-typed declarations
// place it under `.default`; accept both shapes.
const weaviate = ((weaviateModule as unknown as { client?: unknown }).client ? weaviateModule : weaviateModule.default) as typeof weaviateModule.default;

/**
 * The hybrid index on Weaviate. One class holds every chunk; each object carries its partner,
 * knowledge base and document so that searches and deletions are filtered by them. Object IDs
 * are derived from (document, chunk index), so writing the same chunk twice (a retried activity, a
 * worker that died mid-batch) overwrites instead of duplicating.
 */
export const CHUNK_CLASS = 'KnowledgeChunk';

export interface ChunkRecord {
  partnerId: string;
  knowledgeBaseId: string;
  documentId: string;
  documentName: string;
  chunkIndex: number;
  text: string;
  heading: string | null;
  language: string;
  embeddingProfile: string;
  vector: number[];
}

export interface SearchHit {
  id: string;
  documentId: string;
  documentName: string;
  chunkIndex: number;
  text: string;
  score: number;
}

export interface IndexFilter {
  knowledgeBaseId: string;
}

/** A name-based (SHA-1) UUID, RFC 4122 version 5 layout, in our own namespace. */
export function chunkObjectId(documentId: string, chunkIndex: number): string {
  const h = crypto.createHash('sha1').update(`knowledge-chunk:${documentId}:${chunkIndex}`).digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

const textField = (name: string, tokenization = 'field') => ({ name, dataType: ['text'], tokenization, indexSearchable: tokenization !== 'field' });

export class VectorIndex {
  readonly client: WeaviateClient;

  constructor(url: string) {
    const u = new URL(url);
    this.client = weaviate.client({ scheme: u.protocol.replace(':', ''), host: u.host });
  }

  async ready(): Promise<boolean> {
    try {
      return Boolean(await this.client.misc.readyChecker().do());
    } catch {
      return false;
    }
  }

  private schemaReady: Promise<void> | null = null;

  /**
   * Creates the chunk class on first use (once per process; retried after a failure), so that
   * processes start even while Weaviate is still coming up.
   */
  private ensureSchemaOnce(): Promise<void> {
    this.schemaReady ??= this.ensureSchema().catch((err) => {
      this.schemaReady = null;
      throw err;
    });
    return this.schemaReady;
  }

  /** Creates the chunk class if it is missing. Safe to call from several processes at once. */
  async ensureSchema(): Promise<void> {
    const exists = await this.client.schema.exists(CHUNK_CLASS);
    if (exists) return;
    try {
      await this.client.schema
        .classCreator()
        .withClass({
          class: CHUNK_CLASS,
          description: 'A chunk of a document\'s final rewritten content',
          vectorizer: 'none',
          vectorIndexConfig: { distance: 'cosine' },
          invertedIndexConfig: { bm25: { b: 0.75, k1: 1.2 } },
          properties: [
            textField('partnerId'),
            textField('knowledgeBaseId'),
            textField('documentId'),
            { ...textField('documentName', 'word') },
            { name: 'chunkIndex', dataType: ['int'] },
            textField('text', 'word'),
            { ...textField('heading', 'word') },
            textField('language'),
            textField('embeddingProfile'),
          ],
        })
        .do();
    } catch (err) {
      if (!(await this.client.schema.exists(CHUNK_CLASS))) throw err;
    }
  }

  /**
   * Waits until Weaviate's indexing queue for the chunk class is empty, so that what was written is
   * searchable (the server runs with ASYNC_INDEXING for crash safety). Returns false on timeout.
   */
  async waitForIndexing(timeoutMs: number, onWait?: () => void): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const status = (await this.client.cluster.nodesStatusGetter().withClassName(CHUNK_CLASS).withOutput('verbose').do()) as {
        nodes?: Array<{ shards?: Array<{ class: string; vectorQueueLength?: number }> | null }>;
      };
      const queued = (status.nodes ?? []).flatMap((n) => n.shards ?? []).filter((s) => s.class === CHUNK_CLASS).reduce((sum, s) => sum + (s.vectorQueueLength ?? 0), 0);
      if (queued === 0) return true;
      if (Date.now() > deadline) return false;
      onWait?.();
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  async upsertChunks(chunks: ChunkRecord[]): Promise<void> {
    if (chunks.length === 0) return;
    await this.ensureSchemaOnce();
    const batcher = this.client.batch.objectsBatcher();
    for (const c of chunks) {
      const { vector, ...properties } = c;
      batcher.withObject({ class: CHUNK_CLASS, id: chunkObjectId(c.documentId, c.chunkIndex), properties: { ...properties, heading: c.heading ?? '' }, vector });
    }
    const results = (await batcher.do()) as Array<{ result?: { errors?: { error?: { message: string }[] } } }>;
    const failures = results.flatMap((r) => r.result?.errors?.error?.map((e) => e.message) ?? []);
    if (failures.length) throw new Error(`Weaviate rejected ${failures.length} chunk(s): ${failures[0]}`);
  }

  /** Deletes a document's chunks whose index is at or above `fromIndex` (0 removes them all). */
  async deleteDocumentChunks(documentId: string, fromIndex = 0): Promise<void> {
    await this.ensureSchemaOnce();
    const where: WhereFilter = {
      operator: 'And',
      operands: [
        { path: ['documentId'], operator: 'Equal', valueText: documentId },
        { path: ['chunkIndex'], operator: 'GreaterThanEqual', valueInt: fromIndex },
      ],
    };
    await this.client.batch.objectsBatchDeleter().withClassName(CHUNK_CLASS).withWhere(where).do();
  }

  async countDocumentChunks(documentId: string): Promise<number> {
    await this.ensureSchemaOnce();
    const res = await this.client.graphql
      .aggregate()
      .withClassName(CHUNK_CLASS)
      .withWhere({ path: ['documentId'], operator: 'Equal', valueText: documentId })
      .withFields('meta { count }')
      .do();
    return res.data?.Aggregate?.[CHUNK_CLASS]?.[0]?.meta?.count ?? 0;
  }

  async listDocumentChunkIndexes(documentId: string): Promise<number[]> {
    await this.ensureSchemaOnce();
    const res = await this.client.graphql
      .get()
      .withClassName(CHUNK_CLASS)
      .withWhere({ path: ['documentId'], operator: 'Equal', valueText: documentId })
      .withFields('chunkIndex')
      .withLimit(10000)
      .do();
    return (res.data?.Get?.[CHUNK_CLASS] ?? []).map((o: { chunkIndex: number }) => o.chunkIndex);
  }

  private kbWhere(filter: IndexFilter): WhereFilter {
    return { path: ['knowledgeBaseId'], operator: 'Equal', valueText: filter.knowledgeBaseId };
  }

  private toHits(res: any, scoreOf: (additional: any) => number): SearchHit[] {
    return (res.data?.Get?.[CHUNK_CLASS] ?? []).map((o: any) => ({
      id: o._additional.id,
      documentId: o.documentId,
      documentName: o.documentName,
      chunkIndex: o.chunkIndex,
      text: o.text,
      score: scoreOf(o._additional),
    }));
  }

  async searchDense(filter: IndexFilter, vector: number[], limit: number): Promise<SearchHit[]> {
    await this.ensureSchemaOnce();
    const res = await this.client.graphql
      .get()
      .withClassName(CHUNK_CLASS)
      .withWhere(this.kbWhere(filter))
      .withNearVector({ vector })
      .withLimit(limit)
      .withFields('documentId documentName chunkIndex text _additional { id distance }')
      .do();
    return this.toHits(res, (a) => 1 - Number(a.distance));
  }

  async searchBm25(filter: IndexFilter, query: string, limit: number): Promise<SearchHit[]> {
    await this.ensureSchemaOnce();
    const res = await this.client.graphql
      .get()
      .withClassName(CHUNK_CLASS)
      .withWhere(this.kbWhere(filter))
      .withBm25({ query, properties: ['text', 'heading', 'documentName'] })
      .withLimit(limit)
      .withFields('documentId documentName chunkIndex text _additional { id score }')
      .do();
    return this.toHits(res, (a) => Number(a.score));
  }
}
