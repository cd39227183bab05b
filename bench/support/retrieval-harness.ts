import crypto from 'node:crypto';
import type { EmbeddingProvider } from '../../lib/providers/embeddings.js';
import { chunkClassFor, type ChunkRecord, type SearchHit, type VectorIndex } from '../../lib/providers/vector-index.js';
import { chunkRecord, languageCounts, prepareDocument } from '../../lib/retrieval/indexing.js';
import { searchKnowledgeBase, streamNames, type RetrievalOutcome, type RetrievalSettings, type StreamName } from '../../lib/retrieval/hybrid-search.js';
import type { EvalPart } from '../../scripts/retrieval-eval-sets.js';

/**
 * The retrieval evaluation's measuring: a part of an evaluation set is indexed exactly as the
 * embed step indexes documents (lib/retrieval/indexing.ts: same chunking, language detection,
 * BM25 analysis, sparse and dense vectors, Weaviate class of the embedding profile) into a
 * knowledge base of its own, and each query is searched by the search code of
 * /api/rag-test/search (searchKnowledgeBase: the three streams, then the fusion).
 */
export interface IndexedPart {
  knowledgeBaseId: string;
  className: string;
  /** Languages of the part's chunks, as the knowledge base's documents record them. */
  languages: string[];
  /** Weaviate document ID -> evaluation document ID. */
  documentIds: Map<string, string>;
  chunkCount: number;
}

const uuidFrom = (s: string) => {
  const h = crypto.createHash('sha1').update(s).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
};

export async function indexPart(
  deps: { index: VectorIndex; embedder: EmbeddingProvider },
  label: string,
  part: EvalPart,
  onProgress?: (done: number, total: number) => void,
  className = chunkClassFor(deps.embedder.profile.name),
): Promise<IndexedPart> {
  const knowledgeBaseId = uuidFrom(`eval-kb:${label}`);
  const documentIds = new Map<string, string>();
  const languages = new Set<string>();
  let pending: ChunkRecord[] = [];
  let chunkCount = 0;
  const flush = async () => {
    if (pending.length) await deps.index.upsertChunks(className, pending);
    pending = [];
  };
  for (let d = 0; d < part.documents.length; d++) {
    const doc = part.documents[d]!;
    const documentId = uuidFrom(`eval-doc:${label}:${doc.id}`);
    documentIds.set(documentId, doc.id);
    const prepared = await prepareDocument(doc.text);
    for (const l of Object.keys(languageCounts(prepared))) languages.add(l);
    const vectors = await deps.embedder.embed(prepared.embeddedText);
    const identity = { partnerId: 'retrieval-eval', knowledgeBaseId, documentId, documentName: doc.name, embeddingProfile: deps.embedder.profile.name };
    prepared.chunks.forEach((_, i) => pending.push(chunkRecord(identity, prepared, i, vectors[i]!)));
    chunkCount += prepared.chunks.length;
    if (pending.length >= 100) await flush();
    onProgress?.(d + 1, part.documents.length);
  }
  await flush();
  await deps.index.waitForIndexing(10 * 60_000, undefined, [className]);
  return { knowledgeBaseId, className, languages: [...languages], documentIds, chunkCount };
}

/** Per query: each stream's and the fusion's ranked evaluation document IDs (a document at its first chunk). */
export interface QueryRun {
  queryId: string;
  relevant: string;
  outcome: RetrievalOutcome;
}

export async function runQueries(
  deps: { index: VectorIndex; embedder: EmbeddingProvider },
  indexed: IndexedPart,
  part: EvalPart,
  settings: RetrievalSettings,
  concurrency = 3,
): Promise<QueryRun[]> {
  const out: QueryRun[] = new Array(part.queries.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < part.queries.length; i = next++) {
      const q = part.queries[i]!;
      const outcome = await searchKnowledgeBase(deps, { knowledgeBaseId: indexed.knowledgeBaseId, languages: indexed.languages }, q.text, settings, { className: indexed.className });
      out[i] = { queryId: q.id, relevant: q.relevant, outcome };
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return out;
}

/** Document IDs in rank order, each once (at its first chunk). */
export function rankedDocuments(hits: SearchHit[], documentIds: Map<string, string>): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const h of hits) {
    const d = documentIds.get(h.documentId) ?? h.documentId;
    if (!seen.has(d)) {
      seen.add(d);
      out.push(d);
    }
  }
  return out;
}

export interface Metrics {
  ndcg10: number;
  mrr: number;
  recall50: number;
}

/** Known-item metrics of one ranking: nDCG@10 (one relevant document, gain 1), reciprocal rank, recall@50. */
export function itemMetrics(ranked: string[], relevant: string): Metrics {
  const rank = ranked.indexOf(relevant) + 1;
  return {
    ndcg10: rank >= 1 && rank <= 10 ? 1 / Math.log2(rank + 1) : 0,
    mrr: rank >= 1 ? 1 / rank : 0,
    recall50: rank >= 1 && rank <= 50 ? 1 : 0,
  };
}

export function meanMetrics(rows: Metrics[]): Metrics {
  const n = rows.length || 1;
  return {
    ndcg10: rows.reduce((s, r) => s + r.ndcg10, 0) / n,
    mrr: rows.reduce((s, r) => s + r.mrr, 0) / n,
    recall50: rows.reduce((s, r) => s + r.recall50, 0) / n,
  };
}

export type Row = StreamName | 'fused';

/**
 * Mean metrics per stream (of the original query) and of the fused ranking. The fused ranking is
 * the whole fused candidate list (`ranked`), of which combined_results is the first top_k.
 */
export function partMetrics(runs: QueryRun[], indexed: IndexedPart): Record<Row, Metrics> {
  const rows: Record<Row, Metrics[]> = { dense: [], sparse: [], bm25: [], fused: [] };
  for (const r of runs) {
    const v = r.outcome.variants[0]!;
    for (const s of streamNames) rows[s].push(itemMetrics(rankedDocuments(v.streams[s], indexed.documentIds), r.relevant));
    rows.fused.push(itemMetrics(rankedDocuments(r.outcome.ranked, indexed.documentIds), r.relevant));
  }
  return Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, meanMetrics(v)])) as Record<Row, Metrics>;
}

