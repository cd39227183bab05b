import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import type { SignalDefinition } from '@temporalio/workflow';
import type { Db } from '../platform/db.js';
import { AppError, badRequest, conflict, forbidden, notFound } from '../platform/errors.js';
import { isWorkflowRunning } from '../platform/temporal.js';
import { searchAttributes } from '../contracts/search-attributes.js';
import {
  channelSourceWorkflowId,
  channelSourceWorkflowType,
  pauseSignal,
  resumeSignal,
  syncNowSignal,
  type ChannelSourceInput,
} from '../contracts/channel-source.js';
import { budgetStatus } from '../budget/status.js';
import { findKnowledgeBase } from '../knowledge/lookup.js';
import { channelAliasHelp, parseChannelAlias, type ChannelAlias } from './aliases.js';
import { setChannelEnabled } from './state.js';
import { channelSourceDetails, duplicateSourceRef, importedDocumentIds } from './views.js';

/**
 * The API side of video-channel folders (spec 4.2): creating a folder with its channel source,
 * changing its settings, asking for a sync. The work itself runs in the source's workflow
 * `channel-source-<id>`; these functions write the record and start or signal it.
 */
export interface ChannelApiDeps {
  db: Db;
  temporal: Client;
  taskQueue: string;
}

/** How long creating a folder waits for the first resolution of its channel (404 / 409 then). */
const CREATION_WAIT_MS = 10_000;
const CREATION_POLL_MS = 150;

export interface CreateChannelFolderInput {
  name: string;
  channel_url?: string;
  model_tier: 'standard' | 'economy';
}

function startOptions(deps: ChannelApiDeps, source: { id: string; knowledgeBaseId: string }, partner: string) {
  const input: ChannelSourceInput = { sourceId: source.id, knowledgeBaseId: source.knowledgeBaseId, partner };
  return {
    taskQueue: deps.taskQueue,
    workflowId: channelSourceWorkflowId(source.id),
    args: [input] as [ChannelSourceInput],
    typedSearchAttributes: new TypedSearchAttributes([
      { key: searchAttributes.partner, value: partner },
      { key: searchAttributes.knowledgeBaseId, value: source.knowledgeBaseId },
      { key: searchAttributes.jobStatus, value: 'pending' },
      { key: searchAttributes.budgetBlocked, value: false },
    ]),
  };
}

/** Signals the source's workflow, starting it first if it is not running (a lost workflow comes back). */
async function signalChannel(deps: ChannelApiDeps, source: { id: string; knowledgeBaseId: string }, partner: string, signal: SignalDefinition) {
  await deps.temporal.workflow.signalWithStart(channelSourceWorkflowType, { ...startOptions(deps, source, partner), signal, signalArgs: [] });
}

/** 409 with what is already there: the source that owns the channel and its documents. */
async function duplicateConflict(db: Db, ownerId: string, channel: string) {
  const owner = await db.channelSource.findUniqueOrThrow({ where: { id: ownerId }, include: { folder: true } });
  return conflict(`channel ${channel} is already the source of folder ${JSON.stringify(owner.folder.name)}`, {
    responseFields: { duplicate_source: duplicateSourceRef(owner), duplicate_document_ids: await importedDocumentIds(db, owner.id) },
  });
}

/** A source of the KB with the same alias, or (for a /channel/ URL) with that channel ID. */
async function refuseDuplicateAlias(db: Db, knowledgeBaseId: string, alias: ChannelAlias) {
  const owner = await db.channelSource.findFirst({
    where: { knowledgeBaseId, OR: [{ aliasKey: alias.key }, ...(alias.kind === 'channel' ? [{ channelId: alias.value }] : [])] },
    orderBy: { createdAt: 'asc' },
  });
  if (owner) throw await duplicateConflict(db, owner.id, owner.channelId ?? owner.channelUrl);
}

const settledStatuses = new Set(['budget_blocked', 'duplicate', 'error', 'incomplete', 'paused']);

/** Ends a source that must not exist (its channel does not exist, or another source owns it); nothing was imported yet. */
async function discardSource(deps: ChannelApiDeps, source: { id: string; folderId: string }) {
  try {
    await deps.temporal.workflow.getHandle(channelSourceWorkflowId(source.id)).terminate('the folder was refused at creation');
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
  await deps.db.folder.deleteMany({ where: { id: source.folderId } });
}

/**
 * A `video_channel` folder and its channel source, created together. The request waits (at most
 * CREATION_WAIT_MS) for the workflow's first resolution: a channel that does not exist answers 404
 * and a channel another source of the KB owns answers 409, and nothing is kept; otherwise 201 with
 * the source as folder_details shows it (possibly `pending`, or `budget_blocked` without headroom).
 */
export async function createChannelFolder(deps: ChannelApiDeps, partnerName: string, kbName: string, input: CreateChannelFolderInput) {
  const { db } = deps;
  const { partner, kb } = await findKnowledgeBase(db, partnerName, kbName);
  if (kb.deletionRequestedAt) throw conflict(`knowledge base ${JSON.stringify(kbName)} is being deleted`);
  if (input.channel_url === undefined || input.channel_url.trim() === '') throw badRequest('form.channel_url is required when type is video_channel');
  const alias = parseChannelAlias(input.channel_url);
  if (!alias) throw badRequest(channelAliasHelp);
  if (!partner.allowAudioVideo) throw forbidden('video URLs are not enabled for this partner');
  await refuseDuplicateAlias(db, kb.id, alias);

  let source;
  try {
    source = await db.$transaction(async (tx) => {
      const folder = await tx.folder.create({ data: { knowledgeBaseId: kb.id, name: input.name, type: 'video_channel' } });
      return tx.channelSource.create({
        data: { knowledgeBaseId: kb.id, folderId: folder.id, channelUrl: input.channel_url!.trim(), aliasKind: alias.kind, aliasKey: alias.key, modelTier: input.model_tier },
      });
    });
  } catch (err) {
    if ((err as { code?: string }).code !== 'P2002') throw err;
    if (await db.folder.findUnique({ where: { knowledgeBaseId_name: { knowledgeBaseId: kb.id, name: input.name } } })) throw conflict(`folder ${JSON.stringify(input.name)} already exists`);
    await refuseDuplicateAlias(db, kb.id, alias);
    throw err;
  }
  try {
    await deps.temporal.workflow.start(channelSourceWorkflowType, startOptions(deps, source, partner.name));
  } catch (err) {
    await db.folder.deleteMany({ where: { id: source.folderId } });
    throw new AppError('unavailable', `could not start the channel source: ${(err as Error).message}`);
  }

  const deadline = Date.now() + CREATION_WAIT_MS;
  for (;;) {
    const s = await db.channelSource.findUniqueOrThrow({ where: { id: source.id } });
    if (s.status === 'error' && s.lastErrorCode === 'channel_not_found' && !s.channelId) {
      await discardSource(deps, s);
      throw notFound(`channel ${JSON.stringify(s.channelUrl)} does not exist on the video platform`);
    }
    if (s.status === 'duplicate' && s.duplicateOfId) {
      const refusal = await duplicateConflict(db, s.duplicateOfId, s.channelId ?? s.channelUrl);
      await discardSource(deps, s);
      throw refusal;
    }
    if ((s.channelId && s.claimedChannelId) || settledStatuses.has(s.status) || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, CREATION_POLL_MS));
  }
  const folder = await db.folder.findUniqueOrThrow({ where: { id: source.folderId } });
  return { name: folder.name, type: folder.type, created_at: folder.createdAt.toISOString(), channel_source: await channelSourceDetails(db, source.id) };
}

/** The channel source of a folder that is not being deleted: 404 without one, 409 while deleted. */
async function findChannelSource(db: Db, partnerName: string, kbName: string, folderName: string) {
  const { partner, kb } = await findKnowledgeBase(db, partnerName, kbName);
  const folder = await db.folder.findUnique({ where: { knowledgeBaseId_name: { knowledgeBaseId: kb.id, name: folderName } }, include: { channelSource: true } });
  if (!folder) throw notFound(`folder ${JSON.stringify(folderName)} does not exist in knowledge base ${JSON.stringify(kbName)}`);
  if (!folder.channelSource) throw notFound(`folder ${JSON.stringify(folderName)} has no channel source`);
  if (kb.deletionRequestedAt || folder.deletionRequestedAt || folder.channelSource.deletionRequestedAt) throw conflict(`folder ${JSON.stringify(folderName)} is being deleted`);
  return { partner, source: folder.channelSource };
}

export interface ChannelSettingsPatch {
  enabled?: boolean;
  model_tier?: 'standard' | 'economy';
}

/** PATCH .../channel: enabled (pause / resume) and model_tier (future imports); URL and channel identity never change. */
export async function updateChannelSettings(deps: ChannelApiDeps, partnerName: string, kbName: string, folderName: string, patch: ChannelSettingsPatch) {
  const { partner, source } = await findChannelSource(deps.db, partnerName, kbName, folderName);
  if (patch.model_tier !== undefined) await deps.db.channelSource.update({ where: { id: source.id }, data: { modelTier: patch.model_tier } });
  if (patch.enabled !== undefined && patch.enabled !== source.enabled) {
    await setChannelEnabled(deps.db, source.id, patch.enabled);
    await signalChannel(deps, source, partner.name, patch.enabled ? resumeSignal : pauseSignal);
  }
  return channelSourceDetails(deps.db, source.id);
}

/** POST .../sync: a complete scan now (after the running one, if one runs). A paused source must be resumed first. */
export async function requestChannelSync(deps: ChannelApiDeps, partnerName: string, kbName: string, folderName: string) {
  const { partner, source } = await findChannelSource(deps.db, partnerName, kbName, folderName);
  if (!source.enabled) throw conflict(`the channel source is paused; resume it (PATCH /api/folders/${partnerName}/${kbName}/${folderName}/channel {"enabled": true}) before requesting a sync`);
  await deps.db.channelSource.updateMany({ where: { id: source.id, status: { not: 'syncing' } }, data: { status: 'pending' } });
  await signalChannel(deps, source, partner.name, syncNowSignal);
  return { status: 'pending' as const, budget: await budgetStatus(deps.db, source.knowledgeBaseId) };
}

/**
 * The reconciler's part for channel sources: the sources untouched for `graceSeconds` (and those
 * named) that are not being deleted and whose workflow does not run are started again; the
 * workflow picks the source up from its record.
 */
export async function reconcileChannelSources(deps: ChannelApiDeps, opts: { graceSeconds: number; named: string[]; limit: number }): Promise<number> {
  const cutoff = new Date(Date.now() - opts.graceSeconds * 1000);
  const sources = await deps.db.channelSource.findMany({
    where: { deletionRequestedAt: null, OR: [{ updatedAt: { lt: cutoff } }, { id: { in: opts.named } }] },
    include: { knowledgeBase: { include: { partner: true } } },
    orderBy: { updatedAt: 'asc' },
    take: opts.limit,
  });
  let restarted = 0;
  for (const source of sources) {
    if (source.knowledgeBase.deletionRequestedAt || (await isWorkflowRunning(deps.temporal, channelSourceWorkflowId(source.id)))) continue;
    try {
      await deps.temporal.workflow.start(channelSourceWorkflowType, startOptions(deps, source, source.knowledgeBase.partner.name));
      restarted++;
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }
  return restarted;
}
