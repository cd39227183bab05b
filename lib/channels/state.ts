import type { Client } from '@temporalio/client';
import type { Config } from '../platform/config.js';
import type { Db } from '../platform/db.js';
import { Prisma } from '../platform/db.js';
import type { ChannelSourceState, ChannelSourceStatus, ChannelStepResult } from '../contracts/channel-source.js';
import { budgetBlockedMessage } from '../contracts/budget-admission.js';

/**
 * The record of a channel source as its workflow moves it (docs/api/knowledge-bases.md,
 * "Source and video statuses"): what it shows (status, last_error, next_sync_at) and where its scan
 * stands. Postgres is the record; the workflow reads it at every turn of its loop and the
 * activities write it.
 */
export interface ChannelDeps {
  db: Db;
  temporal: Client;
  taskQueue: string;
  config: Pick<Config, 'videoDataApi' | 'channels' | 'videoPlatformBaseUrl' | 'urlFetchAllowPrivate' | 'urlFetchAllowLoopback' | 'budgetRecheckIntervalMs'>;
}

/** What a step of the worker may use of its activity: liveness and cancellation. */
export interface StepContext {
  heartbeat(): void;
  signal: AbortSignal;
}

/** Data API requests one paid step sends at most: its admission bound is this × the unit price. */
export const RESOLVE_MAX_REQUESTS = 2;
/** Pages one discovery step reads at most (each page: playlistItems.list + videos.list), + one existence check. */
export const DISCOVERY_PAGES_PER_STEP = 10;
export const DISCOVER_MAX_REQUESTS = DISCOVERY_PAGES_PER_STEP * 2 + 1;

const idleStatuses: ReadonlySet<string> = new Set(['synced', 'incomplete', 'error', 'duplicate']);

/** Dollars of `requests` quota units at the configured price, exact; "0" when unpriced. */
export function unitCost(config: ChannelDeps['config'], requests: number): string {
  return config.videoDataApi.unitPriceUsd ? new Prisma.Decimal(config.videoDataApi.unitPriceUsd).times(requests).toFixed() : '0';
}

/** The source as its workflow sees it, or null once it is gone or being deleted (the workflow then ends). */
export async function loadChannelState(deps: ChannelDeps, sourceId: string): Promise<ChannelSourceState | null> {
  const s = await deps.db.channelSource.findUnique({ where: { id: sourceId }, include: { folder: true, knowledgeBase: true } });
  if (!s || s.deletionRequestedAt || s.folder.deletionRequestedAt || s.knowledgeBase.deletionRequestedAt) return null;
  return {
    knowledgeBaseId: s.knowledgeBaseId,
    enabled: s.enabled,
    status: s.status as ChannelSourceStatus,
    idleStatus: (s.lastOutcome && idleStatuses.has(s.lastOutcome) ? s.lastOutcome : 'pending') as ChannelSourceStatus,
    resolved: s.channelId !== null,
    claimed: s.claimedChannelId !== null,
    scanning: s.scanStartedAt !== null,
    discoveryDone: s.discoveryDone,
    nextSyncAt: s.nextSyncAt?.toISOString() ?? null,
    lastError: s.lastError,
    resolveBoundUsd: unitCost(deps.config, RESOLVE_MAX_REQUESTS),
    discoverBoundUsd: unitCost(deps.config, DISCOVER_MAX_REQUESTS),
  };
}

/** PATCH enabled (and the pause / resume signals): paused stops future scans; resumed shows `pending` until the workflow settles it. */
export async function setChannelEnabled(db: Db, sourceId: string, enabled: boolean): Promise<void> {
  if (enabled) await db.channelSource.updateMany({ where: { id: sourceId, enabled: false }, data: { enabled: true, status: 'pending' } });
  else await db.channelSource.updateMany({ where: { id: sourceId }, data: { enabled: false, status: 'paused' } });
}

export async function recordChannelStatus(db: Db, sourceId: string, status: ChannelSourceStatus): Promise<void> {
  await db.channelSource.updateMany({ where: { id: sourceId, enabled: true }, data: { status } });
}

/** A new complete scan: discovery from the first page. */
export async function beginChannelScan(db: Db, sourceId: string): Promise<void> {
  await db.channelSource.updateMany({
    where: { id: sourceId, scanStartedAt: null },
    data: { scanStartedAt: new Date(), scanCursor: null, discoveryDone: false, status: 'syncing', lastError: null, lastErrorCode: null },
  });
}

/** A step is running: the source shows `syncing` (a budget block or a failure being retried is over). */
export async function markSyncing(db: Db, sourceId: string): Promise<void> {
  await db.channelSource.updateMany({ where: { id: sourceId, enabled: true, status: { not: 'syncing' } }, data: { status: 'syncing', lastError: null, lastErrorCode: null } });
}

/** The source waits for budget: `budgetChanged` wakes it, or BUDGET_RECHECK_INTERVAL_MS, its next_sync_at. */
export async function markChannelBudgetBlocked(deps: Pick<ChannelDeps, 'db' | 'config'>, sourceId: string, reason: string, detail: string): Promise<ChannelStepResult> {
  const recheckInMs = deps.config.budgetRecheckIntervalMs;
  await deps.db.channelSource.updateMany({
    where: { id: sourceId, enabled: true },
    data: { status: 'budget_blocked', lastError: budgetBlockedMessage(reason, detail), lastErrorCode: 'budget', nextSyncAt: new Date(Date.now() + recheckInMs) },
  });
  return { outcome: 'blocked', reason, detail, recheckInMs };
}

/**
 * A failure that time may cure (quota, rate limit, outage, timeout): the scan is `incomplete` and
 * goes on from its saved page after a doubling backoff.
 */
export async function recordRetry(deps: ChannelDeps, sourceId: string, code: string, message: string): Promise<ChannelStepResult> {
  const updated = await deps.db.channelSource.update({ where: { id: sourceId }, data: { failures: { increment: 1 } } });
  const { retryInitialSeconds, retryMaxSeconds } = deps.config.channels;
  const retryInMs = 1000 * Math.min(retryInitialSeconds * 2 ** Math.min(updated.failures - 1, 30), retryMaxSeconds);
  await deps.db.channelSource.updateMany({
    where: { id: sourceId, enabled: true },
    data: { status: 'incomplete', lastError: message, lastErrorCode: code, nextSyncAt: new Date(Date.now() + retryInMs) },
  });
  return { outcome: 'retry', message, retryInMs };
}

/**
 * The scan ends without finishing (channel not found or gone, credentials, a duplicate): the
 * source shows it until the next regular scan or a sync tries again.
 */
export async function stopScan(
  deps: ChannelDeps,
  sourceId: string,
  status: 'error' | 'duplicate',
  code: string,
  message: string,
  extra: { duplicateOfId?: string | null } = {},
): Promise<ChannelStepResult> {
  const source = await deps.db.channelSource.findUniqueOrThrow({ where: { id: sourceId }, select: { enabled: true } });
  await deps.db.channelSource.update({
    where: { id: sourceId },
    data: {
      status: source.enabled ? status : 'paused',
      lastOutcome: status,
      lastError: message,
      lastErrorCode: code,
      scanStartedAt: null,
      scanCursor: null,
      discoveryDone: false,
      failures: 0,
      nextSyncAt: new Date(Date.now() + 1000 * deps.config.channels.scanIntervalSeconds),
      ...extra,
    },
  });
  return { outcome: 'stopped', status };
}

/**
 * The scan is over: discovery complete and every new video imported (`synced`), or stopped by the
 * partner's max_documents (`incomplete`, tried again at the next scan). The next complete scan
 * starts one interval after this one started.
 */
export async function finishScan(deps: ChannelDeps, sourceId: string, outcome: { status: 'synced' } | { status: 'incomplete'; code: string; message: string }): Promise<ChannelStepResult> {
  const source = await deps.db.channelSource.findUniqueOrThrow({ where: { id: sourceId } });
  const now = Date.now();
  const started = source.scanStartedAt?.getTime() ?? now;
  await deps.db.channelSource.update({
    where: { id: sourceId },
    data: {
      status: source.enabled ? outcome.status : 'paused',
      lastOutcome: outcome.status,
      lastError: outcome.status === 'synced' ? null : outcome.message,
      lastErrorCode: outcome.status === 'synced' ? null : outcome.code,
      lastSyncAt: outcome.status === 'synced' ? new Date(now) : source.lastSyncAt,
      nextSyncAt: new Date(Math.max(started + 1000 * deps.config.channels.scanIntervalSeconds, now)),
      scanStartedAt: null,
      scanCursor: null,
      discoveryDone: false,
      failures: 0,
    },
  });
  // Step records only serve resumption and exact counting of a scan in flight.
  await deps.db.channelScanStep.deleteMany({ where: { sourceId, createdAt: { lt: new Date(now - 7 * 86400_000) } } });
  return { outcome: 'finished' };
}
