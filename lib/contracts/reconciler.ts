import { defineSignal } from '@temporalio/workflow';

/**
 * Contract of the `reconciler` workflow (ID `reconciler`, one per deployment, started by every
 * worker): it finds work whose workflow is gone or never started and starts it again, idempotently
 * (workflow IDs are fixed). Every `intervalSeconds`, or at once on `reconcileNow`:
 * - documents queued (`in_queues` not empty) without a running `document-<id>`: their recorded
 *   request runs again from the first step still queued (a crash between row and start, a
 *   budget-blocked or failed run that an operator terminated);
 * - documents, folders and knowledge bases marked for deletion without a running deletion;
 * - channel sources without a running `channel-source-<id>`;
 * - and, housekeeping with no workflow of its own, files sent to POST /v2/upload that have expired.
 * Only work untouched for `graceSeconds` is examined (a request that is about to start its
 * workflow is left alone), except what a `reconcileNow` signal names.
 */
export const reconcilerWorkflowType = 'reconciler';
export const reconcilerWorkflowId = 'reconciler';

export interface ReconcilerInput {
  intervalSeconds: number;
  graceSeconds: number;
  /** Where the scan of queued documents goes on (keyset by document id); null: from the start. */
  cursor?: string | null;
  /** Work a `reconcileNow` signal named that the previous run had not looked at yet. */
  pending?: ReconcileRequest;
}

/** Work to look at now: documents and channel sources whose signal found no workflow. */
export interface ReconcileRequest {
  documentIds?: string[];
  channelSourceIds?: string[];
}

export const reconcileNowSignal = defineSignal<[ReconcileRequest?]>('reconcileNow');

export interface ReconcileRound {
  /** The next round's cursor over queued documents (null: the scan wrapped around). */
  cursor: string | null;
  restartedDocuments: number;
  restartedDeletions: number;
  restartedChannelSources: number;
  /** Expired /v2/upload files removed. */
  removedUploads: number;
}

/** Queued documents examined per round; a larger backlog is covered over the next rounds. */
export const reconcilePageSize = 500;
