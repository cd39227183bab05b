import assert from 'node:assert/strict';
import { unique } from '../support/fixtures.js';
import { channelClient, useChannelSystem } from '../support/channels.js';

/**
 * A budget-blocked channel source checks again by itself after BUDGET_RECHECK_INTERVAL_MS, the
 * same setting budget-blocked documents follow, even when no `budgetChanged` signal comes.
 */
describe('video-channel folders: the budget re-check interval', function () {
  this.timeout(180_000);
  const recheckMs = 2000;
  const system = useChannelSystem({ BUDGET_RECHECK_INTERVAL_MS: String(recheckMs) });
  const c = channelClient(system);
  afterEach(() => c.cleanup());

  it('shows the next check at BUDGET_RECHECK_INTERVAL_MS and resumes by itself once budget is there, unsignalled', async () => {
    const channel = system.fake.addChannel({ handle: `recheck${Date.now()}`, videos: [{ title: 'Found on a re-check' }] });
    const k = await c.newKb({ character_limit: '0' });
    const name = unique('channel');
    const created = await c.createFolder(k, `@${channel.handle}`, {}, name);
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const blocked = await c.waitFor(k, name, 'the source to wait for budget', (e) => e.status === 'budget_blocked' && e.next_sync_at !== null);
    const wait = Date.parse(blocked.next_sync_at) - Date.now();
    assert.ok(wait <= recheckMs + 1000, `next_sync_at ${blocked.next_sync_at} is within the re-check interval, not the old 5 minutes`);

    // The limit is lifted behind the API's back: no budgetChanged signal is sent.
    const lifted = await system.api.deps.db.knowledgeBase.updateMany({ where: { name: k.kb, partner: { name: k.partner.name } }, data: { characterLimit: null } });
    assert.equal(lifted.count, 1);
    const synced = await c.waitFor(k, name, 'the source to find the budget on its own re-check', (e) => e.status === 'synced' && e.counts.imported === 1);
    assert.equal(synced.last_error, null);
  });
});
