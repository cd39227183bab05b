import { settle } from '../budget/ledger.js';
import type { ChannelStepResult } from '../contracts/channel-source.js';
import { DataApiError, YouTubeDataApi, type PlaylistEntry, type VideoDetails } from '../providers/video-data-api.js';
import { parseChannelAlias } from './aliases.js';
import { classifyVideo } from './classify.js';
import { findChannel } from './resolve.js';
import { DISCOVERY_PAGES_PER_STEP, markSyncing, recordRetry, stopScan, unitCost, type ChannelDeps, type StepContext } from './state.js';

/**
 * The paid steps of a scan: resolving the alias to its channel, and discovering the uploads list
 * page by page. Each step was admitted by the KB budget under its operation key (the workflow
 * reserved it); its Data API requests are counted in its `channel_scan_steps` row before each is
 * sent, and settled once, as one `discovery` usage event, when the step ends. A step retried after
 * a crash resumes from that row and the source's saved page token: no page is written twice and
 * no request is counted twice.
 */
const DATA_API_MODEL = 'youtube-data-api-v3';

function apiFor(deps: ChannelDeps, sourceId: string, operationKey: string, ctx: StepContext) {
  return new YouTubeDataApi(deps.config.videoDataApi, {
    signal: ctx.signal,
    beforeRequest: async () => {
      ctx.heartbeat();
      await deps.db.$transaction([
        deps.db.channelScanStep.update({ where: { operationKey }, data: { requests: { increment: 1 } } }),
        deps.db.channelSource.update({ where: { id: sourceId }, data: { quotaUnitsTotal: { increment: 1 } } }),
      ]);
    },
  });
}

/** Settles the step's requests (each at least one quota unit, failed ones too) as one usage event. */
async function settleStep(deps: ChannelDeps, operationKey: string): Promise<void> {
  const step = await deps.db.channelScanStep.findUniqueOrThrow({ where: { operationKey } });
  await settle(deps.db, operationKey, {
    inputTokens: 0,
    outputTokens: 0,
    costUsd: deps.config.videoDataApi.unitPriceUsd ? unitCost(deps.config, step.requests) : null,
    model: DATA_API_MODEL,
  });
}

/** A Data API failure as the source shows it: retried later, or the scan stops with an error. */
async function failed(deps: ChannelDeps, sourceId: string, err: DataApiError): Promise<ChannelStepResult> {
  const reason = err.reason ? ` (${err.reason})` : '';
  if (err.retryable) return recordRetry(deps, sourceId, err.kind, `the Data API failed${reason}: ${err.message}`);
  return stopScan(deps, sourceId, 'error', err.kind, `${err.message}${reason}`);
}

async function paidStep(
  deps: ChannelDeps,
  sourceId: string,
  operationKey: string,
  kind: 'resolve' | 'discover',
  ctx: StepContext,
  run: (api: YouTubeDataApi) => Promise<ChannelStepResult>,
): Promise<ChannelStepResult> {
  if (!(await deps.db.channelSource.findUnique({ where: { id: sourceId }, select: { id: true } }))) return { outcome: 'progress' };
  const step = await deps.db.channelScanStep.upsert({ where: { operationKey }, create: { operationKey, sourceId, kind }, update: {} });
  if (step.done) return step.result as unknown as ChannelStepResult;
  await markSyncing(deps.db, sourceId);
  let result: ChannelStepResult;
  try {
    result = await run(apiFor(deps, sourceId, operationKey, ctx));
  } catch (err) {
    if (ctx.signal.aborted) {
      // Cancelled (the source is being deleted): what was sent is still charged.
      await settleStep(deps, operationKey);
      throw err;
    }
    if (!(err instanceof DataApiError)) throw err;
    result = await failed(deps, sourceId, err);
  }
  await settleStep(deps, operationKey);
  await deps.db.channelScanStep.update({ where: { operationKey }, data: { done: true, result } });
  return result;
}

/**
 * Claims the resolved channel for this source within its KB (free: no request). Another source of
 * the KB that owns it makes this one a `duplicate` (a sync re-checks; the owner's deletion frees it).
 */
export async function claimChannel(deps: ChannelDeps, sourceId: string): Promise<ChannelStepResult> {
  const source = await deps.db.channelSource.findUniqueOrThrow({ where: { id: sourceId } });
  if (!source.channelId) return { outcome: 'progress' };
  try {
    await deps.db.channelSource.update({ where: { id: sourceId }, data: { claimedChannelId: source.channelId, duplicateOfId: null } });
    return { outcome: 'progress' };
  } catch (err) {
    if ((err as { code?: string }).code !== 'P2002') throw err;
  }
  const owner = await deps.db.channelSource.findFirst({ where: { knowledgeBaseId: source.knowledgeBaseId, claimedChannelId: source.channelId }, include: { folder: true } });
  if (!owner) return { outcome: 'progress' };
  return stopScan(deps, sourceId, 'duplicate', 'duplicate', `channel ${source.channelId} is already the source of folder ${JSON.stringify(owner.folder.name)}`, { duplicateOfId: owner.id });
}

/** Resolves the alias to the channel's ID, title and uploads playlist, then claims it. */
export async function resolveChannel(deps: ChannelDeps, sourceId: string, operationKey: string, ctx: StepContext): Promise<ChannelStepResult> {
  return paidStep(deps, sourceId, operationKey, 'resolve', ctx, async (api) => {
    const source = await deps.db.channelSource.findUniqueOrThrow({ where: { id: sourceId } });
    const alias = parseChannelAlias(source.channelUrl);
    if (!alias) return stopScan(deps, sourceId, 'error', 'bad_request', `channel_url ${JSON.stringify(source.channelUrl)} is not a channel alias`);
    const channel = await findChannel(deps, api, alias);
    if (!channel) return stopScan(deps, sourceId, 'error', 'channel_not_found', `channel ${JSON.stringify(source.channelUrl)} does not exist on the video platform`);
    await deps.db.channelSource.updateMany({
      where: { id: sourceId, channelId: null },
      data: { channelId: channel.id, channelTitle: channel.title, uploadsPlaylistId: channel.uploadsPlaylistId },
    });
    return claimChannel(deps, sourceId);
  });
}

/**
 * Up to DISCOVERY_PAGES_PER_STEP pages of the uploads list, from the saved page token: each page's
 * videos are recorded and the next token saved in one transaction. Returns `progress` after a
 * batch (the source's `discoveryDone` tells whether the list is complete).
 */
export async function discoverChannelPages(deps: ChannelDeps, sourceId: string, operationKey: string, ctx: StepContext): Promise<ChannelStepResult> {
  return paidStep(deps, sourceId, operationKey, 'discover', ctx, async (api) => {
    for (let page = 0; page < DISCOVERY_PAGES_PER_STEP; page++) {
      ctx.heartbeat();
      const source = await deps.db.channelSource.findUniqueOrThrow({ where: { id: sourceId } });
      if (!source.enabled || source.deletionRequestedAt || source.discoveryDone) break;
      const channelId = source.channelId!;
      let listing: { items: PlaylistEntry[]; nextPageToken: string | null };
      try {
        listing = await api.playlistPage(source.uploadsPlaylistId ?? `UU${channelId.slice(2)}`, source.scanCursor);
      } catch (err) {
        if (!(err instanceof DataApiError)) throw err;
        if (err.kind === 'bad_page_token') {
          // A token the API no longer accepts: the listing starts again from its first page.
          await deps.db.channelSource.update({ where: { id: sourceId }, data: { scanCursor: null } });
          continue;
        }
        if (err.kind !== 'not_found') throw err;
        // The uploads list is missing: a channel without uploads, or a channel that is gone.
        if ((await api.channels({ id: [channelId] })).length === 0) {
          return stopScan(deps, sourceId, 'error', 'channel_gone', `channel ${channelId} no longer exists on the video platform; its documents are kept`);
        }
        if (source.scanCursor !== null) throw err; // seen spuriously on later pages: retried with backoff
        await deps.db.channelSource.update({ where: { id: sourceId }, data: { discoveryDone: true } });
        break;
      }
      await recordPage(deps, source, listing, api);
      if (!listing.nextPageToken) break;
    }
    return { outcome: 'progress' };
  });
}

/**
 * Records one page: new videos (import, defer or skip by classifyVideo), deferred ones that have
 * ended, and duplicates whose other document is gone. Videos already imported or suppressed are
 * left alone; so are videos that disappeared from the channel.
 */
async function recordPage(
  deps: ChannelDeps,
  source: { id: string; knowledgeBaseId: string },
  listing: { items: PlaylistEntry[]; nextPageToken: string | null },
  api: YouTubeDataApi,
): Promise<void> {
  const ids = [...new Set(listing.items.map((i) => i.videoId))];
  const known = new Map((await deps.db.channelVideo.findMany({ where: { sourceId: source.id, videoId: { in: ids } } })).map((v) => [v.videoId, v]));
  const needDetails = ids.filter((id) => !known.has(id) || known.get(id)!.status === 'deferred');
  const details = new Map<string, VideoDetails>((await api.videos(needDetails)).map((d) => [d.id, d]));
  // Documents elsewhere in the KB that already hold one of these videos.
  const present = await deps.db.document.findMany({
    where: { knowledgeBaseId: source.knowledgeBaseId, videoId: { in: ids }, deletionRequestedAt: null, channelImports: { none: { sourceId: source.id } } },
    select: { id: true, videoId: true },
    orderBy: { createdAt: 'asc' },
  });
  const presentFor = (videoId: string) => present.find((d) => d.videoId === videoId)?.id ?? null;
  const entries = new Map(listing.items.map((i) => [i.videoId, i]));

  await deps.db.$transaction(async (tx) => {
    for (const videoId of ids) {
      const entry = entries.get(videoId)!;
      const video = known.get(videoId);
      if (!video || video.status === 'deferred') {
        const d = details.get(videoId);
        const decision = classifyVideo(d);
        if (decision.decision === 'skip') continue;
        const duplicateDocumentId = decision.decision === 'import' ? presentFor(videoId) : null;
        const data = {
          title: d?.title ?? entry.title,
          publishedAt: toDate(entry.publishedAt ?? d?.publishedAt ?? null),
          status: decision.decision === 'defer' ? 'deferred' : duplicateDocumentId ? 'duplicate' : 'pending',
          liveState: decision.liveState,
          durationSeconds: decision.durationSeconds,
          duplicateDocumentId,
        };
        if (!video) await tx.channelVideo.create({ data: { sourceId: source.id, videoId, ...data } });
        else await tx.channelVideo.update({ where: { id: video.id }, data });
      } else if (video.status === 'duplicate' && !present.some((d) => d.id === video.duplicateDocumentId)) {
        const other = presentFor(videoId);
        await tx.channelVideo.update({ where: { id: video.id }, data: { status: other ? 'duplicate' : 'pending', duplicateDocumentId: other } });
      }
    }
    await tx.channelSource.update({ where: { id: source.id }, data: { scanCursor: listing.nextPageToken, discoveryDone: listing.nextPageToken === null } });
  });
}

function toDate(value: string | null): Date | null {
  if (!value) return null;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? null : d;
}
