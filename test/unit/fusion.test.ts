import assert from 'node:assert/strict';
import { fuseByWeightedRrf } from '../../lib/kb/retrieval.js';
import type { SearchHit } from '../../lib/providers/vector-index.js';

const hit = (id: string): SearchHit => ({ id, documentId: 'd', documentName: 'n', chunkIndex: 0, text: id, score: 0 });

describe('weighted reciprocal rank fusion', () => {
  it('scores each chunk as the sum over streams of weight / (k + rank)', () => {
    const fused = fuseByWeightedRrf({ dense: [hit('a'), hit('b')], bm25: [hit('b'), hit('c')] }, { dense: 1, bm25: 2 }, 10, 10);
    const score = Object.fromEntries(fused.map((f) => [f.id, f.score]));
    assert.equal(score.a, 1 / 11);
    assert.equal(score.b, 1 / 12 + 2 / 11);
    assert.equal(score.c, 2 / 12);
    assert.deepEqual(fused.map((f) => f.id), ['b', 'c', 'a']);
    assert.deepEqual(fused[0]!.ranks, { dense: 2, bm25: 1 });
  });

  it('a zero weight silences a stream and top_k cuts the list', () => {
    const fused = fuseByWeightedRrf({ dense: [hit('a')], bm25: [hit('b'), hit('c')] }, { dense: 0, bm25: 1 }, 15, 2);
    assert.deepEqual(fused.map((f) => f.id), ['b', 'c']);
  });
});
