import crypto from 'node:crypto';
import weaviateModule, { type ConsistencyLevel, type WeaviateClient, type WhereFilter } from 'weaviate-ts-client';
import { trimOf } from '../platform/text.js';
import { answeredWithin } from '../platform/deadline.js';
import { connectionFailed, isUnavailableStatus, ServiceUnavailable } from './service-unavailable.js';

// The package's ESM build default-exports the client factory, while its CommonJS-typed declarations
// place it under `.default`; accept both shapes.
const weaviate = ((weaviateModule as unknown as { client?: unknown }).client ? weaviateModule : weaviateModule.default) as typeof weaviateModule.default;

/**
 * The hybrid index on Weaviate. Each embedding profile has its own class (`Chunk_<profile>`), so
 * vectors of two models are never mixed in one vector space; a class holds every KB's chunks of
 * that profile, each object carrying its partner, knowledge base and document so that searches and
 * deletions are filtered by them. An object has two named vectors: `dense` (the embedding model)
 * and `sparse` (hashed character n-grams, lib/retrieval/sparse-vector.ts), and a `bm25Text` property
 * holding its language-analysed terms (lib/retrieval/language-analysis.ts). Object IDs are derived from
 * (document, chunk index), so writing the same chunk twice (a retried activity, a worker that died
 * mid-batch) overwrites instead of duplicating.
 */
/** The single class of the first version (dense vector only); still cleaned by deletions. */
const LEGACY_CHUNK_CLASS = 'KnowledgeChunk';
const CLASS_PREFIX = 'Chunk_';

export function chunkClassFor(profileName: string): string {
  const slug = trimOf(profileName.replace(/[^a-z0-9]+/gi, '_'), '_').slice(0, 40);
  const hash = crypto.createHash('sha1').update(profileName).digest('hex').slice(0, 8);
  return `${CLASS_PREFIX}${slug}_${hash}`;
}

export interface ChunkRecord {
  partnerId: string;
  knowledgeBaseId: string;
  documentId: string;
  documentName: string;
  chunkIndex: number;
  text: string;
  heading: string | null;
  /** Heading trail, outermost first, joined by " › ". */
  section: string;
  language: string;
  bm25Text: string;
  embeddingProfile: string;
  denseVector: number[];
  sparseVector: number[];
}

export interface SearchHit {
  id: string;
  documentId: string;
  documentName: string;
  chunkIndex: number;
  text: string;
  score: number;
}

/** A chunk object as a GraphQL Get answers it, with the `_additional` fields a search asks for. */
interface ChunkRow {
  documentId: string;
  documentName: string;
  chunkIndex: number;
  text: string;
  _additional: { id: string; distance?: number | string; score?: number | string };
}

export interface IndexFilter {
  knowledgeBaseId: string;
}

/** A name-based (SHA-1) UUID, RFC 4122 version 5 layout, in our own namespace. */
function chunkObjectId(documentId: string, chunkIndex: number): string {
  const h = crypto.createHash('sha1').update(`knowledge-chunk:${documentId}:${chunkIndex}`).digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

const textField = (name: string, tokenization = 'field', searchable = tokenization !== 'field') => ({
  name,
  dataType: ['text'],
  tokenization,
  indexSearchable: searchable,
  indexFilterable: true,
});
const namedVector = (indexType: 'hnsw' | 'flat') => ({
  vectorizer: { none: {} },
  vectorIndexType: indexType,
  vectorIndexConfig: { distance: 'cosine' },
});

const HIT_FIELDS = 'documentId documentName chunkIndex text';

/**
 * True for a request that failed on a kept-alive connection the server had already closed (the
 * socket went stale while the event loop was busy, e.g. embedding a batch, and never saw the
 * close): nothing reached the server, so the request can be sent again on a new connection.
 */
function staleConnection(err: unknown): boolean {
  const cause = (err as { cause?: { code?: string } } | null)?.cause;
  return err instanceof TypeError && ['EPIPE', 'ECONNRESET', 'UND_ERR_SOCKET'].includes(cause?.code ?? '');
}

/**
 * Weaviate down or overloaded (connection refused or broken, 5xx or 429, which the client reports
 * as `usage error (503): ...`) becomes ServiceUnavailable, which a pipeline waits out; any other
 * failure is returned as it is.
 */
function unavailableOr(err: unknown): unknown {
  const status = /^usage error \((\d{3})\)/.exec(err instanceof Error ? err.message : '')?.[1];
  if (status ? isUnavailableStatus(Number(status)) : connectionFailed(err)) return new ServiceUnavailable(`the vector index (Weaviate) is unavailable: ${(err as Error).message}`);
  return err;
}

/**
 * Runs an idempotent request, sending it again (up to three times) when it failed on a stale
 * kept-alive connection. Weaviate closes connections idle for its read timeout (30 s); a process
 * whose event loop was busy meanwhile learns of the closes only after a turn of the loop, which
 * the short wait gives it, so the next attempt gets a live connection.
 */
async function resentOnStaleConnection<T>(request: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await request();
    } catch (err) {
      if (attempt > 3 || !staleConnection(err)) throw unavailableOr(err);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/**
 * How chunk classes are replicated over a Weaviate cluster (WEAVIATE_REPLICATION_FACTOR) and how
 * many replicas answer a write and a read before it counts (WEAVIATE_WRITE_CONSISTENCY,
 * WEAVIATE_READ_CONSISTENCY). QUORUM for both at a factor of 3: reads see every acknowledged write
 * (2 + 2 > 3) and either keeps working with one node down.
 */
export interface IndexReplication {
  factor: number;
  write: ConsistencyLevel;
  read: ConsistencyLevel;
}

export const singleNodeReplication: IndexReplication = { factor: 1, write: 'QUORUM', read: 'QUORUM' };

export class VectorIndex {
  readonly client: WeaviateClient;
  private readonly baseUrl: string;

  /** `timeoutMs`: how long one request may go unanswered before Weaviate counts as unavailable (WEAVIATE_TIMEOUT_SECONDS). */
  constructor(
    url: string,
    private readonly timeoutMs = 30_000,
    private readonly replication: IndexReplication = singleNodeReplication,
  ) {
    const u = new URL(url);
    this.client = weaviate.client({ scheme: u.protocol.replace(':', ''), host: u.host });
    this.baseUrl = `${u.protocol}//${u.host}`;
  }

  /**
   * Every request to Weaviate goes through here: resent on a stale connection, and ServiceUnavailable
   * once the timeout has passed: a Weaviate that accepts connections but does not answer (hung, or
   * swapping) is treated as down, so a search answers 503 and a pipeline waits it out, instead of
   * both waiting for the HTTP client's own 5-minute limit. The client takes no abort signal, so a
   * late answer is dropped; every request sent this way is safe to have run anyway (reads, and
   * writes keyed by object ID).
   */
  private idempotent<T>(request: () => Promise<T>): Promise<T> {
    return answeredWithin(resentOnStaleConnection(request), this.timeoutMs, () => new ServiceUnavailable(`the vector index (Weaviate) did not answer within ${this.timeoutMs / 1000} s`));
  }

  async ready(): Promise<boolean> {
    try {
      return Boolean(await this.idempotent(() => this.client.misc.readyChecker().do()));
    } catch {
      return false;
    }
  }

  /**
   * Throws ServiceUnavailable (saying why) unless Weaviate answers a request now: asked before work
   * that costs money and is lost if the index cannot take it (a paid embedding). `/v1/meta` is the
   * cheapest request that reports its failure (the readiness checker turns every failure into false).
   */
  async assertReachable(): Promise<void> {
    await this.idempotent(() => this.client.misc.metaGetter().do());
  }

  private classesReady = new Map<string, Promise<void>>();

  /**
   * Creates a profile's class on first use (once per process; retried after a failure), so that
   * processes start even while Weaviate is still coming up.
   */
  ensureClass(className: string): Promise<void> {
    let ready = this.classesReady.get(className);
    if (!ready) {
      ready = this.createClass(className).catch((err) => {
        this.classesReady.delete(className);
        throw unavailableOr(err);
      });
      this.classesReady.set(className, ready);
    }
    return ready;
  }

  /** Creates the class if it is missing. Safe to call from several processes at once. */
  private async createClass(className: string): Promise<void> {
    if (await this.idempotent(() => this.client.schema.exists(className))) {
      const existing = await this.idempotent(() => this.client.schema.classGetter().withClassName(className).do());
      this.replicationFactors.set(className, existing.replicationConfig?.factor ?? 1);
      return;
    }
    try {
      const creator = this.client.schema
        .classCreator()
        .withClass({
          class: className,
          description: "Chunks of documents' final rewritten content, embedded with one embedding profile",
          vectorConfig: { dense: namedVector('hnsw'), sparse: namedVector('hnsw') },
          // Our own analysis removes function words per language; Weaviate's English preset would
          // also drop e.g. "it" from German or Italian text.
          invertedIndexConfig: { bm25: { b: 0.75, k1: 1.2 }, stopwords: { preset: 'none' } },
          // A replica that missed a delete while it was down must not bring the chunk back: the
          // newer of the delete and the write wins (replicas repair each other in the background).
          replicationConfig: { factor: this.replication.factor, deletionStrategy: 'TimeBasedResolution' },
          properties: [
            textField('partnerId'),
            textField('knowledgeBaseId'),
            textField('documentId'),
            textField('documentName', 'word'),
            { name: 'chunkIndex', dataType: ['int'] },
            textField('text', 'word', false),
            textField('heading', 'word', false),
            textField('section', 'word', false),
            textField('language'),
            // Already analysed (stemmed, folded, CJK bigrams): split on whitespace only.
            textField('bm25Text', 'whitespace', true),
            textField('embeddingProfile'),
          ],
        } as never);
      // A creation that failed because another process created the class first is found below.
      await this.idempotent(() => creator.do());
    } catch (err) {
      if (!(await this.idempotent(() => this.client.schema.exists(className)))) throw err;
    }
  }

  /** Every chunk class that exists (all profiles, and the legacy class). */
  async chunkClasses(): Promise<string[]> {
    const schema = await this.idempotent(() => this.client.schema.getter().do());
    const classes = (schema.classes ?? []).filter((c) => c.class!.startsWith(CLASS_PREFIX) || c.class === LEGACY_CHUNK_CLASS);
    for (const c of classes) this.replicationFactors.set(c.class!, c.replicationConfig?.factor ?? 1);
    return classes.map((c) => c.class!);
  }

  /** Each class's replication factor as the schema last said (classes made before a change of WEAVIATE_REPLICATION_FACTOR keep theirs). */
  private replicationFactors = new Map<string, number>();

  /**
   * A GraphQL read of a class at the read consistency. Weaviate's GraphQL refuses the argument on a
   * class that is not replicated ("Unknown argument consistencyLevel"), whose one copy is all there is.
   */
  private consistentRead<T extends { withConsistencyLevel(level: ConsistencyLevel): T }>(getter: T, className: string): T {
    return (this.replicationFactors.get(className) ?? this.replication.factor) > 1 ? getter.withConsistencyLevel(this.replication.read) : getter;
  }

  /**
   * Waits until Weaviate's indexing queues of the chunk classes are empty, so that what was written
   * is searchable (the server runs with ASYNC_INDEXING for crash safety). Returns false on timeout.
   */
  async waitForIndexing(timeoutMs: number, onWait?: () => void, classNames?: string[]): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    const classes = classNames ?? (await this.chunkClasses());
    for (;;) {
      let queued = 0;
      for (const cls of classes) {
        const status = (await this.idempotent(() => this.client.cluster.nodesStatusGetter().withClassName(cls).withOutput('verbose').do())) as {
          nodes?: Array<{ shards?: Array<{ class: string; vectorQueueLength?: number }> | null }>;
        };
        queued += (status.nodes ?? []).flatMap((n) => n.shards ?? []).filter((s) => s.class === cls).reduce((sum, s) => sum + (s.vectorQueueLength ?? 0), 0);
      }
      if (queued === 0) return true;
      if (Date.now() > deadline) return false;
      onWait?.();
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  async upsertChunks(className: string, chunks: ChunkRecord[]): Promise<void> {
    if (chunks.length === 0) return;
    await this.ensureClass(className);
    const batcher = this.client.batch.objectsBatcher().withConsistencyLevel(this.replication.write);
    for (const c of chunks) {
      const { denseVector, sparseVector, ...properties } = c;
      batcher.withObject({
        class: className,
        id: chunkObjectId(c.documentId, c.chunkIndex),
        properties: { ...properties, heading: c.heading ?? '' },
        vectors: { dense: denseVector, sparse: sparseVector },
      } as never);
    }
    // Object IDs are derived from (document, chunk index): sending a batch twice overwrites.
    const results = (await this.idempotent(() => batcher.do())) as Array<{ result?: { errors?: { error?: { message: string }[] } } }>;
    const failures = results.flatMap((r) => r.result?.errors?.error?.map((e) => e.message) ?? []);
    if (failures.length) throw new Error(`Weaviate rejected ${failures.length} chunk(s): ${failures[0]}`);
  }

  /**
   * Deletes a document's chunks whose index is at or above `fromIndex` (0 removes them all), in
   * `onlyClass` or in every chunk class except `exceptClass` (default: every class).
   */
  async deleteDocumentChunks(documentId: string, fromIndex = 0, scope: { onlyClass?: string; exceptClass?: string } = {}): Promise<void> {
    const classes = scope.onlyClass ? [scope.onlyClass] : (await this.chunkClasses()).filter((c) => c !== scope.exceptClass);
    const where: WhereFilter = {
      operator: 'And',
      operands: [
        { path: ['documentId'], operator: 'Equal', valueText: documentId },
        { path: ['chunkIndex'], operator: 'GreaterThanEqual', valueInt: fromIndex },
      ],
    };
    for (const cls of classes) {
      if (!(await this.idempotent(() => this.client.schema.exists(cls)))) continue;
      await this.deleteWhere(cls, where);
    }
  }

  /**
   * Deletes the chunks of a class that match `where` (one batch delete request), stating when:
   * Weaviate records no deletion time unless the request gives one, and then a replica that was down
   * during the delete brings the chunks back to the others when it returns (measured on a 3-node
   * cluster). With the time, the others' newer delete wins (TimeBasedResolution). weaviate-ts-client
   * 2.2 cannot send the field, so this is the REST call itself.
   */
  async deleteWhere(className: string, where: WhereFilter): Promise<void> {
    await this.idempotent(async () => {
      const res = await fetch(`${this.baseUrl}/v1/batch/objects?consistency_level=${this.replication.write}`, {
        method: 'DELETE',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ match: { class: className, where }, deletionTimeUnixMilli: Date.now(), output: 'minimal' }),
      });
      // The client's own wording, so that unavailableOr classifies it as it does the client's errors.
      if (!res.ok) throw new Error(`usage error (${res.status}): ${await res.text()}`);
      const { results } = (await res.json()) as { results?: { failed?: number; objects?: Array<{ errors?: { error?: Array<{ message: string }> } }> } };
      if (results?.failed) throw new Error(`Weaviate failed to delete ${results.failed} chunk(s) of ${className}: ${results.objects?.[0]?.errors?.error?.[0]?.message ?? 'no message'}`);
    });
  }

  /** Chunk indexes of a document, over every class (a chunk in two classes appears twice). */
  async listDocumentChunkIndexes(documentId: string, className?: string): Promise<number[]> {
    const out: number[] = [];
    for (const cls of className ? [className] : await this.chunkClasses()) {
      const res = await this.idempotent(() =>
        this.consistentRead(this.client.graphql.get().withClassName(cls), cls)
          .withWhere({ path: ['documentId'], operator: 'Equal', valueText: documentId })
          .withFields('chunkIndex')
          .withLimit(10000)
          .do(),
      );
      out.push(...(res.data?.Get?.[cls] ?? []).map((o: { chunkIndex: number }) => o.chunkIndex));
    }
    return out;
  }

  async countDocumentChunks(documentId: string): Promise<number> {
    return (await this.listDocumentChunkIndexes(documentId)).length;
  }

  /** Chunks of a knowledge base over every class: what a KB holds in the index, orphans included. */
  async countKnowledgeBaseChunks(knowledgeBaseId: string): Promise<number> {
    let count = 0;
    for (const cls of await this.chunkClasses()) {
      const res = await this.idempotent(() =>
        this.client.graphql.aggregate().withClassName(cls).withWhere(this.kbWhere({ knowledgeBaseId })).withFields('meta { count }').do(),
      );
      count += (res.data?.Aggregate?.[cls]?.[0] as { meta?: { count?: number } } | undefined)?.meta?.count ?? 0;
    }
    return count;
  }

  private kbWhere(filter: IndexFilter): WhereFilter {
    return { path: ['knowledgeBaseId'], operator: 'Equal', valueText: filter.knowledgeBaseId };
  }

  private toHits(className: string, res: { data?: { Get?: Record<string, ChunkRow[]> } }, scoreOf: (additional: ChunkRow['_additional']) => number): SearchHit[] {
    return (res.data?.Get?.[className] ?? []).map((o) => ({
      id: o._additional.id,
      documentId: o.documentId,
      documentName: o.documentName,
      chunkIndex: o.chunkIndex,
      text: o.text,
      score: scoreOf(o._additional),
    }));
  }

  private async nearVector(className: string, target: 'dense' | 'sparse', filter: IndexFilter, vector: number[], limit: number): Promise<SearchHit[]> {
    await this.ensureClass(className);
    const res = await this.idempotent(() =>
      this.consistentRead(this.client.graphql.get().withClassName(className), className)
        .withWhere(this.kbWhere(filter))
        .withNearVector({ vector, targetVectors: [target] })
        .withLimit(limit)
        .withFields(`${HIT_FIELDS} _additional { id distance }`)
        .do(),
    );
    return this.toHits(className, res, (a) => 1 - Number(a.distance));
  }

  /** Dense stream: nearest embedding vectors (score: cosine similarity). */
  searchDense(className: string, filter: IndexFilter, vector: number[], limit: number): Promise<SearchHit[]> {
    return this.nearVector(className, 'dense', filter, vector, limit);
  }

  /** Sparse stream: nearest hashed n-gram vectors (score: cosine similarity). */
  searchSparse(className: string, filter: IndexFilter, vector: number[], limit: number): Promise<SearchHit[]> {
    return this.nearVector(className, 'sparse', filter, vector, limit);
  }

  /** BM25 stream over the analysed terms (the query must be analysed the same way). */
  async searchBm25(className: string, filter: IndexFilter, analysedQuery: string, limit: number): Promise<SearchHit[]> {
    if (!analysedQuery.trim()) return [];
    await this.ensureClass(className);
    const res = await this.idempotent(() =>
      this.consistentRead(this.client.graphql.get().withClassName(className), className)
        .withWhere(this.kbWhere(filter))
        .withBm25({ query: analysedQuery, properties: ['bm25Text'] })
        .withLimit(limit)
        .withFields(`${HIT_FIELDS} _additional { id score }`)
        .do(),
    );
    return this.toHits(className, res, (a) => Number(a.score));
  }

  /** Weaviate's own hybrid query (BM25 + dense, relative-score fusion): the benchmark's baseline. */
  async searchNativeHybrid(className: string, filter: IndexFilter, query: string, vector: number[], limit: number, alpha = 0.5): Promise<SearchHit[]> {
    await this.ensureClass(className);
    const res = await this.idempotent(() =>
      this.consistentRead(this.client.graphql.get().withClassName(className), className)
        .withWhere(this.kbWhere(filter))
        .withHybrid({ query, vector, alpha, targetVectors: ['dense'], properties: ['bm25Text'] })
        .withLimit(limit)
        .withFields(`${HIT_FIELDS} _additional { id score }`)
        .do(),
    );
    return this.toHits(className, res, (a) => Number(a.score));
  }
}
