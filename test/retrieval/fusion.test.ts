import assert from 'node:assert/strict';
import { fuseVariants, minMaxNormalised, replacedQuery, retrievalDefaults, streamNames, type StreamWeights, type Streams } from '../../lib/retrieval/hybrid-search.js';
import type { SearchHit } from '../../lib/providers/vector-index.js';

const hit = (id: string, score = 0): SearchHit => ({ id, documentId: 'd', documentName: 'n', chunkIndex: 0, text: id, score });
const scored = (...pairs: Array<[string, number]>) => pairs.map(([id, s]) => hit(id, s));
const close = (a: number, b: number) => Math.abs(a - b) < 1e-12;
const hits = (...ids: string[]) => ids.map(hit);
/** One query's streams fused (the original variant alone). */
const fuseOne = (streams: Streams, weights: StreamWeights, rrfK: number, topK: number) => fuseVariants([{ name: 'original', weight: 1, streams }], weights, rrfK, topK);

describe('weighted reciprocal rank fusion', () => {
  it('scores each chunk as the sum over streams of weight / (k + rank)', () => {
    const fused = fuseOne({ dense: hits('a', 'b'), bm25: hits('b', 'c') }, { dense: 1, bm25: 2 }, 10, 10);
    const score = Object.fromEntries(fused.map((f) => [f.id, f.score]));
    assert.equal(score.a, 1 / 11);
    assert.equal(score.b, 1 / 12 + 2 / 11);
    assert.equal(score.c, 2 / 12);
    assert.deepEqual(fused.map((f) => f.id), ['b', 'c', 'a']);
    assert.deepEqual(fused[0]!.ranks.original, { dense: 2, bm25: 1 });
  });

  it('fuses three streams into the hand-computed ranking', () => {
    // k = 15; weights dense 1, sparse 0.5, bm25 1.
    // a: dense 1, sparse 3           → 1/16 + 0.5/18           = 0.090278
    // b: dense 2, bm25 1             → 1/17 + 1/16             = 0.121324
    // c: dense 3, sparse 1, bm25 2   → 1/18 + 0.5/16 + 1/17    = 0.145425
    // d: sparse 2                    → 0.5/17                  = 0.029412
    // e: bm25 3                      → 1/18                    = 0.055556
    const fused = fuseOne({ dense: hits('a', 'b', 'c'), sparse: hits('c', 'd', 'a'), bm25: hits('b', 'c', 'e') }, { dense: 1, sparse: 0.5, bm25: 1 }, 15, 10);
    assert.deepEqual(fused.map((f) => f.id), ['c', 'b', 'a', 'e', 'd']);
    assert.ok(Math.abs(fused[0]!.score - (1 / 18 + 0.5 / 16 + 1 / 17)) < 1e-12);
    assert.deepEqual(fused[0]!.ranks.original, { dense: 3, sparse: 1, bm25: 2 });
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
    const fused = fuseOne({ dense: hits('a'), bm25: hits('c', 'b') }, { dense: 0, bm25: 1 }, 15, 2);
    assert.deepEqual(fused.map((f) => f.id), ['c', 'b']);
    const tie = fuseOne({ dense: hits('q'), bm25: hits('p') }, { dense: 1, bm25: 1 }, 15, 5);
    assert.deepEqual(tie.map((f) => f.id), ['p', 'q']);
  });

  it('the replaced variant turns second-person references into the character name', () => {
    assert.equal(replacedQuery('What do you think about your garden?', 'Anna'), "What do Anna think about Anna's garden?");
    assert.equal(replacedQuery('garden tips', 'Anna'), null, 'nothing to replace: no second variant');
    assert.equal(replacedQuery('what do you say', null), null);
  });

  it('score fusion: each stream normalised over its own candidates, weighted and summed; contributions add up to the score', () => {
    // dense cosines 0.9, 0.8, 0.5 -> 1, 0.75, 0; BM25 scores 12, 3 -> 1, 0.
    const streams: Streams = { dense: scored(['a', 0.9], ['b', 0.8], ['c', 0.5]), bm25: scored(['c', 12], ['b', 3]) };
    const fused = fuseVariants([{ name: 'original', weight: 1, streams }], { dense: 0.5, bm25: 1 }, 15, 10, 'score');
    const byId = Object.fromEntries(fused.map((f) => [f.id, f]));
    assert.ok(close(byId.a!.score, 0.5));
    assert.ok(close(byId.b!.score, 0.5 * 0.75 + 0));
    assert.ok(close(byId.c!.score, 0 + 1));
    assert.deepEqual(fused.map((f) => f.id), ['c', 'a', 'b']);
    for (const f of fused) {
      const sum = Object.values(f.contributions.original ?? {}).reduce((x, y) => x + y, 0);
      assert.ok(close(sum, f.score), 'the contributions are the score');
    }
    assert.deepEqual(byId.c!.streamScores.original, { dense: 0.5, bm25: 12 });
    assert.deepEqual(byId.c!.ranks.original, { dense: 3, bm25: 1 });
  });

  it('score fusion lets a stream that is sure of its first hit outweigh one whose candidates score alike', () => {
    // Rank-only fusion cannot tell these apart: BM25 ranks x first by a wide margin, dense ranks y
    // first by a hair. With equal weights RRF ties them (broken by ID); score fusion prefers x.
    const streams: Streams = { dense: scored(['y', 0.61], ['x', 0.6], ['z', 0.2]), bm25: scored(['x', 20], ['y', 2], ['z', 1]) };
    const rrf = fuseVariants([{ name: 'original', weight: 1, streams }], { dense: 1, bm25: 1 }, 15, 3, 'rrf');
    assert.ok(close(rrf[0]!.score, rrf[1]!.score), 'a tie for RRF');
    const score = fuseVariants([{ name: 'original', weight: 1, streams }], { dense: 1, bm25: 1 }, 15, 3, 'score');
    assert.equal(score[0]!.id, 'x');
    assert.ok(score[0]!.score > score[1]!.score + 0.5);
  });

  it('normalisation: a single hit or equal scores count fully; the defaults are score fusion with the weakest stream lightest', () => {
    assert.deepEqual(minMaxNormalised(scored(['a', 3])), [1]);
    assert.deepEqual(minMaxNormalised(scored(['a', 2], ['b', 2])), [1, 1]);
    assert.deepEqual(minMaxNormalised([]), []);
    assert.equal(retrievalDefaults.fusion, 'score');
    assert.ok(streamNames.every((s) => retrievalDefaults.weights.dense <= retrievalDefaults.weights[s]), 'the local dense model has the smallest weight');
  });
});
