import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Db } from '../lib/platform/db.js';
import type { FileStorage } from '../lib/platform/storage.js';
import type { Config } from '../lib/platform/config.js';
import { reconcileDeletions, reconcileQueuedDocuments, restartStrandedDocument } from '../lib/knowledge/reconcile.js';
import { reconcileChannelSources } from '../lib/channels/sources.js';
import { removeExpiredAudioUploads } from '../lib/transcripts/uploads.js';
import { reconcilePageSize, type ReconcileRequest, type ReconcileRound } from '../lib/contracts/reconciler.js';

export interface ReconcilerActivityDeps {
  db: Db;
  storage: FileStorage;
  temporal: Client;
  config: Pick<Config, 'temporalTaskQueue'>;
}

/** The reconciler's one activity: a round over every kind of work that can be left without its workflow, and expired uploads. */
export function createReconcilerActivities({ db, storage, temporal, config }: ReconcilerActivityDeps) {
  const deps = { db, temporal, taskQueue: config.temporalTaskQueue };
  return {
    async reconcileStrandedWork({ graceSeconds, cursor, named }: { graceSeconds: number; cursor: string | null; named: ReconcileRequest }): Promise<ReconcileRound> {
      const heartbeat = () => Context.current().heartbeat();
      let restartedDocuments = 0;
      for (const id of named.documentIds ?? []) if (await restartStrandedDocument(deps, id)) restartedDocuments++;
      const queued = await reconcileQueuedDocuments(deps, { graceSeconds, cursor, limit: reconcilePageSize, onProgress: heartbeat });
      const restartedDeletions = await reconcileDeletions(deps, { graceSeconds, limit: reconcilePageSize });
      const restartedChannelSources = await reconcileChannelSources(deps, { graceSeconds, named: named.channelSourceIds ?? [], limit: reconcilePageSize });
      const removedUploads = await removeExpiredAudioUploads({ db, storage }, reconcilePageSize);
      return { cursor: queued.cursor, restartedDocuments: restartedDocuments + queued.restarted, restartedDeletions, restartedChannelSources, removedUploads };
    },
  };
}
