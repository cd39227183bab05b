import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { RecentLookups } from '../../lib/platform/recent-lookups.js';

/**
 * The cache of recent lookups (lib/platform/recent-lookups.ts) behind quota and partner keys: an
 * entry in use is looked up again before it expires, after the request that noticed it rather
 * than while that request is served, and what the lookup no longer finds is not served again.
 */
describe('recent lookups', function () {
  this.timeout(20_000);
  const cacheSeconds = 3;
  /** Past half of an entry's life (a refresh is due), well before its end. */
  const pastHalfLife = 1_700;

  function source(initial: Record<string, string | null>) {
    const values = { ...initial };
    const calls: string[] = [];
    const lookUp = (key: string) => () => {
      calls.push(key);
      return Promise.resolve(values[key] ?? null);
    };
    return { values, calls, lookUp };
  }

  it('an entry in use is looked up again soon after the requests that noticed it, not while they are served, and then served anew', async () => {
    const cache = new RecentLookups<string>();
    const s = source({ a: 'a1', b: 'b1', c: 'c1' });
    for (const k of ['a', 'b', 'c']) assert.equal(await cache.find(k, cacheSeconds, s.lookUp(k)), `${k}1`);
    assert.deepEqual(s.calls, ['a', 'b', 'c']);
    assert.equal(await cache.find('a', cacheSeconds, s.lookUp('a')), 'a1', 'served from the cache');
    assert.equal(s.calls.length, 3, 'no lookup in the first half of its life');

    await sleep(pastHalfLife);
    Object.assign(s.values, { a: 'a2', b: 'b2', c: 'c2' });
    const served = await Promise.all(['a', 'b', 'c'].map((k) => cache.find(k, cacheSeconds, s.lookUp(k))));
    assert.deepEqual(served, ['a1', 'b1', 'c1'], 'the requests are answered from the cache, without waiting');
    assert.equal(s.calls.length, 3, 'and no lookup is made while they are served');
    await sleep(300);
    assert.deepEqual(s.calls.slice(3).sort(), ['a', 'b', 'c'], 'each due entry is looked up once, soon after');
    for (const k of ['a', 'b', 'c']) assert.equal(await cache.find(k, cacheSeconds, s.lookUp(k)), `${k}2`);
    assert.equal(s.calls.length, 6, 'the refreshed entries are served without another lookup');
  });

  it('what the refresh no longer finds (a key revoked elsewhere) is looked up again by the next request, and not found', async () => {
    const cache = new RecentLookups<string>();
    const s = source({ k: 'v' });
    assert.equal(await cache.find('k', cacheSeconds, s.lookUp('k')), 'v');
    await sleep(pastHalfLife);
    s.values.k = null;
    assert.equal(await cache.find('k', cacheSeconds, s.lookUp('k')), 'v', 'served while its refresh is due');
    await sleep(300);
    assert.equal(s.calls.length, 2, 'refreshed');
    assert.equal(await cache.find('k', cacheSeconds, s.lookUp('k')), null);
    assert.equal(s.calls.length, 3, 'the next request looked it up itself');
  });

  it('an entry known lately is served without a lookup, unverified past its cache time, until its request confirms it; one not known is looked up', async () => {
    const cache = new RecentLookups<string>({ knownSeconds: 60 });
    const s = source({ k: 'v', old: 'o' });
    assert.deepEqual(await cache.findKnown('k', 1, s.lookUp('k')), { value: 'v', verified: true }, 'looked up the first time');
    await sleep(600);
    assert.deepEqual(await cache.findKnown('k', 1, s.lookUp('k')), { value: 'v', verified: true }, 'past half its cache time');
    await sleep(500);
    assert.deepEqual(s.calls, ['k'], 'and not looked up ahead: its request confirms it');
    assert.deepEqual(await cache.findKnown('k', 1, s.lookUp('k')), { value: 'v', verified: false }, 'past its cache time: served unverified');
    assert.deepEqual(s.calls, ['k'], 'without a lookup');
    assert.equal(await cache.find('k', 1, s.lookUp('k')), 'v');
    assert.deepEqual(s.calls, ['k', 'k'], 'a request that does not check it itself looks it up');
    await sleep(1_100);
    cache.confirm('k', 1);
    assert.deepEqual(await cache.findKnown('k', 1, s.lookUp('k')), { value: 'v', verified: true }, 'confirmed by its request: verified again');
    assert.equal(s.calls.length, 2);
    // A request that did not check it after all (a hold lent from a slice) has it refreshed when due.
    cache.refreshIfDue('k', 1, s.lookUp('k'));
    await sleep(600);
    assert.equal(s.calls.length, 2, 'not in the first half of its life');
    cache.refreshIfDue('k', 1, s.lookUp('k'));
    await sleep(200);
    assert.deepEqual(s.calls, ['k', 'k', 'k'], 'past it: looked up in the background');
    assert.deepEqual(await cache.findKnown('k', 1, s.lookUp('k')), { value: 'v', verified: true }, 'and served verified anew');

    await sleep(1_100);
    assert.deepEqual(await cache.findKnown('k', 1, s.lookUp('k'), () => false), { value: 'v', verified: true }, 'one the caller will not take unverified is looked up');
    assert.equal(s.calls.length, 4);

    const strict = new RecentLookups<string>();
    assert.equal(await strict.find('old', 1, s.lookUp('old')), 'o');
    await sleep(1_100);
    assert.deepEqual(await strict.findKnown('old', 1, s.lookUp('old')), { value: 'o', verified: true }, 'without knownSeconds: looked up again');
    assert.deepEqual(s.calls.slice(4), ['old', 'old']);
  });
});
