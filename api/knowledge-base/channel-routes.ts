import { defineRoute, type RouteDefinition } from '../http/route.js';
import type { ApiDeps } from '../deps.js';
import { requestChannelSync, updateChannelSettings, type ChannelSettingsPatch } from '../../lib/channels/sources.js';
import * as s from './schemas.js';

/** Settings and syncs of video-channel folders (spec 4.2); creating one is POST /api/folders. */
export function channelRoutes(deps: ApiDeps): RouteDefinition[] {
  const channelDeps = { db: deps.db, temporal: deps.temporal, taskQueue: deps.config.temporalTaskQueue };
  type PF = { partner: string; kb: string; folder: string };

  return [
    defineRoute<PF, unknown, ChannelSettingsPatch>({
      method: 'patch', path: '/api/folders/{partner}/{kb}/{folder}/channel', access: 'partner', summary: "Change a video-channel folder's settings",
      description: '`enabled: false` pauses future scans (a paused source must be resumed before a sync); `model_tier` applies to videos imported from now on. The channel URL and canonical channel ID never change. Answers the folder_details entry.',
      params: s.pathParams('partner', 'kb', 'folder'), body: { type: 'json', schema: s.patchChannelBody },
      responses: { 200: { description: 'The folder_details entry', schema: s.channelSourceObject }, 409: { description: 'Folder being deleted' }, ...s.standardErrors },
      handler: async ({ params, body }) => ({ body: await updateChannelSettings(channelDeps, params.partner, params.kb, params.folder, body) }),
    }),
    defineRoute<PF>({
      method: 'post', path: '/api/folders/{partner}/{kb}/{folder}/sync', access: 'partner', summary: 'Scan a video channel now',
      description: 'A complete scan starts now (or right after the running one). The answer carries the KB budget status; without budget headroom the source goes `budget_blocked` without any paid discovery.',
      params: s.pathParams('partner', 'kb', 'folder'),
      responses: {
        202: { description: '`{status: "pending", budget}`', schema: { type: 'object', properties: { status: { enum: ['pending'] }, budget: s.budgetStatusObject } } },
        409: { description: 'Paused (resume it first), or being deleted' },
        ...s.standardErrors,
      },
      handler: async ({ params }) => ({ status: 202, body: await requestChannelSync(channelDeps, params.partner, params.kb, params.folder) }),
    }),
  ];
}
