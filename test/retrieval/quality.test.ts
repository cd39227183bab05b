import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { loadConfig } from '../../lib/platform/config.js';
import { createServices, type Services } from '../../lib/services.js';
import { retrievalDefaults, searchKnowledgeBase, streamNames, type StreamName } from '../../lib/retrieval/hybrid-search.js';
import { chunkClassFor } from '../../lib/providers/vector-index.js';
import { systemEnv } from '../support/stack.js';
import { indexText } from '../support/retrieval.js';

/**
 * Retrieval quality on the labelled corpus in test/fixtures/retrieval-corpus.json, indexed exactly
 * as the embedding step indexes documents (lib/retrieval/indexing.ts: same chunking, analysis,
 * vectors and Weaviate class) and searched with the production defaults (chosen on the tuning
 * parts of the evaluation sets, not on this corpus; test/retrieval/heldout.test.ts holds them to
 * held-out data). The fused ranking must beat each single stream on
 * mean nDCG@10, and each stream must win the kind of query it exists for.
 */
interface Corpus {
  documents: Array<{ id: string; text: string }>;
  queries: Array<{ q: string; relevant: Record<string, number> }>;
}
const corpus = JSON.parse(fs.readFileSync(new URL('../fixtures/retrieval-corpus.json', import.meta.url), 'utf8')) as Corpus;

/** nDCG@10 over documents (a document counts at the rank of its first chunk). */
export function ndcgAt10(rankedDocs: string[], relevant: Record<string, number>): number {
  const seen = [...new Set(rankedDocs)].slice(0, 10);
  const dcg = seen.reduce((s, d, i) => s + ((2 ** (relevant[d] ?? 0) - 1) / Math.log2(i + 2)), 0);
  const ideal = Object.values(relevant).sort((a, b) => b - a).slice(0, 10).reduce((s, g, i) => s + (2 ** g - 1) / Math.log2(i + 2), 0);
  return ideal === 0 ? 0 : dcg / ideal;
}

describe('retrieval quality on a labelled corpus', function () {
  this.timeout(180_000);
  let services: Services;
  const knowledgeBaseId = crypto.randomUUID();
  const names = new Map<string, string>();

  before(async () => {
    services = createServices(loadConfig(systemEnv()), 'test');
    const className = chunkClassFor(services.embedder.profile.name);
    for (const doc of corpus.documents) {
      const documentId = crypto.randomUUID();
      names.set(documentId, doc.id);
      await indexText(services, { partnerId: 'quality-test', knowledgeBaseId, documentId, documentName: doc.id }, doc.text);
    }
    await services.index.waitForIndexing(60_000, undefined, [className]);
  });

  after(async () => {
    for (const id of names.keys()) await services.index.deleteDocumentChunks(id);
    await services.db.$disconnect();
  });

  it('the fused ranking beats each single stream on mean nDCG@10', async () => {
    const totals: Record<StreamName | 'fused', number> = { dense: 0, sparse: 0, bm25: 0, fused: 0 };
    const perQuery: string[] = [];
    for (const { q, relevant } of corpus.queries) {
      const outcome = await searchKnowledgeBase(services, { knowledgeBaseId, languages: ['eng', 'deu'] }, q, retrievalDefaults);
      const docsOf = (hits: { documentId: string }[]) => hits.map((h) => names.get(h.documentId)!);
      const row: Record<string, number> = {};
      for (const s of streamNames) totals[s] += row[s] = ndcgAt10(docsOf(outcome.variants[0]!.streams[s]), relevant);
      totals.fused += row.fused = ndcgAt10(docsOf(outcome.combined), relevant);
      perQuery.push(`${q.padEnd(55)} ${Object.entries(row).map(([k, v]) => `${k}=${v.toFixed(2)}`).join(' ')}`);
    }
    const n = corpus.queries.length;
    const mean = Object.fromEntries(Object.entries(totals).map(([k, v]) => [k, v / n])) as typeof totals;
    const report = `${perQuery.join('\n')}\nmean: ${JSON.stringify(Object.fromEntries(Object.entries(mean).map(([k, v]) => [k, Number(v.toFixed(3))])))}`;
    for (const s of streamNames) assert.ok(mean.fused > mean[s], `fused ${mean.fused.toFixed(3)} must beat ${s} ${mean[s].toFixed(3)}\n${report}`);
  });

  it('BM25 finds an exact rare identifier, dense a paraphrase, sparse a word inside a compound', async () => {
    const top = async (q: string, s: StreamName) => {
      const outcome = await searchKnowledgeBase(services, { knowledgeBaseId, languages: ['eng', 'deu'] }, q, retrievalDefaults);
      return names.get(outcome.variants[0]!.streams[s][0]!.documentId);
    };
    assert.equal(await top('QX-88', 'bm25'), 'error-e4471');
    assert.equal(await top('I cannot log in because I forgot my credentials', 'dense'), 'password');
    // A compound that occurs nowhere whole: BM25 has no term for it, the n-grams of "Kündigung" match.
    assert.equal(await top('Kündigungsregeln', 'sparse'), 'kuendigung');
    const bm25 = await searchKnowledgeBase(services, { knowledgeBaseId, languages: ['eng', 'deu'] }, 'Kündigungsregeln', retrievalDefaults);
    assert.equal(bm25.variants[0]!.streams.bm25.length, 0, 'BM25 finds nothing for it');
  });
});
