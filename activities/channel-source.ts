import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Services } from '../lib/services.js';
import type { ChannelStepResult } from '../lib/contracts/channel-source.js';
import {
  beginChannelScan,
  loadChannelState,
  markChannelBudgetBlocked,
  recordChannelStatus,
  setChannelEnabled,
  type ChannelDeps,
  type StepContext,
} from '../lib/channels/state.js';
import { claimChannel, discoverChannelPages, resolveChannel } from '../lib/channels/discovery.js';
import { importChannelVideos } from '../lib/channels/imports.js';
import type { ChannelSourceStatus } from '../lib/contracts/channel-source.js';

/**
 * The side effects of the `channelSource` workflow (contract: lib/contracts/channel-source.ts).
 * Each is idempotent: status writes are plain updates, paid steps resume from their step record,
 * imports are guarded by the video's status and the document's fixed workflow ID.
 */
export function createChannelSourceActivities({ db, temporal, config }: Pick<Services, 'db' | 'config'> & { temporal: Client }) {
  const deps: ChannelDeps = { db, temporal, taskQueue: config.temporalTaskQueue, config };
  const step = (): StepContext => {
    const ctx = Context.current();
    return { heartbeat: () => ctx.heartbeat(), signal: ctx.cancellationSignal };
  };

  return {
    loadChannelSource: ({ sourceId }: { sourceId: string }) => loadChannelState(deps, sourceId),
    setChannelEnabled: ({ sourceId, enabled }: { sourceId: string; enabled: boolean }) => setChannelEnabled(db, sourceId, enabled),
    recordChannelStatus: ({ sourceId, status }: { sourceId: string; status: ChannelSourceStatus }) => recordChannelStatus(db, sourceId, status),
    beginChannelScan: ({ sourceId }: { sourceId: string }) => beginChannelScan(db, sourceId),
    markChannelBudgetBlocked: ({ sourceId, reason, detail }: { sourceId: string; reason: string; detail: string }) => markChannelBudgetBlocked(deps, sourceId, reason, detail),
    claimChannel: ({ sourceId }: { sourceId: string }): Promise<ChannelStepResult> => claimChannel(deps, sourceId),
    resolveChannel: ({ sourceId, operationKey }: { sourceId: string; operationKey: string }) => resolveChannel(deps, sourceId, operationKey, step()),
    discoverChannelPages: ({ sourceId, operationKey }: { sourceId: string; operationKey: string }) => discoverChannelPages(deps, sourceId, operationKey, step()),
    importChannelVideos: ({ sourceId }: { sourceId: string }) => importChannelVideos(deps, sourceId, step()),
  };
}
