import { detectLanguage } from '../platform/language-detection.js';
import { EventLoopTurns } from '../platform/turns.js';
import type { ChunkRecord } from '../providers/vector-index.js';
import { chunkText, type Chunk } from './chunking.js';
import { bm25Document } from './language-analysis.js';
import { sparseVector } from './sparse-vector.js';

/**
 * What the index holds for a document's final rewritten content: its chunks, the text each chunk
 * is embedded and analysed as (its nearest heading, then its text), and each chunk's detected
 * language. The embed step and the retrieval evaluation (bench/retrieval-eval.ts) both index
 * through these functions, so what is measured is what is served.
 */
export interface PreparedDocument {
  chunks: Chunk[];
  /** Per chunk: the text that is embedded, analysed for BM25 and turned into the sparse vector. */
  embeddedText: string[];
  /** Per chunk: ISO 639-3 code of its language (`und`: too short to tell). */
  languages: string[];
}

/** Language detection takes ~1.5 ms a chunk: the event loop gets turns between chunks (a 10 MB text has 15,000). */
export async function prepareDocument(text: string): Promise<PreparedDocument> {
  const chunks = chunkText(text);
  const turns = new EventLoopTurns();
  const languages: string[] = [];
  for (const c of chunks) {
    languages.push(detectLanguage(c.text));
    await turns.give();
  }
  return { chunks, embeddedText: chunks.map(embeddedTextOf), languages };
}

/** The text a chunk is embedded and analysed as: its nearest heading, then its text. */
export const embeddedTextOf = (c: Chunk) => (c.heading ? `${c.heading}\n${c.text}` : c.text);

export interface DocumentIdentity {
  partnerId: string;
  knowledgeBaseId: string;
  documentId: string;
  documentName: string;
  embeddingProfile: string;
}

/** The index record of chunk `i` of a prepared document, with its dense vector. */
export function chunkRecord(doc: DocumentIdentity, prepared: PreparedDocument, i: number, denseVector: number[]): ChunkRecord {
  const c = prepared.chunks[i]!;
  const language = prepared.languages[i]!;
  const embedded = prepared.embeddedText[i]!;
  return {
    partnerId: doc.partnerId,
    knowledgeBaseId: doc.knowledgeBaseId,
    documentId: doc.documentId,
    documentName: doc.documentName,
    chunkIndex: c.index,
    text: c.text,
    heading: c.heading,
    section: c.section.map((h) => h.title).join(' › '),
    language,
    bm25Text: bm25Document(embedded, language),
    embeddingProfile: doc.embeddingProfile,
    denseVector,
    sparseVector: sparseVector(embedded, language),
  };
}

/** Chunk counts per language, as `embedding_bm25_language_counts` records them. */
export function languageCounts(prepared: PreparedDocument): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const l of prepared.languages) counts[l] = (counts[l] ?? 0) + 1;
  return counts;
}
