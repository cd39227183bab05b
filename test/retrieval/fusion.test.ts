import assert from 'node:assert/strict';
import { fuseByWeightedRrf, fuseVariants, replacedQuery } from '../../lib/kb/retrieval.js';
import type { SearchHit } from '../../lib/providers/vector-index.js';

const hit = (id: string): SearchHit => ({ id, documentId: 'd', documentName: 'n', chunkIndex: 0, text: id, score: 0 });
const hits = (...ids: string[]) => ids.map(hit);

describe('weighted reciprocal rank fusion', () => {
  it('scores each chunk as the sum over streams of weight / (k + rank)', () => {
    const fused = fuseByWeightedRrf({ dense: hits('a', 'b'), bm25: hits('b', 'c') }, { dense: 1, bm25: 2 }, 10, 10);
    const score = Object.fromEntries(fused.map((f) => [f.id, f.score]));
    assert.equal(score.a, 1 / 11);
    assert.equal(score.b, 1 / 12 + 2 / 11);
    assert.equal(score.c, 2 / 12);
    assert.deepEqual(fused.map((f) => f.id), ['b', 'c', 'a']);
    assert.deepEqual(fused[0]!.streamRanks, { dense: 2, bm25: 1 });
  });

  it('fuses three streams into the hand-computed ranking', () => {
    // k = 15; weights dense 1, sparse 0.5, bm25 1.
    // a: dense 1, sparse 3           → 1/16 + 0.5/18           = 0.090278
    // b: dense 2, bm25 1             → 1/17 + 1/16             = 0.121324
    // c: dense 3, sparse 1, bm25 2   → 1/18 + 0.5/16 + 1/17    = 0.145425
    // d: sparse 2                    → 0.5/17                  = 0.029412
    // e: bm25 3                      → 1/18                    = 0.055556
    const fused = fuseByWeightedRrf({ dense: hits('a', 'b', 'c'), sparse: hits('c', 'd', 'a'), bm25: hits('b', 'c', 'e') }, { dense: 1, sparse: 0.5, bm25: 1 }, 15, 10);
    assert.deepEqual(fused.map((f) => f.id), ['c', 'b', 'a', 'e', 'd']);
    assert.ok(Math.abs(fused[0]!.score - (1 / 18 + 0.5 / 16 + 1 / 17)) < 1e-12);
    assert.deepEqual(fused[0]!.streamRanks, { dense: 3, sparse: 1, bm25: 2 });
  });

  it('weights query variants: original and replaced streams add up with their own weights', () => {
    // k = 1: original (w 1): dense x, y; replaced (w 0.5): dense y, z.
    // x = 1/2 = 0.5; y = 1/3 + 0.5/2 = 0.5833; z = 0.5/3 = 0.1667
    const fused = fuseVariants(
      [
        { name: 'original', weight: 1, streams: { dense: hits('x', 'y') } },
        { name: 'replaced', weight: 0.5, streams: { dense: hits('y', 'z') } },
      ],
      { dense: 1, sparse: 1, bm25: 1 },
      1,
      10,
    );
    assert.deepEqual(fused.map((f) => f.id), ['y', 'x', 'z']);
    assert.ok(Math.abs(fused[0]!.score - (1 / 3 + 0.5 / 2)) < 1e-12);
    assert.deepEqual(fused[0]!.ranks, { original: { dense: 2 }, replaced: { dense: 1 } });
  });

  it('a zero weight silences a stream, ties break by chunk ID and top_k cuts the list', () => {
    const fused = fuseByWeightedRrf({ dense: hits('a'), bm25: hits('c', 'b') }, { dense: 0, bm25: 1 }, 15, 2);
    assert.deepEqual(fused.map((f) => f.id), ['c', 'b']);
    const tie = fuseByWeightedRrf({ dense: hits('q'), bm25: hits('p') }, { dense: 1, bm25: 1 }, 15, 5);
    assert.deepEqual(tie.map((f) => f.id), ['p', 'q']);
  });

  it('the replaced variant turns second-person references into the character name', () => {
    assert.equal(replacedQuery('What do you think about your garden?', 'Anna'), "What do Anna think about Anna's garden?");
    assert.equal(replacedQuery('garden tips', 'Anna'), null, 'nothing to replace: no second variant');
    assert.equal(replacedQuery('what do you say', null), null);
  });
});
