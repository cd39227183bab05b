import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { Db } from '../platform/db.js';
import { AppError, conflict, notFound } from '../platform/errors.js';
import type { FileStorage } from '../platform/storage.js';
import { documentFiles } from '../platform/storage.js';
import { queueOfStep, type PipelineStep, type RequestedContentType, type RewriteRequest } from '../contracts/document-pipeline.js';
import { moveQueueMarkers } from './queue-markers.js';
import { findDocument, findKnowledgeBase, findLiveFolder } from './lookup.js';
import { standDownWaitingRun, startDocumentPipeline, stepsAfterDigitizing } from './pipeline-runs.js';
import { resolveContentType } from '../rewrite/content-types.js';
import { notWaiting, restoreProcessingState } from './state.js';

/**
 * Processing on request (spec 4.5: queue/process, bulk rewrite). A document's "queues" are the
 * steps its `in_queues` names (the durable marker in Postgres); its job is its running pipeline
 * workflow in Temporal (lib/knowledge/queue-admin.ts shows both to administrators).
 */
export interface QueueDeps {
  db: Db;
  storage: FileStorage;
  temporal: Client;
  taskQueue: string;
}

type DocumentRow = NonNullable<Awaited<ReturnType<Db['document']['findUnique']>>>;

/**
 * Starts a pipeline for a document. A run that waits for a retry after a failed step, or for budget
 * capacity, stands down for the new request (standDownWaitingRun); one that is working or paused
 * answers 409, so one document never has two pipelines.
 */
async function startPipeline(deps: QueueDeps, doc: DocumentRow, partner: string, steps: PipelineStep[], options: { requestCharacterLimit?: number | null; rewrite?: RewriteRequest }) {
  const input = { documentId: doc.id, knowledgeBaseId: doc.knowledgeBaseId, partner, steps, requestCharacterLimit: options.requestCharacterLimit ?? null, rewrite: options.rewrite };
  await standDownWaitingRun(deps.temporal, doc.id, doc);
  // Shown queued at once; the run's first activity takes the markers over.
  const queue = queueOfStep[steps[0]!];
  await deps.db.$transaction([
    deps.db.document.update({ where: { id: doc.id }, data: notWaiting }),
    moveQueueMarkers(deps.db, doc.id, { add: [queue] }),
  ]);
  try {
    return await startDocumentPipeline(deps, input);
  } catch (err) {
    // Nothing started: the document shows what it showed before.
    await deps.db.$transaction([
      restoreProcessingState(deps.db, doc.id, doc),
      ...(doc.inQueues.includes(queue) ? [] : [moveQueueMarkers(deps.db, doc.id, { remove: [queue] })]),
    ]);
    if (err instanceof WorkflowExecutionAlreadyStartedError) throw conflict(`document ${doc.id} is being processed; try again when it has finished`);
    throw new AppError('unavailable', `could not start processing: ${(err as Error).message}`);
  }
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
  const { kb, partner, document: doc } = await findDocument(deps.db, req.partner, req.kb, req.documentId);
  if (kb.deletionRequestedAt) throw conflict(`knowledge base ${JSON.stringify(req.kb)} is being deleted`);
  if (doc.deletionRequestedAt) throw notFound(`document ${JSON.stringify(req.documentId)} is being deleted`);
  let steps: PipelineStep[];
  if (req.action === 'digitize') {
    if (!doc.fileOriginal && !doc.url) throw conflict('the document has no original file or URL to digitize');
    steps = ['digitize', ...stepsAfterDigitizing(doc)];
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
  const { kb, partner, folder } =
    req.folder === undefined ? { ...(await findKnowledgeBase(deps.db, req.partner, req.kb)), folder: null } : await findLiveFolder(deps.db, req.partner, req.kb, req.folder);
  if (kb.deletionRequestedAt) throw conflict(`knowledge base ${JSON.stringify(req.kb)} is being deleted`);
  const folderId = folder?.id;
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
