import type { Client } from '@temporalio/client';
import type { Db } from '../platform/db.js';
import type { Metrics } from '../platform/metrics.js';
import type { Category } from '../contracts/budget-admission.js';
import { budgetSweeperWorkflowType } from '../contracts/budget-sweeper.js';
import { channelSourceWorkflowType } from '../contracts/channel-source.js';
import { deletionWorkflowType } from '../contracts/deletion.js';
import { dialogAnalysisWorkflowType } from '../contracts/dialog-analysis.js';
import { documentPipelineWorkflowType } from '../contracts/document-pipeline.js';
import { legacyCompletionWorkflowType } from '../contracts/legacy-completion.js';
import { transcriptWorkflowType } from '../contracts/transcript.js';
import { vendorSyncWorkflowType } from '../contracts/vendor-sync.js';
import { voiceJobWorkflowType } from '../contracts/voice-job.js';
import { reconcilerWorkflowType } from '../contracts/reconciler.js';
import { documentCounts } from './queue-admin.js';

/**
 * The gauges operators watch (docs/operations.md, "Metrics"), computed when /metrics is
 * scraped: from Postgres (two grouped scans of the documents, one count of uncertain
 * reservations) and from Temporal's visibility (one count per workflow type, grouped by execution
 * status). Both readings are cached by lib/platform/metrics.ts.
 */

/** Workflow types counted one by one; executions of any other type are counted as `other`. */
export const countedWorkflowTypes = [
  documentPipelineWorkflowType,
  deletionWorkflowType,
  vendorSyncWorkflowType,
  budgetSweeperWorkflowType,
  legacyCompletionWorkflowType,
  dialogAnalysisWorkflowType,
  channelSourceWorkflowType,
  transcriptWorkflowType,
  voiceJobWorkflowType,
  reconcilerWorkflowType,
];

const uncertainCategories: Category[] = ['digitization', 'rewrite', 'embedding', 'discovery', 'other'];

interface WorkflowCount {
  type: string;
  status: string;
  count: number;
}

/**
 * Open executions, and those closed within the window, by type and status. The window is what
 * keeps a reading cheap: visibility answers a count by visiting every execution it counts (SQL
 * visibility checks each row's namespace division, which no index holds), so counting the closed
 * ones of the whole retention made a reading grow with all the work ever done, and on the dev
 * server, whose one SQLite connection serves all of Temporal, held up every workflow start while
 * it ran (bench/RESULTS.md). In SQL visibility (the dev server's SQLite, docker-compose.temporal.yml's
 * PostgreSQL) an open execution's CloseTime compares as the far future, so `CloseTime > since` is
 * the open ones plus those closed since, one range of the type's index.
 */
async function workflowExecutions(temporal: Client, closedWindowSeconds: number): Promise<WorkflowCount[]> {
  const since = new Date(Date.now() - closedWindowSeconds * 1000).toISOString();
  const byStatus = async (filter: string) => {
    const counted = await temporal.workflow.count(`${filter} AND CloseTime > '${since}' GROUP BY ExecutionStatus`);
    return new Map(counted.groups.map((g) => [String(g.groupValues[0]), g.count]));
  };
  const [other, ...perType] = await Promise.all([
    byStatus(`WorkflowType NOT IN (${countedWorkflowTypes.map((type) => `'${type}'`).join(', ')})`),
    ...countedWorkflowTypes.map((type) => byStatus(`WorkflowType = '${type}'`)),
  ]);
  const counts: WorkflowCount[] = [];
  countedWorkflowTypes.forEach((type, i) => {
    const statuses = perType[i]!;
    // Every type has a Running series, 0 included, so that alerts and graphs see a value.
    if (!statuses.has('Running')) counts.push({ type, status: 'Running', count: 0 });
    for (const [status, count] of statuses) counts.push({ type, status, count });
  });
  for (const [status, count] of other!) counts.push({ type: 'other', status, count });
  return counts;
}

async function uncertainOperations(db: Db): Promise<Record<string, number>> {
  const groups = await db.budgetReservation.groupBy({ by: ['category'], where: { status: 'uncertain' }, _count: { _all: true } });
  const counts: Record<string, number> = Object.fromEntries(uncertainCategories.map((c) => [c, 0]));
  for (const g of groups) counts[g.category] = g._count._all;
  return counts;
}

/** Declares the scrape-time gauges of the knowledge service on a process's metrics. */
export function registerOperationalMetrics(metrics: Metrics, deps: { db: Db; temporal: Client; closedWindowSeconds: number }): void {
  const postgres = metrics.source('postgres', async () => {
    const [documents, uncertain] = await Promise.all([documentCounts(deps.db), uncertainOperations(deps.db)]);
    return { ...documents, uncertain };
  });
  const temporal = metrics.source('temporal', () => workflowExecutions(deps.temporal, deps.closedWindowSeconds));

  metrics.gauge({
    name: 'dwb_queue_documents',
    help: 'Documents per queue: documents whose in_queues names it (digitize, rewrite, embedding)',
    labelNames: ['queue'],
    from: postgres,
    set: (gauge, r) => Object.entries(r.queues).forEach(([queue, n]) => gauge.set({ queue }, n)),
  });
  metrics.gauge({
    name: 'dwb_budget_blocked_documents',
    help: 'Documents (not being deleted) whose processing_error is BUDGET_BLOCKED:, waiting for budget capacity',
    from: postgres,
    set: (gauge, r) => gauge.set(r.budgetBlocked),
  });
  metrics.gauge({
    name: 'dwb_failed_documents',
    help: 'Documents (not being deleted) showing any other processing_error: failed work waiting for a fix or a retry',
    from: postgres,
    set: (gauge, r) => gauge.set(r.failed),
  });
  metrics.gauge({
    name: 'dwb_budget_uncertain_operations',
    help: 'Budget reservations in uncertain (provider outcome unknown) by category; they block capped work of their KB until resolved',
    labelNames: ['category'],
    from: postgres,
    set: (gauge, r) => Object.entries(r.uncertain).forEach(([category, n]) => gauge.set({ category }, n)),
  });
  metrics.gauge({
    name: 'dwb_workflow_executions',
    help: "Workflow executions in Temporal's visibility by workflow type and execution status: open ones, and those closed within METRICS_CLOSED_WINDOW_SECONDS",
    labelNames: ['type', 'status'],
    from: temporal,
    set: (gauge, counts) => counts.forEach(({ type, status, count }) => gauge.set({ type, status }, count)),
  });
}
