import { defineQuery, defineSignal } from '@temporalio/workflow';

/**
 * Contract of the `channelSource` workflow: one long-lived execution per video-channel source (ID
 * `channel-source-<source uuid>`, the `id` of its folder_details entry). It loops: wait until a
 * scan is due, then resolve the channel, discover its uploads page by page and import new videos
 * newest first, each discovery step admitted by the KB budget; it continues as new after every
 * finished scan so its history stays bounded. Imported by the API (start, signal), the workflow
 * and its activities.
 */
export const channelSourceWorkflowType = 'channelSource';
export const channelSourceWorkflowId = (sourceId: string) => `channel-source-${sourceId}`;

export type ChannelSourceStatus = 'pending' | 'syncing' | 'synced' | 'incomplete' | 'budget_blocked' | 'paused' | 'error' | 'duplicate';
export type ChannelVideoStatus = 'pending' | 'deferred' | 'imported' | 'duplicate' | 'suppressed';
export const channelVideoStatuses: readonly ChannelVideoStatus[] = ['pending', 'deferred', 'imported', 'duplicate', 'suppressed'];

export interface ChannelSourceInput {
  sourceId: string;
  knowledgeBaseId: string;
  partner: string;
  /** State carried across continue-as-new. */
  carry?: ChannelSourceCarry;
}

export interface ChannelSourceCarry {
  /** A sync was asked for and not served yet (a new source: its first scan at once). */
  syncRequested: boolean;
  /** How many times this source's workflow has continued as new. */
  generation: number;
}

/** What the workflow is doing; `temporal workflow query --type progress`. */
export interface ChannelSourceProgress {
  status: ChannelSourceStatus;
  phase: 'idle' | 'resolving' | 'discovering' | 'importing' | 'waiting';
  lastError: string | null;
  /** When the workflow next looks on its own (next scan, retry, budget re-check); null: only a signal wakes it. */
  nextCheckAt: string | null;
  generation: number;
}

/** A complete scan now (ignored while paused; coalesced into one more scan while one runs). */
export const syncNowSignal = defineSignal('syncNow');
/** Stops future scans (PATCH enabled=false). */
export const pauseSignal = defineSignal('pause');
/** Scans again (PATCH enabled=true). */
export const resumeSignal = defineSignal('resume');
/** Re-checks a budget-blocked source now (sent when limits are raised or capacity freed). */
export const budgetChangedSignal = defineSignal('budgetChanged');
export const progressQuery = defineQuery<ChannelSourceProgress>('progress');

/** The source as the workflow sees it at the start of each turn of its loop. */
export interface ChannelSourceState {
  knowledgeBaseId: string;
  enabled: boolean;
  status: ChannelSourceStatus;
  /** What the source shows while no scan is due. */
  idleStatus: ChannelSourceStatus;
  /** The channel ID is known. */
  resolved: boolean;
  /** This source owns its channel in the KB (false for a duplicate). */
  claimed: boolean;
  scanning: boolean;
  discoveryDone: boolean;
  nextSyncAt: string | null;
  lastError: string | null;
  /** Admission bound of one discovery step: its most requests × the unit price (decimal string). */
  resolveBoundUsd: string;
  discoverBoundUsd: string;
}

/**
 * The result of one step. The activity has already written what the source shows; the workflow
 * decides what comes next: go on, wait for budget, back off, or (scan finished) continue as new.
 */
export type ChannelStepResult =
  | { outcome: 'progress' }
  | {
      outcome: 'blocked';
      reason: string;
      detail: string;
      /** How long to wait for `budgetChanged` before checking again: the worker's BUDGET_RECHECK_INTERVAL_MS (absent in older histories). */
      recheckInMs?: number;
    }
  | { outcome: 'retry'; message: string; retryInMs: number }
  | { outcome: 'stopped'; status: ChannelSourceStatus }
  | { outcome: 'finished' };
