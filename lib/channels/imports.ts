import { setTimeout as sleep } from 'node:timers/promises';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import { AppError } from '../platform/errors.js';
import { nameFromTitle } from '../platform/text.js';
import { checkHeadroom } from '../budget/ledger.js';
import { documentWorkflowId, type PipelineStep } from '../contracts/document-pipeline.js';
import type { ChannelStepResult } from '../contracts/channel-source.js';
import { createWithinDocumentQuota } from '../knowledge/documents.js';
import { startDocumentPipeline } from '../knowledge/pipeline-runs.js';
import { isBudgetBlocked } from '../knowledge/state.js';
import { finishScan, markChannelBudgetBlocked, markSyncing, stopScan, type ChannelDeps, type StepContext } from './state.js';

/**
 * Imports of a scan: each pending video becomes an ordinary URL document of the channel folder
 * (newest first), rewritten with the source's model tier and embedded by its own
 * `documentPipeline`, which admits its paid steps like every document. The source keeps at most
 * CHANNEL_IMPORT_CONCURRENCY of its documents digitizing at once, and creates none while the KB
 * has no budget headroom, so a blocked KB never fills up with blocked documents.
 */
const IMPORT_STEPS: PipelineStep[] = ['digitize', 'rewrite', 'embed'];
/** One import step returns to its workflow after this long, so a pause or deletion is seen soon. */
const IMPORT_STEP_MS = 10_000;
const WINDOW_POLL_MS = 1000;

export const videoUrl = (videoId: string) => `https://www.youtube.com/watch?v=${videoId}`;

type ImportResult = { kind: 'imported'; documentId: string } | { kind: 'duplicate' | 'skipped' | 'gone' } | { kind: 'quota'; message: string };

/**
 * One video to one document, in one transaction: the partner's max_documents (its row locked), the
 * folder and KB held FOR SHARE and not being deleted (a deletion that marks them waits for this
 * transaction, and then lists the new document), the video still pending, and no other live
 * document of the KB holding the same video.
 */
async function importVideo(
  deps: ChannelDeps,
  source: { knowledgeBaseId: string; folderId: string; modelTier: string; partner: { id: string; maxDocuments: number } },
  video: { id: string; videoId: string; title: string | null },
): Promise<ImportResult> {
  try {
    return await createWithinDocumentQuota(deps.db, source.partner, async (tx): Promise<ImportResult> => {
      const live = await tx.$queryRaw<Array<{ id: string }>>`
        SELECT f.id FROM folders f JOIN knowledge_bases k ON k.id = f."knowledgeBaseId"
        WHERE f.id = ${source.folderId}::uuid AND f."deletionRequestedAt" IS NULL AND k."deletionRequestedAt" IS NULL
        FOR SHARE OF f, k`;
      if (live.length === 0) return { kind: 'gone' };
      const still = await tx.$queryRaw<Array<{ id: string }>>`SELECT id FROM channel_videos WHERE id = ${video.id}::uuid AND status = 'pending' FOR UPDATE`;
      if (still.length === 0) return { kind: 'skipped' };
      const other = await tx.document.findFirst({
        where: { knowledgeBaseId: source.knowledgeBaseId, videoId: video.videoId, deletionRequestedAt: null },
        orderBy: { createdAt: 'asc' },
        select: { id: true },
      });
      if (other) {
        await tx.channelVideo.update({ where: { id: video.id }, data: { status: 'duplicate', duplicateDocumentId: other.id } });
        return { kind: 'duplicate' };
      }
      const url = videoUrl(video.videoId);
      const title = nameFromTitle(video.title);
      const document = await tx.document.create({
        data: {
          knowledgeBaseId: source.knowledgeBaseId,
          folderId: source.folderId,
          name: title ?? url,
          nameFromSource: !title,
          type: 'url',
          url,
          videoId: video.videoId,
          autoRewrite: true,
          modelTier: source.modelTier,
          inQueues: ['digitize'],
        },
      });
      await tx.channelVideo.update({ where: { id: video.id }, data: { status: 'imported', documentId: document.id, importedAt: new Date() } });
      return { kind: 'imported', documentId: document.id };
    });
  } catch (err) {
    if (err instanceof AppError && err.message.startsWith('QUOTA_EXCEEDED:')) return { kind: 'quota', message: err.message };
    throw err;
  }
}

/**
 * Starts the pipelines of imported documents that have none yet, exactly once: a document's
 * workflow ID is fixed, so an existing execution (running or closed) means it was started.
 */
async function startPendingPipelines(deps: ChannelDeps, sourceId: string, partnerName: string): Promise<void> {
  const videos = await deps.db.channelVideo.findMany({
    where: { sourceId, status: { in: ['imported', 'suppressed'] }, pipelineStartedAt: null },
    include: { document: true },
  });
  for (const video of videos) {
    const doc = video.document;
    if (doc && !doc.deletionRequestedAt && !(await workflowExists(deps, documentWorkflowId(doc.id)))) {
      try {
        await startDocumentPipeline(deps, {
          documentId: doc.id,
          knowledgeBaseId: doc.knowledgeBaseId,
          partner: partnerName,
          steps: IMPORT_STEPS,
          rewrite: { contentType: 'auto' },
        });
      } catch (err) {
        if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      }
    }
    await deps.db.channelVideo.update({ where: { id: video.id }, data: { pipelineStartedAt: new Date() } });
  }
}

async function workflowExists(deps: ChannelDeps, workflowId: string): Promise<boolean> {
  try {
    await deps.temporal.workflow.getHandle(workflowId).describe();
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/**
 * Imports pending videos for up to IMPORT_STEP_MS: fills the import window newest first, waits
 * while it is full, and finishes the scan once no pending video is left.
 */
export async function importChannelVideos(deps: ChannelDeps, sourceId: string, ctx: StepContext): Promise<ChannelStepResult> {
  const deadline = Date.now() + IMPORT_STEP_MS;
  await markSyncing(deps.db, sourceId);
  for (;;) {
    ctx.heartbeat();
    if (ctx.signal.aborted) throw ctx.signal.reason;
    const source = await deps.db.channelSource.findUnique({ where: { id: sourceId }, include: { knowledgeBase: { include: { partner: true } } } });
    if (!source || source.deletionRequestedAt || !source.enabled) return { outcome: 'progress' };
    const partner = source.knowledgeBase.partner;
    await startPendingPipelines(deps, sourceId, partner.name);
    if (!partner.allowAudioVideo) return stopScan(deps, sourceId, 'error', 'forbidden', 'video URLs are not enabled for this partner');

    const pending = await deps.db.channelVideo.count({ where: { sourceId, status: 'pending' } });
    if (pending === 0) return finishScan(deps, sourceId, { status: 'synced' });
    const block = await checkHeadroom(deps.db, source.knowledgeBaseId);
    if (block) return markChannelBudgetBlocked(deps, sourceId, block.reason, block.detail);

    const active = await deps.db.document.findMany({
      where: { channelImports: { some: { sourceId } }, inQueues: { has: 'digitize' }, deletionRequestedAt: null },
      select: { processingState: true, budgetBlockReason: true, budgetBlockDetail: true },
    });
    const free = deps.config.channels.importConcurrency - active.length;
    if (free <= 0) {
      // A window full of budget-blocked documents: the source waits for budget as they do.
      const [first] = active;
      if (first && active.every(isBudgetBlocked)) return markChannelBudgetBlocked(deps, sourceId, first.budgetBlockReason!, first.budgetBlockDetail!);
      if (Date.now() >= deadline) return { outcome: 'progress' };
      await sleep(WINDOW_POLL_MS, undefined, { signal: ctx.signal }).catch(() => undefined);
      continue;
    }
    const next = await deps.db.channelVideo.findMany({
      where: { sourceId, status: 'pending' },
      orderBy: [{ publishedAt: { sort: 'desc', nulls: 'last' } }, { createdAt: 'asc' }],
      take: free,
    });
    for (const video of next) {
      const result = await importVideo(deps, { ...source, partner }, video);
      if (result.kind === 'gone') return { outcome: 'progress' };
      if (result.kind === 'quota') return finishScan(deps, sourceId, { status: 'incomplete', code: 'max_documents', message: result.message });
    }
    await startPendingPipelines(deps, sourceId, partner.name);
    if (Date.now() >= deadline) return { outcome: 'progress' };
  }
}
