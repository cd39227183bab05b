import assert from 'node:assert/strict';
import { VectorIndex, chunkClassFor } from '../../lib/providers/vector-index.js';
import { LocalSentenceEncoder } from '../../lib/providers/embeddings.js';
import { retrievalDefaults, streamNames } from '../../lib/retrieval/hybrid-search.js';
import { buildEvalSets, type EvalSet } from '../../scripts/retrieval-eval-sets.js';
import { CachedEmbeddings } from '../../bench/support/embedding-cache.js';
import { indexPart, partMetrics, runQueries, type IndexedPart } from '../../bench/support/retrieval-harness.js';
import { testStack } from '../support/stack.js';

/**
 * Issue #21's contract on data the defaults were not chosen on: on the held-out part of every
 * evaluation set (scripts/retrieval-eval-sets.ts, built here from Debian's python3-doc), indexed
 * and searched through the system's own code (bench/support/retrieval-harness.ts) with the
 * production defaults, the fused ranking (re-scoring included) is at least as good as the best
 * single stream (nDCG@10), and by the issue's goal of 0.05 better.
 * The same parts as `npm run eval:retrieval` (bench/RESULTS.md), each in a Weaviate class of its
 * own, so its numbers depend on the part alone (the benchmark's share the profile's class with the
 * other parts: BM25 nDCG@10 of python-docstrings 0.825 here against 0.812 there; with the chunks
 * earlier tests leave in that class it was 0.843, and the margin fell under the goal). Vectors of
 * the local encoder are cached in ~/.cache/dwb-eval, so only a machine's first run embeds.
 */
describe('retrieval quality on held-out evaluation sets', function () {
  this.timeout(600_000);
  const index = () => new VectorIndex(testStack().weaviateUrl);
  // The encoder in a thread of its own: on a machine's first run it embeds for minutes, and on the
  // event loop it would keep the idle connections to Weaviate from noticing that Weaviate closed them.
  const embedder = new CachedEmbeddings(new LocalSentenceEncoder({ threads: 1 }));
  const indexed: IndexedPart[] = [];
  let sets: EvalSet[] = [];

  before(() => {
    sets = buildEvalSets();
  });
  after(async () => {
    for (const part of indexed) await index().client.schema.classDeleter().withClassName(part.className).do();
  });

  for (const name of ['python-api', 'python-docstrings']) {
    it(`${name}: the fused ranking beats the best single stream by at least 0.05 nDCG@10 on the held-out part`, async () => {
      const set = sets.find((s) => s.name === name)!;
      const deps = { index: index(), embedder };
      // A class of its own: BM25's term statistics are a class's, and the other tests' documents
      // in the profile's class (whatever ran before) would move this part's numbers.
      const label = `${set.name}:heldout:test:${process.pid}`;
      const part = await indexPart(deps, label, set.heldout, undefined, chunkClassFor(`${embedder.profile.name} ${label}`));
      indexed.push(part);
      const runs = await runQueries(deps, part, set.heldout, retrievalDefaults);
      const m = partMetrics(runs, part);
      const report = Object.entries(m).map(([k, v]) => `${k} nDCG@10 ${v.ndcg10.toFixed(3)} MRR ${v.mrr.toFixed(3)} recall@50 ${v.recall50.toFixed(3)}`).join('\n');
      const best = Math.max(...streamNames.map((s) => m[s].ndcg10));
      assert.equal(runs.length, set.heldout.queries.length);
      const context = `${set.name} held-out (${set.heldout.documents.length} documents, ${runs.length} queries):\n${report}`;
      assert.ok(m.fused.ndcg10 >= best, context);
      assert.ok(m.fused.ndcg10 >= best + 0.05, `the goal of issue #21: fused at least 0.05 above the best stream\n${context}`);
    });
  }
});
