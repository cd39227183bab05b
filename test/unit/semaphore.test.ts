import assert from 'node:assert/strict';
import { Semaphore } from '../../lib/platform/semaphore.js';

describe('Semaphore', () => {
  it('lets `size` holders in at once and the others in arrival order as places free', async () => {
    const places = new Semaphore(2);
    const order: number[] = [];
    let inside = 0;
    let most = 0;
    const gates = Array.from({ length: 6 }, () => {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      return { promise, resolve };
    });
    const tasks = gates.map((gate, i) =>
      places.run(async () => {
        order.push(i);
        most = Math.max(most, ++inside);
        await gate.promise;
        inside--;
      }),
    );
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, [0, 1], 'two in, four waiting');
    for (const i of [1, 0, 2, 3, 4, 5]) {
      gates[i]!.resolve();
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(tasks);
    assert.deepEqual(order, [0, 1, 2, 3, 4, 5]);
    assert.equal(most, 2);
  });

  it('a task that throws gives its place back', async () => {
    const places = new Semaphore(1);
    await assert.rejects(places.run(() => Promise.reject(new Error('boom'))), /boom/);
    assert.equal(await places.run(() => Promise.resolve('next')), 'next');
  });
});
