import type { Db } from '../platform/db.js';
import type { Chunk } from './chunking.js';
import { findKnowledgeBase } from '../knowledge/lookup.js';

/**
 * Embedding manifests and the table of contents projected from them. The embedding step records,
 * per document, the heading outline of what it indexed with the chunk range under each heading;
 * GET /api/toc/{partner}/{kb} nests those outlines under folders and documents. The TOC therefore
 * shows what retrieval can actually find, not what a document might contain.
 */
export interface ManifestSection {
  level: number;
  title: string;
  /** First and last chunk index under this heading (subsections included). */
  chunk_start: number;
  chunk_end: number;
}

export interface EmbeddingManifest {
  version: 1;
  embedding_profile: string;
  chunk_count: number;
  /** Chunks that come before the first heading. */
  preamble_chunks: number;
  sections: ManifestSection[];
}

export function buildManifest(chunks: Chunk[], _languages: string[], profileName: string): EmbeddingManifest {
  const sections: ManifestSection[] = [];
  const open: ManifestSection[] = [];
  for (const chunk of chunks) {
    // Headings of this chunk's trail that are not open yet start here; deeper open ones that are
    // no longer on the trail have ended.
    chunk.section.forEach((h, depth) => {
      const existing = open[depth];
      if (existing && existing.title === h.title && existing.level === h.level) return;
      open.length = depth;
      const s = { level: h.level, title: h.title, chunk_start: chunk.index, chunk_end: chunk.index };
      sections.push(s);
      open[depth] = s;
    });
    open.length = chunk.section.length;
    for (const s of open) s.chunk_end = chunk.index;
  }
  const firstWithHeading = chunks.findIndex((c) => c.section.length > 0);
  return {
    version: 1,
    embedding_profile: profileName,
    chunk_count: chunks.length,
    preamble_chunks: firstWithHeading === -1 ? chunks.length : firstWithHeading,
    sections,
  };
}

export interface TocNode {
  title: string;
  level: number;
  chunk_start: number;
  chunk_end: number;
  children: TocNode[];
}

/** Nests a manifest's flat outline by heading level. */
export function nestSections(sections: ManifestSection[]): TocNode[] {
  const roots: TocNode[] = [];
  const stack: TocNode[] = [];
  for (const s of sections) {
    const node: TocNode = { title: s.title, level: s.level, chunk_start: s.chunk_start, chunk_end: s.chunk_end, children: [] };
    while (stack.length && stack[stack.length - 1]!.level >= s.level) stack.pop();
    (stack.length ? stack[stack.length - 1]!.children : roots).push(node);
    stack.push(node);
  }
  return roots;
}

export async function tableOfContents(db: Db, partner: string, kbName: string, includeStatus: boolean) {
  const { kb } = await findKnowledgeBase(db, partner, kbName);
  const [folders, documents] = await Promise.all([
    db.folder.findMany({ where: { knowledgeBaseId: kb.id, deletionRequestedAt: null }, orderBy: { name: 'asc' } }),
    db.document.findMany({ where: { knowledgeBaseId: kb.id, deletionRequestedAt: null }, orderBy: { name: 'asc' } }),
  ]);
  const entry = (d: (typeof documents)[number]) => {
    const manifest = d.embeddingManifest as EmbeddingManifest | null;
    return {
      document_id: d.id,
      name: d.name,
      chunk_count: manifest?.chunk_count ?? 0,
      sections: manifest ? nestSections(manifest.sections) : [],
      ...(includeStatus
        ? {
            embedding_status: d.embeddingStatus,
            embedding_error: d.embeddingError,
            embedded_at: d.embeddedAt?.toISOString() ?? null,
            embedding_chunk_count: d.embeddingChunkCount,
            embedding_bm25_language_counts: d.embeddingBm25LanguageCounts ?? null,
            in_queues: d.inQueues,
          }
        : {}),
    };
  };
  // Without include_status the TOC lists what is indexed; with it, every document and its state.
  const listed = includeStatus ? documents : documents.filter((d) => d.embeddingManifest !== null && d.embeddingStatus === 'success');
  return {
    knowledge_base: kb.name,
    folders: folders.map((f) => ({ name: f.name, documents: listed.filter((d) => d.folderId === f.id).map(entry) })),
    ...(includeStatus ? { embedding_status: kb.deletionRequestedAt ? 'delete_pending' : kb.embeddingStatus } : {}),
  };
}
