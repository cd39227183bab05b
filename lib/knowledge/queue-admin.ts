import type { Client } from '@temporalio/client';
import type { Db } from '../platform/db.js';
import { isWorkflowRunning } from '../platform/temporal.js';
import { searchAttributes } from '../contracts/search-attributes.js';
import { documentPipelineWorkflowType, documentWorkflowId, progressQuery, retrySignal } from '../contracts/document-pipeline.js';
import type { QueueDeps } from './processing-requests.js';
import { processingErrorOf, processingStateColumns, type ProcessingState } from './state.js';

/**
 * The administrators' view of the queues (spec 4.5): a "queue" is the set of documents whose
 * `in_queues` names it (the durable marker in Postgres); a "job" is a document's running pipeline
 * workflow in Temporal.
 *
 * Which runs are jobs comes from Temporal's visibility (a run appears there a moment after it
 * starts). A job's status comes from its document row, the system of record that the document's
 * GET shows: visibility's copy of the `PipelineStatus` search attribute lags the row (a run writes
 * its budget block to the row, then updates its search attribute, then visibility indexes it), so
 * a view built on it could say `running` for a document that already shows `BUDGET_BLOCKED:`.
 */
const runningPipelines = `WorkflowType = '${documentPipelineWorkflowType}' AND ExecutionStatus = 'Running'`;

interface Job {
  workflow_id: string;
  document_id: string | null;
  partner: string | null;
  knowledge_base_id: string | null;
  status: string | null;
  budget_blocked: boolean;
  started_at: string | null;
}

type JobDocument = ProcessingState & { id: string; name: string; inQueues: string[]; embeddingStatus: string | null; embeddingError: string | null };

/**
 * A job's status: what its document shows (its processing state budget_blocked, or failed, or a
 * failed embedding), else the run's own search attribute for what only the workflow
 * knows (paused); a search attribute still saying budget_blocked or failed for a document that
 * shows no error lags a run that has moved on.
 */
function jobStatus(searchAttribute: string | null, doc: JobDocument | undefined): string | null {
  if (!doc) return searchAttribute;
  if (doc.processingState === 'budget_blocked') return 'budget_blocked';
  if (doc.processingState === 'failed' || doc.embeddingStatus === 'failed') return 'failed';
  return searchAttribute === 'budget_blocked' || searchAttribute === 'failed' ? 'running' : searchAttribute;
}

/** Document rows by id, read in pages (a bind-parameter list has a bound). */
async function jobDocuments(db: Db, ids: string[]): Promise<Map<string, JobDocument>> {
  const byId = new Map<string, JobDocument>();
  for (let i = 0; i < ids.length; i += 10_000) {
    const page = await db.document.findMany({ where: { id: { in: ids.slice(i, i + 10_000) } }, select: { id: true, name: true, inQueues: true, ...processingStateColumns, embeddingStatus: true, embeddingError: true } });
    for (const d of page) byId.set(d.id, d);
  }
  return byId;
}

async function listJobs(deps: { db: Db; temporal: Client }, limit: number): Promise<Array<{ job: Job; doc: JobDocument | undefined }>> {
  const listed: Array<Omit<Job, 'status' | 'budget_blocked'> & { searchStatus: string | null }> = [];
  for await (const wf of deps.temporal.workflow.list({ query: runningPipelines })) {
    const attrs = wf.typedSearchAttributes;
    listed.push({
      workflow_id: wf.workflowId,
      document_id: attrs.get(searchAttributes.documentId) ?? null,
      partner: attrs.get(searchAttributes.partner) ?? null,
      knowledge_base_id: attrs.get(searchAttributes.knowledgeBaseId) ?? null,
      searchStatus: attrs.get(searchAttributes.pipelineStatus) ?? null,
      started_at: wf.startTime.toISOString(),
    });
    if (listed.length >= limit) break;
  }
  const docs = await jobDocuments(deps.db, listed.flatMap((j) => (j.document_id ? [j.document_id] : [])));
  return listed.map(({ searchStatus, ...j }) => {
    const doc = j.document_id ? docs.get(j.document_id) : undefined;
    const status = jobStatus(searchStatus, doc);
    return { job: { ...j, status, budget_blocked: status === 'budget_blocked' }, doc };
  });
}

const queueNames = ['digitize', 'rewrite', 'embedding'];

/**
 * Documents per queue (their `in_queues` markers), and the documents not being deleted that are
 * budget_blocked, or failed or with a failed embedding: two grouped queries, shared by GET /api/queue
 * and /metrics so that both always agree.
 */
export async function documentCounts(db: Db): Promise<{ queues: Record<string, number>; budgetBlocked: number; failed: number }> {
  const [perQueue, [problems]] = await Promise.all([
    db.$queryRaw<Array<{ queue: string; documents: bigint }>>`SELECT q AS queue, count(*) AS documents FROM documents, unnest("inQueues") AS q GROUP BY q`,
    db.$queryRaw<Array<{ budget_blocked: bigint; failed: bigint }>>`
      SELECT count(*) FILTER (WHERE "processingState" = 'budget_blocked') AS budget_blocked,
             count(*) FILTER (WHERE "processingState" = 'failed' OR "embeddingStatus" = 'failed') AS failed
      FROM documents WHERE ("processingState" IS NOT NULL OR "embeddingStatus" = 'failed') AND "deletionRequestedAt" IS NULL`,
  ]);
  const queues: Record<string, number> = Object.fromEntries(queueNames.map((q) => [q, 0]));
  for (const row of perQueue) queues[row.queue] = Number(row.documents);
  return { queues, budgetBlocked: Number(problems?.budget_blocked ?? 0), failed: Number(problems?.failed ?? 0) };
}

async function queueMarkers(db: Db) {
  return db.document.findMany({ where: { NOT: { inQueues: { isEmpty: true } } }, select: { id: true, name: true, inQueues: true, knowledgeBaseId: true } });
}

/** GET /api/queue: documents per queue (durable markers) and pipeline jobs per status. */
export async function queueStatus(deps: QueueDeps) {
  const counts = await documentCounts(deps.db);
  const jobs = await listJobs(deps, 100_000);
  const byStatus: Record<string, number> = {};
  for (const { job } of jobs) byStatus[job.status ?? 'unknown'] = (byStatus[job.status ?? 'unknown'] ?? 0) + 1;
  return { queues: counts.queues, jobs: { total: jobs.length, by_status: byStatus }, budget_blocked_documents: counts.budgetBlocked };
}

/** GET /api/queue/jobs: running pipeline jobs, newest first, with their document's queue markers. */
export async function queueJobs(deps: QueueDeps, limit: number) {
  const jobs = await listJobs(deps, limit);
  return {
    jobs: jobs.map(({ job, doc }) => ({ ...job, document_name: doc?.name ?? null, in_queues: doc?.inQueues ?? [], processing_error: doc ? processingErrorOf(doc) : null, embedding_error: doc?.embeddingError ?? null })),
    limit,
  };
}

/** Keeps the items the check accepts, checking a few at a time. */
async function filterChecked<T>(items: T[], check: (item: T) => Promise<boolean>, concurrency = 8): Promise<T[]> {
  const kept = new Array<boolean>(items.length).fill(false);
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < items.length; i = next++) kept[i] = await check(items[i]!);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, lane));
  return items.filter((_, i) => kept[i]);
}

/** Markers whose document has no running pipeline, and running pipelines without markers, as visibility lists them. */
async function correlate(deps: QueueDeps) {
  const markers = await queueMarkers(deps.db);
  const jobs = (await listJobs(deps, 100_000)).map(({ job }) => job);
  const jobDocs = new Set(jobs.map((j) => j.document_id));
  const markedDocs = new Set(markers.map((m) => m.id));
  return {
    markers,
    jobs,
    orphanMarkers: markers.filter((m) => !jobDocs.has(m.id)),
    unmarkedJobs: jobs.filter((j) => j.document_id && !markedDocs.has(j.document_id)),
  };
}

/**
 * GET /api/queue/debug. A failed job waiting for `retry` has no marker by design (it is not queued).
 * Each mismatch is confirmed with Temporal itself (describe reads the run, not visibility) before
 * it is reported: a run that started or closed a moment ago is not a mismatch.
 */
export async function queueDebug(deps: QueueDeps) {
  const c = await correlate(deps);
  const running = (workflowId: string) => isWorkflowRunning(deps.temporal, workflowId);
  const [orphanMarkers, unmarkedJobs] = await Promise.all([
    filterChecked(c.orphanMarkers, async (m) => !(await running(documentWorkflowId(m.id)))),
    filterChecked(c.unmarkedJobs, (j) => running(j.workflow_id)),
  ]);
  return {
    marker_count: c.markers.length,
    job_count: c.jobs.length,
    orphan_markers: orphanMarkers.map((m) => ({ document_id: m.id, name: m.name, in_queues: m.inQueues })),
    unmarked_jobs: unmarkedJobs.map((j) => ({ workflow_id: j.workflow_id, document_id: j.document_id, status: j.status })),
  };
}

/**
 * DELETE /api/queue/clear-orphans: clears the markers of documents whose pipeline is not running.
 * Each candidate is verified against Temporal once more before its marker goes, so a pipeline
 * that started during the scan keeps its marker.
 */
export async function clearOrphanMarkers(deps: QueueDeps) {
  const { orphanMarkers } = await correlate(deps);
  const cleared: string[] = [];
  for (const m of orphanMarkers) {
    if (await isWorkflowRunning(deps.temporal, documentWorkflowId(m.id))) continue;
    const res = await deps.db.document.updateMany({ where: { id: m.id, inQueues: { equals: m.inQueues } }, data: { inQueues: [] } });
    if (res.count > 0) cleared.push(m.id);
  }
  return { status: 'cleared' as const, cleared: cleared.length, document_ids: cleared };
}

/**
 * POST /api/queue/retry-failed: sends `retry` to every pipeline whose rewrite step failed: the
 * document shows `REWRITE_FAILED:` / `REWRITE_REJECTED:`, and its run is waiting at the rewrite
 * step with that error. The run records the error on the document before its own status turns
 * `failed`, so a run whose progress still says `running` with the document's error is failing and
 * gets the signal too (it then retries as soon as it waits).
 */
export async function retryFailedRewrites(deps: QueueDeps) {
  const failed = await deps.db.document.findMany({
    where: { deletionRequestedAt: null, processingState: 'failed', OR: [{ failureMessage: { startsWith: 'REWRITE_FAILED:' } }, { failureMessage: { startsWith: 'REWRITE_REJECTED:' } }] },
    select: { id: true, failureMessage: true },
  });
  const retried: string[] = [];
  for (const { id, failureMessage } of failed) {
    const handle = deps.temporal.workflow.getHandle(documentWorkflowId(id));
    const progress = await handle.query(progressQuery).catch(() => null);
    const failing = progress?.currentStep === 'rewrite' && (progress.status === 'failed' || (progress.status === 'running' && progress.lastError === failureMessage));
    if (!failing) continue;
    await handle.signal(retrySignal);
    retried.push(id);
  }
  return { status: 'queued' as const, retried: retried.length, document_ids: retried };
}
