import { condition, makeContinueAsNewFunc, proxyActivities, setHandler, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import {
  budgetChangedSignal,
  pauseSignal,
  progressQuery,
  resumeSignal,
  syncNowSignal,
  type ChannelSourceCarry,
  type ChannelSourceInput,
  type ChannelSourceProgress,
  type ChannelSourceStatus,
  type ChannelStepResult,
} from '../lib/contracts/channel-source.js';
import { searchAttributes } from '../lib/contracts/search-attributes.js';
import { budgetBlockedMessage } from '../lib/contracts/budget-admission.js';

/**
 * One video-channel source for as long as it exists (contract: lib/contracts/channel-source.ts).
 * Each turn of the loop reads the source from Postgres, then either waits (paused, or until the
 * next scan is due) or runs one step of the current scan: resolve the alias, discover a batch of
 * pages, or import new videos. Resolution and discovery are paid steps, admitted by the KB budget
 * first (`budget_blocked` without headroom, woken by `budgetChanged`); provider failures back off
 * and resume at the saved page (`incomplete`). After a finished scan, and whenever the history
 * grows long, the workflow continues as new, so its history stays bounded for months.
 */
const quick = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/** Data API steps and imports: provider failures come back as outcomes; only infrastructure errors throw (and are retried). */
const steps = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  // A worker lost mid-step is noticed within this time; the step resumes elsewhere from its record.
  heartbeatTimeout: '15 seconds',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/** The re-check of a budget block in histories recorded before its activity said how long (BUDGET_RECHECK_INTERVAL_MS). */
const RECORDED_BUDGET_RECHECK_MS = 5 * 60_000;
/** Continue as new well before Temporal's history limits (and whenever it suggests so). */
const HISTORY_EVENTS_LIMIT = 5_000;

export async function channelSource(input: ChannelSourceInput): Promise<void> {
  const carry: ChannelSourceCarry = input.carry ?? { syncRequested: true, generation: 0 };
  const ref = { sourceId: input.sourceId };
  let wake = false;
  let budgetChanged = false;
  let enabledRequest: boolean | null = null;
  let paidSteps = 0;
  const progress: ChannelSourceProgress = { status: 'pending', phase: 'idle', lastError: null, nextCheckAt: null, generation: carry.generation };

  setHandler(syncNowSignal, () => {
    carry.syncRequested = true;
    wake = true;
  });
  setHandler(pauseSignal, () => {
    enabledRequest = false;
    wake = true;
  });
  setHandler(resumeSignal, () => {
    enabledRequest = true;
    wake = true;
  });
  setHandler(budgetChangedSignal, () => {
    budgetChanged = true;
    wake = true;
  });
  setHandler(progressQuery, () => progress);

  let shown: string | null = null;
  const show = (status: ChannelSourceStatus, phase: ChannelSourceProgress['phase']) => {
    progress.status = status;
    progress.phase = phase;
    if (shown === status) return;
    shown = status;
    upsertSearchAttributes([
      { key: searchAttributes.jobStatus, value: status },
      { key: searchAttributes.budgetBlocked, value: status === 'budget_blocked' },
    ]);
  };

  /** Waits for a signal (or the time, if given); the next turn reads the source again. */
  const waitFor = async (ms: number | null, until: () => boolean = () => wake) => {
    progress.nextCheckAt = ms === null ? null : new Date(Date.now() + ms).toISOString();
    if (ms === null) await condition(until);
    else await condition(until, Math.max(ms, 1));
    progress.nextCheckAt = null;
  };

  /** The next run carries the pending sync request and the current search attributes. */
  const continueAsNew = () =>
    makeContinueAsNewFunc<typeof channelSource>({ typedSearchAttributes: workflowInfo().typedSearchAttributes })({
      ...input,
      carry: { ...carry, generation: carry.generation + 1 },
    });

  for (;;) {
    const info = workflowInfo();
    if (info.continueAsNewSuggested || info.historyLength > HISTORY_EVENTS_LIMIT) {
      await continueAsNew();
    }
    wake = false;
    if (enabledRequest !== null) {
      // The CLI's pause / resume signals and PATCH converge on the same record.
      const enabled: boolean = enabledRequest;
      enabledRequest = null;
      await quick.setChannelEnabled({ ...ref, enabled });
    }
    const source = await quick.loadChannelSource(ref);
    if (!source) return; // deleted, or being deleted
    progress.lastError = source.lastError;
    if (!source.enabled) {
      show('paused', 'idle');
      await waitFor(null);
      continue;
    }

    const due = carry.syncRequested || source.scanning || source.nextSyncAt === null || Date.now() >= Date.parse(source.nextSyncAt);
    if (!due) {
      if (source.status !== source.idleStatus) await quick.recordChannelStatus({ ...ref, status: source.idleStatus });
      show(source.idleStatus, 'idle');
      await waitFor(Date.parse(source.nextSyncAt!) - Date.now());
      continue;
    }
    if (!source.scanning) {
      // A sync asked for during a scan is served by the next one.
      carry.syncRequested = false;
      await quick.beginChannelScan(ref);
    }

    let result: ChannelStepResult;
    if (source.resolved && !source.claimed) {
      show('syncing', 'resolving');
      result = await quick.claimChannel(ref);
    } else if (!source.resolved || !source.discoveryDone) {
      const kind = source.resolved ? 'discover' : 'resolve';
      const operationKey = `${info.workflowId}/${info.runId}/${kind}/${++paidSteps}`;
      budgetChanged = false;
      const admission = await quick.reserveBudget({
        knowledgeBaseId: source.knowledgeBaseId,
        operationKey,
        workflowId: info.workflowId,
        category: 'discovery',
        bound: { dollars: kind === 'resolve' ? source.resolveBoundUsd : source.discoverBoundUsd },
        requireHeadroom: true,
      });
      if (!admission.admitted) {
        result = await quick.markChannelBudgetBlocked({ ...ref, reason: admission.reason, detail: admission.detail });
      } else {
        show('syncing', kind === 'resolve' ? 'resolving' : 'discovering');
        result = kind === 'resolve' ? await steps.resolveChannel({ ...ref, operationKey }) : await steps.discoverChannelPages({ ...ref, operationKey });
      }
    } else {
      show('syncing', 'importing');
      budgetChanged = false;
      result = await steps.importChannelVideos(ref);
    }

    switch (result.outcome) {
      case 'progress':
        break;
      case 'blocked':
        show('budget_blocked', 'waiting');
        progress.lastError = budgetBlockedMessage(result.reason, result.detail);
        // Re-checked on budgetChanged (limits raised, capacity freed), any other signal, or by itself.
        await waitFor(result.recheckInMs ?? RECORDED_BUDGET_RECHECK_MS, () => wake || budgetChanged);
        break;
      case 'retry':
        show('incomplete', 'waiting');
        progress.lastError = result.message;
        await waitFor(result.retryInMs);
        break;
      case 'stopped':
        show(result.status, 'idle');
        break;
      case 'finished':
        // One scan per run: the history of the next one starts empty.
        await continueAsNew();
    }
  }
}
