import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { Db } from '../db.js';
import { AppError, conflict, notFound } from '../errors.js';
import type { FileStorage } from '../storage.js';
import { documentFiles } from '../storage.js';
import { isWorkflowRunning, workflowIds } from '../temporal.js';
import { searchAttributes } from '../search-attributes.js';
import { queueOfStep, type PipelineStep } from '../../activities/documents.js';
import type { DocumentPipelineProgress } from '../../workflows/document-pipeline.js';
import { findKnowledgeBase } from './lookup.js';
import { startDocumentPipeline } from './pipeline.js';
import { resolveContentType, type RequestedContentType } from './rewrite.js';

/**
 * Processing on request (spec 4.5: queue/process, bulk rewrite) and the administrators' view of
 * the queues. A "queue" is the set of documents whose `in_queues` names it (the durable marker in
 * Postgres); a "job" is the document's running pipeline workflow in Temporal.
 */
export interface QueueDeps {
  db: Db;
  storage: FileStorage;
  temporal: Client;
  taskQueue: string;
}

export interface RewriteOptions {
  contentType: RequestedContentType;
  personName?: string | null;
}

type DocumentRow = NonNullable<Awaited<ReturnType<Db['document']['findUnique']>>>;

/** The steps that follow a successful digitization, from the document's own flags. */
function followUpSteps(doc: { autoRewrite: boolean; useOriginalAsRewritten: boolean }): PipelineStep[] {
  if (doc.useOriginalAsRewritten) return ['finalize_original', 'embed'];
  if (doc.autoRewrite) return ['rewrite', 'embed'];
  return [];
}

/**
 * Starts a pipeline for a document. A pipeline that waits for a retry after a failed step is
 * superseded (terminated, then replaced) by the new request; one that is running, paused or
 * budget-blocked answers 409, so one document never has two pipelines (a run that has finished its
 * steps is let close by startDocumentPipeline).
 */
async function startPipeline(deps: QueueDeps, doc: DocumentRow, partner: string, steps: PipelineStep[], options: { requestCharacterLimit?: number | null; rewrite?: RewriteOptions }) {
  const input = { documentId: doc.id, knowledgeBaseId: doc.knowledgeBaseId, partner, steps, requestCharacterLimit: options.requestCharacterLimit ?? null, rewrite: options.rewrite };
  const previous = { inQueues: doc.inQueues, processingError: doc.processingError };
  await deps.db.document.update({ where: { id: doc.id }, data: { inQueues: [...new Set([...doc.inQueues, queueOfStep[steps[0]!]])], processingError: null } });
  try {
    try {
      return await startDocumentPipeline(deps.temporal, deps.taskQueue, input);
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      const handle = deps.temporal.workflow.getHandle(workflowIds.document(doc.id));
      const progress = await handle.query<DocumentPipelineProgress>('progress').catch(() => null);
      if (progress?.status !== 'failed') throw conflict(`document ${doc.id} is being processed (${progress?.status ?? 'running'}); try again when it has finished`);
      await handle.terminate('superseded by a new processing request');
      return await startDocumentPipeline(deps.temporal, deps.taskQueue, input);
    }
  } catch (err) {
    await deps.db.document.update({ where: { id: doc.id }, data: previous });
    if (err instanceof AppError) throw err;
    throw new AppError('unavailable', `could not start processing: ${(err as Error).message}`);
  }
}

async function findDocument(db: Db, knowledgeBaseId: string, documentId: string) {
  const doc = await db.document.findFirst({ where: { id: documentId, knowledgeBaseId, deletionRequestedAt: null } });
  if (!doc) throw notFound(`document ${documentId} does not exist in this knowledge base`);
  return doc;
}

export interface ProcessRequest {
  action: 'digitize' | 'rewrite';
  partner: string;
  kb: string;
  documentId: string;
  contentType: RequestedContentType;
  personName?: string;
  characterLimit?: number;
}

/**
 * POST /api/queue/process. `digitize` extracts the original again (a fresh extraction, not the
 * cache) under the character budget, then continues as the document's flags say (auto_rewrite,
 * use_original_as_rewritten). `rewrite` rewrites the digitized content and embeds the result.
 */
export async function queueProcess(deps: QueueDeps, req: ProcessRequest) {
  const { kb, partner } = await findKnowledgeBase(deps.db, req.partner, req.kb);
  if (kb.deletionRequestedAt) throw conflict(`knowledge base ${JSON.stringify(req.kb)} is being deleted`);
  const doc = await findDocument(deps.db, kb.id, req.documentId);
  let steps: PipelineStep[];
  if (req.action === 'digitize') {
    if (!doc.fileOriginal && !doc.url) throw conflict('the document has no original file or URL to digitize');
    steps = ['digitize', ...followUpSteps(doc)];
  } else {
    if (!doc.fileDigitized) throw conflict('the document has no digitized content to rewrite; digitize it first');
    steps = ['rewrite', 'embed'];
  }
  const rewrite = { contentType: req.contentType, personName: req.personName ?? null };
  const workflowId = await startPipeline(deps, doc, partner.name, steps, { requestCharacterLimit: req.action === 'digitize' ? req.characterLimit : null, rewrite });
  // The new extraction replaces the cache only once the pipeline is certainly this request's.
  if (req.action === 'digitize' && doc.fileOriginal) await deps.storage.removePrefix(documentFiles.extracted(doc.id));
  return {
    status: 'queued' as const,
    action: req.action,
    document_id: doc.id,
    workflow_id: workflowId,
    steps,
    content_type: steps.includes('rewrite') ? resolveContentType(req.contentType, doc) : null,
  };
}

export interface BulkRewriteRequest {
  partner: string;
  kb: string;
  folder?: string;
  skipRewritten: boolean;
  contentType: RequestedContentType;
  personName?: string;
}

type BulkResult = { document_id: string; name: string; status: 'queued' | 'skipped'; reason?: 'not_digitized' | 'already_rewritten' | 'in_progress' };

/**
 * Bulk rewrite of a folder or a whole KB: every document with digitized content is rewritten and
 * embedded, except (with skip_rewritten, the default) those that have final rewritten content.
 * Each document is admitted by the budget on its own when its rewrite runs.
 */
export async function bulkRewrite(deps: QueueDeps, req: BulkRewriteRequest) {
  const { kb, partner } = await findKnowledgeBase(deps.db, req.partner, req.kb);
  if (kb.deletionRequestedAt) throw conflict(`knowledge base ${JSON.stringify(req.kb)} is being deleted`);
  let folderId: string | undefined;
  if (req.folder !== undefined) {
    const folder = await deps.db.folder.findUnique({ where: { knowledgeBaseId_name: { knowledgeBaseId: kb.id, name: req.folder } } });
    if (!folder || folder.deletionRequestedAt) throw notFound(`folder ${JSON.stringify(req.folder)} does not exist in knowledge base ${JSON.stringify(req.kb)}`);
    folderId = folder.id;
  }
  const docs = await deps.db.document.findMany({ where: { knowledgeBaseId: kb.id, deletionRequestedAt: null, ...(folderId ? { folderId } : {}) }, orderBy: { createdAt: 'asc' } });
  const results: BulkResult[] = [];
  const rewrite = { contentType: req.contentType, personName: req.personName ?? null };
  const queue = [...docs];
  // A few starts at a time: a large KB neither takes minutes nor floods Temporal.
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let doc = queue.shift(); doc; doc = queue.shift()) {
        const base = { document_id: doc.id, name: doc.name };
        if (!doc.fileDigitized) results.push({ ...base, status: 'skipped', reason: 'not_digitized' });
        else if (req.skipRewritten && doc.fileRewritten) results.push({ ...base, status: 'skipped', reason: 'already_rewritten' });
        else {
          try {
            await startPipeline(deps, doc, partner.name, ['rewrite', 'embed'], { rewrite });
            results.push({ ...base, status: 'queued' });
          } catch (err) {
            if (!(err instanceof AppError) || err.status !== 409) throw err;
            results.push({ ...base, status: 'skipped', reason: 'in_progress' });
          }
        }
      }
    }),
  );
  const order = new Map(docs.map((d, i) => [d.id, i]));
  results.sort((a, b) => order.get(a.document_id)! - order.get(b.document_id)!);
  const queued = results.filter((r) => r.status === 'queued').length;
  return { status: 'queued' as const, total: results.length, queued, skipped: results.length - queued, results };
}

// ---- Administration -------------------------------------------------------------------------

const runningPipelines = `WorkflowType = 'documentPipeline' AND ExecutionStatus = 'Running'`;

interface Job {
  workflow_id: string;
  document_id: string | null;
  partner: string | null;
  knowledge_base_id: string | null;
  status: string | null;
  budget_blocked: boolean;
  started_at: string | null;
}

async function listJobs(temporal: Client, limit: number): Promise<Job[]> {
  const jobs: Job[] = [];
  for await (const wf of temporal.workflow.list({ query: runningPipelines })) {
    const attrs = wf.typedSearchAttributes;
    jobs.push({
      workflow_id: wf.workflowId,
      document_id: attrs.get(searchAttributes.documentId) ?? null,
      partner: attrs.get(searchAttributes.partner) ?? null,
      knowledge_base_id: attrs.get(searchAttributes.knowledgeBaseId) ?? null,
      status: attrs.get(searchAttributes.pipelineStatus) ?? null,
      budget_blocked: attrs.get(searchAttributes.budgetBlocked) ?? false,
      started_at: wf.startTime.toISOString(),
    });
    if (jobs.length >= limit) break;
  }
  return jobs;
}

async function queueMarkers(db: Db) {
  return db.document.findMany({ where: { NOT: { inQueues: { isEmpty: true } } }, select: { id: true, name: true, inQueues: true, knowledgeBaseId: true, processingError: true } });
}

/** GET /api/queue: documents per queue (durable markers) and pipeline jobs per status. */
export async function queueStatus(deps: QueueDeps) {
  const markers = await queueMarkers(deps.db);
  const queues: Record<string, number> = { digitize: 0, rewrite: 0, embedding: 0 };
  for (const m of markers) for (const q of m.inQueues) queues[q] = (queues[q] ?? 0) + 1;
  const jobs = await listJobs(deps.temporal, 100_000);
  const byStatus: Record<string, number> = {};
  for (const j of jobs) byStatus[j.status ?? 'unknown'] = (byStatus[j.status ?? 'unknown'] ?? 0) + 1;
  const budgetBlocked = await deps.db.document.count({ where: { processingError: { startsWith: 'BUDGET_BLOCKED:' }, deletionRequestedAt: null } });
  return { queues, jobs: { total: jobs.length, by_status: byStatus }, budget_blocked_documents: budgetBlocked };
}

/** GET /api/queue/jobs: running pipeline jobs, newest first, with their document's queue markers. */
export async function queueJobs(deps: QueueDeps, limit: number) {
  const jobs = await listJobs(deps.temporal, limit);
  const ids = jobs.map((j) => j.document_id).filter((id): id is string => !!id);
  const docs = await deps.db.document.findMany({ where: { id: { in: ids } }, select: { id: true, name: true, inQueues: true, processingError: true } });
  const byId = new Map(docs.map((d) => [d.id, d]));
  return {
    jobs: jobs.map((j) => {
      const d = j.document_id ? byId.get(j.document_id) : undefined;
      return { ...j, document_name: d?.name ?? null, in_queues: d?.inQueues ?? [], processing_error: d?.processingError ?? null };
    }),
    limit,
  };
}

/** Markers whose document has no running pipeline, and running pipelines without markers. */
async function correlate(deps: QueueDeps) {
  const markers = await queueMarkers(deps.db);
  const jobs = await listJobs(deps.temporal, 100_000);
  const jobDocs = new Set(jobs.map((j) => j.document_id));
  const markedDocs = new Set(markers.map((m) => m.id));
  return {
    markers,
    jobs,
    orphanMarkers: markers.filter((m) => !jobDocs.has(m.id)),
    unmarkedJobs: jobs.filter((j) => j.document_id && !markedDocs.has(j.document_id)),
  };
}

/** GET /api/queue/debug. A failed job waiting for `retry` has no marker by design (it is not queued). */
export async function queueDebug(deps: QueueDeps) {
  const c = await correlate(deps);
  return {
    marker_count: c.markers.length,
    job_count: c.jobs.length,
    orphan_markers: c.orphanMarkers.map((m) => ({ document_id: m.id, name: m.name, in_queues: m.inQueues })),
    unmarked_jobs: c.unmarkedJobs.map((j) => ({ workflow_id: j.workflow_id, document_id: j.document_id, status: j.status })),
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
    if (await isWorkflowRunning(deps.temporal, workflowIds.document(m.id))) continue;
    const res = await deps.db.document.updateMany({ where: { id: m.id, inQueues: { equals: m.inQueues } }, data: { inQueues: [] } });
    if (res.count > 0) cleared.push(m.id);
  }
  return { status: 'cleared' as const, cleared: cleared.length, document_ids: cleared };
}

/** POST /api/queue/retry-failed: sends `retry` to every pipeline whose rewrite step failed. */
export async function retryFailedRewrites(deps: QueueDeps) {
  const failed = await deps.db.document.findMany({
    where: { deletionRequestedAt: null, OR: [{ processingError: { startsWith: 'REWRITE_FAILED:' } }, { processingError: { startsWith: 'REWRITE_REJECTED:' } }] },
    select: { id: true },
  });
  const retried: string[] = [];
  for (const { id } of failed) {
    const handle = deps.temporal.workflow.getHandle(workflowIds.document(id));
    const progress = await handle.query<DocumentPipelineProgress>('progress').catch(() => null);
    if (progress?.status !== 'failed' || progress.currentStep !== 'rewrite') continue;
    await handle.signal('retry');
    retried.push(id);
  }
  return { status: 'queued' as const, retried: retried.length, document_ids: retried };
}
