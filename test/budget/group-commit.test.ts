import assert from 'node:assert/strict';
import { GroupCommit } from '../../lib/platform/group-commit.js';

/**
 * The group commit under budget and quota admission (lib/platform/group-commit.ts): a lone request
 * goes at once, requests that arrive while a batch is in flight form the next batch in arrival
 * order, one answer each; a failed batch of several is tried again request by request when asked.
 */
describe('group commit', () => {
  /** A batch runner whose batches finish when the test says so. */
  function controlled(fail?: (item: number) => boolean) {
    const batches: number[][] = [];
    const gates: Array<() => void> = [];
    const runner = async (_key: string, items: number[]) => {
      batches.push(items);
      await new Promise<void>((resolve) => gates.push(resolve));
      if (fail && items.some(fail)) throw new Error(`batch with ${items.filter(fail).join(',')} failed`);
      return items.map((i) => i * 10);
    };
    const release = async () => {
      while (!gates.length) await new Promise((r) => setImmediate(r));
      gates.shift()!();
    };
    return { batches, runner, release };
  }

  it('sends a lone request at once and batches those that arrive meanwhile, in order', async () => {
    const c = controlled();
    const gc = new GroupCommit<string, number, number>(c.runner);
    const first = gc.submit('k', 1);
    const rest = [2, 3, 4].map((i) => gc.submit('k', i));
    assert.deepEqual(c.batches, [[1]], 'the first request does not wait for company');
    await c.release();
    assert.equal(await first, 10);
    await c.release();
    assert.deepEqual(await Promise.all(rest), [20, 30, 40]);
    assert.deepEqual(c.batches, [[1], [2, 3, 4]]);
  });

  it('keeps keys apart and bounds a batch', async () => {
    const c = controlled();
    const gc = new GroupCommit<string, number, number>(c.runner, { maxBatch: 2 });
    const a = [1, 2, 3, 4].map((i) => gc.submit('a', i));
    const b = gc.submit('b', 9);
    assert.deepEqual(c.batches, [[1], [9]], 'another key does not wait for the first');
    for (let i = 0; i < 4; i++) await c.release();
    assert.deepEqual(await Promise.all([...a, b]), [10, 20, 30, 40, 90]);
    assert.deepEqual(c.batches, [[1], [9], [2, 3], [4]]);
  });

  it('without retryAlone, a failed batch fails every request in it', async () => {
    const c = controlled((i) => i === 3);
    const gc = new GroupCommit<string, number, number>(c.runner);
    const first = gc.submit('k', 1);
    const rest = [2, 3, 4].map((i) => gc.submit('k', i).then((v) => v, (e: Error) => e.message));
    await c.release();
    await first;
    await c.release();
    assert.deepEqual(await Promise.all(rest), ['batch with 3 failed', 'batch with 3 failed', 'batch with 3 failed']);
  });

  it('with retryAlone, only the faulty request of a failed batch fails; the others are answered, in order', async () => {
    const c = controlled((i) => i === 3);
    const gc = new GroupCommit<string, number, number>(c.runner, { retryAlone: true });
    const first = gc.submit('k', 1);
    const rest = [2, 3, 4].map((i) => gc.submit('k', i).then((v) => v, (e: Error) => e.message));
    await c.release();
    await first;
    for (let i = 0; i < 4; i++) await c.release(); // the batch, then 2, 3 and 4 alone
    assert.deepEqual(await Promise.all(rest), [20, 'batch with 3 failed', 40]);
    assert.deepEqual(c.batches, [[1], [2, 3, 4], [2], [3], [4]]);
  });

  it('a lone request that fails is not tried again', async () => {
    const c = controlled(() => true);
    const gc = new GroupCommit<string, number, number>(c.runner, { retryAlone: true });
    const only = gc.submit('k', 7).then((v) => v, (e: Error) => e.message);
    await c.release();
    assert.equal(await only, 'batch with 7 failed');
    assert.deepEqual(c.batches, [[7]]);
  });
});
