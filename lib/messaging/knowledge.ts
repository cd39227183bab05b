import crypto from 'node:crypto';
import type { Db } from '../platform/db.js';
import type { EmbeddingProvider } from '../providers/embeddings.js';
import type { VectorIndex } from '../providers/vector-index.js';
import { ragSearch } from '../retrieval/rag-search.js';
import type { Character } from './service-metadata.js';

/**
 * Knowledge context of a knowledge-enabled character: one search through the knowledge-base
 * service's own hybrid retrieval (lib/retrieval/rag-search.ts), the hits injected into the model's
 * instructions in full, and the visibility items of spec 2.4, which carry only short previews.
 */
const PREVIEW_CHARS = 200;

/**
 * One source of a `file_search_call`. Its `attributes` follow OpenAI's `VectorStoreFileAttributes`
 * (a map of string, number or boolean values; clients that validate answers, such as the Vercel
 * AI SDK, refuse anything else): `retrievers` is the streams that found the chunk, best rank first,
 * comma-separated ("dense,bm25").
 */
export interface KnowledgeSource {
  file_id: string;
  filename: string;
  score: number;
  text: string;
  attributes: { chunk_index: number; retrievers: string };
}

/** What one knowledge search gives a generation: the visible sources and the instruction text. */
export interface KnowledgeContext {
  query: string;
  sources: KnowledgeSource[];
  /** The full chunk texts, for the instructions only. */
  context: string | null;
}

/** The names of the streams that found a chunk, best rank first (ties in stream order), comma-separated. */
function retrieverNames(ranks: Partial<Record<string, number>> | undefined): string {
  return Object.entries(ranks ?? {})
    .filter((e): e is [string, number] => typeof e[1] === 'number')
    .sort((a, b) => a[1] - b[1])
    .map(([name]) => name)
    .join(',');
}

/** Whitespace trimmed and collapsed, then cut to 200 characters (code points, never a half pair). */
function preview(text: string): string {
  const collapsed = text.replace(/\s+/gu, ' ').trim();
  const chars = [...collapsed];
  return chars.length <= PREVIEW_CHARS ? collapsed : chars.slice(0, PREVIEW_CHARS).join('');
}

export async function retrieveKnowledge(
  deps: { db: Db; index: VectorIndex; embedder: EmbeddingProvider },
  character: Character,
  query: string,
): Promise<KnowledgeContext> {
  const k = character.knowledge!;
  // A turn without text (a tool's output sent back, an image alone) has nothing to search for.
  if (query.trim() === '') return { query, sources: [], context: null };
  const found = await ragSearch(deps, { partner: k.partner, kb: k.kb, user_message: query.slice(0, 20_000) }, false, k.knowledgeBaseId);
  const hits = found.combined_results.slice(0, k.maxResults);
  const sources = hits.map((h) => ({
    file_id: h.document_id,
    filename: h.document_name,
    score: h.score,
    text: preview(h.text),
    attributes: { chunk_index: h.chunk_index, retrievers: retrieverNames(h.retrievers) },
  }));
  const context = hits.length
    ? [
        `Knowledge base excerpts for ${character.name}. Use them when they are relevant to the user's question; say so when they do not answer it.`,
        ...hits.map((h, i) => `[${i + 1}] ${h.document_name}:\n${h.text}`),
      ].join('\n\n')
    : null;
  return { query, sources, context };
}

/** The system instructions the model receives: character prompt, client instructions, knowledge. */
export function composeInstructions(parts: Array<string | null | undefined>): string | undefined {
  const kept = parts.filter((p): p is string => typeof p === 'string' && p.trim().length > 0);
  return kept.length ? kept.join('\n\n') : undefined;
}

const serviceId = (prefix: 'rs_service_' | 'fs_service_') => `${prefix}${crypto.randomBytes(12).toString('hex')}`;

/** Whether an input item is one of the service's visibility items (spec 6: recognised by their id prefixes), not the model's. */
export const isServiceItem = (item: unknown): boolean => {
  const id = item && typeof item === 'object' ? (item as { id?: unknown }).id : undefined;
  return typeof id === 'string' && (id.startsWith('rs_service_') || id.startsWith('fs_service_'));
};

/** The three visibility items of spec 2.4, ids fixed when the search starts. */
export function visibilityItems() {
  const searching = {
    id: serviceId('rs_service_'),
    type: 'reasoning' as const,
    summary: [{ type: 'summary_text' as const, text: 'Searching the knowledge base...' }],
  };
  const fileSearchId = serviceId('fs_service_');
  const foundId = serviceId('rs_service_');
  return {
    searching,
    fileSearch: (query: string, status: 'in_progress' | 'searching' | 'completed', results: KnowledgeSource[] | null) => ({
      id: fileSearchId,
      type: 'file_search_call' as const,
      status,
      queries: [query],
      results,
    }),
    found: (n: number) => ({
      id: foundId,
      type: 'reasoning' as const,
      summary: [{ type: 'summary_text' as const, text: `Found ${n} relevant documents, thinking...` }],
    }),
  };
}
