import { defineRoute, type RouteDefinition } from '../http/route.js';
import type { ApiDeps } from '../deps.js';
import { forbidden } from '../../lib/platform/errors.js';
import { createPartner, findPartner, presentPartner, regeneratePartnerKey, updatePartner, type PartnerSettings } from '../../lib/partners/partners.js';
import { createFolder, createKnowledgeBase, describeKnowledgeBase, listFolders, listKnowledgeBases, type KnowledgeBaseInput } from '../../lib/knowledge/knowledge-bases.js';
import { findKnowledgeBase } from '../../lib/knowledge/lookup.js';
import { deletePartner } from '../../lib/knowledge/deletion.js';
import { contentTypeCatalog } from '../../lib/rewrite/content-types.js';
import { ragSearch, type RagSearchRequest } from '../../lib/retrieval/rag-search.js';
import * as s from './schemas.js';
import { documentRoutes } from './document-routes.js';
import { documentContentRoutes } from './content-routes.js';
import { queueRoutes } from './queue-routes.js';
import { embeddingRoutes } from './embedding-routes.js';
import { channelRoutes } from './channel-routes.js';
import { createChannelFolder, type CreateChannelFolderInput } from '../../lib/channels/sources.js';
import { queueVendorSyncForPartner } from '../../lib/vendor-sync/vendor-sync.js';
import { budgetStatus } from '../../lib/budget/status.js';
import { updateLimits, type LimitsPatch } from '../../lib/budget/limits.js';
import { listUncertainOperations, resolveOperation, type ResolveOperationRequest } from '../../lib/budget/operations.js';

/** The knowledge-base interface (spec: knowledge-base.md). Error bodies: `{detail}`. */
export function knowledgeBaseRoutes(deps: ApiDeps): RouteDefinition[] {
  const { db } = deps;
  const channelDeps = { db, temporal: deps.temporal, taskQueue: deps.config.temporalTaskQueue };
  const deletionDeps = channelDeps;

  return [
    defineRoute({
      method: 'get', path: '/api/content_types', access: 'none', summary: 'List rewrite content types',
      responses: { 200: { description: 'Content types', schema: s.contentTypesAnswer } },
      handler: async () => ({ body: { content_types: contentTypeCatalog } }),
    }),
    defineRoute({
      method: 'get', path: '/api/auth/me', access: 'authenticated', summary: "The key's partner scope and admin flag",
      responses: { 200: { description: '`{partner, isAdmin}`', schema: s.authMeAnswer }, ...s.standardErrors },
      handler: async ({ principal }) => ({ body: { partner: principal!.partnerName, isAdmin: principal!.isAdmin } }),
    }),
    defineRoute({
      method: 'get', path: '/api/partners', access: 'authenticated', summary: 'Partners visible to the key',
      description: 'All partners for the administrator key; only its own partner for a scoped key.',
      responses: { 200: { description: 'Array of partners', schema: { type: 'array', items: s.partnerObject } }, ...s.standardErrors },
      handler: async ({ principal }) => {
        const rows = await db.partner.findMany({ where: principal!.isAdmin ? {} : { id: principal!.partnerId! }, orderBy: { name: 'asc' } });
        return { body: rows.map(presentPartner) };
      },
    }),
    defineRoute<{ partner: string }>({
      method: 'get', path: '/api/partners/{partner}', access: 'admin', summary: 'Read a partner',
      params: s.pathParams('partner'), responses: { 200: { description: 'Partner', schema: s.partnerObject }, ...s.standardErrors },
      handler: async ({ params }) => ({ body: presentPartner(await findPartner(db, params.partner)) }),
    }),
    defineRoute<{ partner: string }, unknown, PartnerSettings>({
      method: 'post', path: '/api/partners/{partner}', access: 'admin', summary: 'Create a partner; returns its key once',
      params: { ...s.pathParams('partner'), properties: { partner: s.partnerName } },
      body: { type: 'form', schema: s.partnerSettingsForm, allowEmptyBody: true },
      responses: { 201: { description: 'Created partner with `api_key`', schema: s.partnerWithKey }, 409: { description: 'Exists' }, ...s.standardErrors },
      handler: async ({ params, body }) => {
        const { partner, apiKey } = await createPartner(db, params.partner, body);
        return { status: 201, body: { ...presentPartner(partner), api_key: apiKey } };
      },
    }),
    defineRoute<{ partner: string }, unknown, PartnerSettings & { new_name?: string }>({
      method: 'put', path: '/api/partners/{partner}', access: 'admin', summary: 'Update or rename a partner',
      params: s.pathParams('partner'), body: { type: 'form', schema: s.partnerUpdateForm, allowEmptyBody: true },
      responses: { 200: { description: 'Updated partner', schema: s.partnerObject }, 409: { description: 'New name taken' }, ...s.standardErrors },
      handler: async ({ params, body }) => {
        const before = await findPartner(db, params.partner);
        const updated = await updatePartner(db, params.partner, body);
        // Enabling vendor sync queues the partner's eligible documents (spec 4.5).
        if (!before.vendorSyncEnabled && updated.vendorSyncEnabled) {
          await queueVendorSyncForPartner({ db, temporal: deps.temporal, taskQueue: deps.config.temporalTaskQueue }, updated.id);
        }
        return { body: presentPartner(updated) };
      },
    }),
    defineRoute<{ partner: string }, { force: boolean }>({
      method: 'delete', path: '/api/partners/{partner}', access: 'admin', summary: 'Delete a partner with all its data',
      params: s.pathParams('partner'), query: s.partnerDeletionQuery,
      description:
        '409 (spec 4.5) while any of its documents has vectors or is being embedded, has a copy in a vendor vector store, or its knowledge bases hold an unsettled budget reservation; the answer counts each (`blocking`). Delete those knowledge bases first, or send `force=true`. Otherwise runs the deletion workflow `delete-partner-<id>`: the partner\'s key stops working at once; its channel sources and document processing are stopped, every document is purged (vectors, files, vendor copies, budget holds), then the partner goes with its knowledge bases, voices, transcripts and analyses. Answers `{status: "deleted", name}` when that finishes within 3 s, else `{status: "delete_pending", name, deletion_workflow_id, pending_cleanup}`; asking again while it runs answers the same.',
      responses: { 200: { description: '`{status: "deleted" | "delete_pending", name, ...}`', schema: s.partnerDeletionAnswer }, 409: { description: 'Vector state, vendor copies or unsettled budget holds remain (without force=true)' }, ...s.standardErrors },
      handler: async ({ params, query }) => ({ body: await deletePartner(deletionDeps, params.partner, query.force) }),
    }),
    defineRoute<{ partner: string }>({
      method: 'post', path: '/api/partners/{partner}/regenerate-key', access: 'admin', summary: 'Replace the partner key; returns the new key once',
      params: s.pathParams('partner'),
      responses: { 200: { description: 'Partner with new `api_key`', schema: s.partnerWithKey }, ...s.standardErrors },
      handler: async ({ params }) => {
        const { partner, apiKey } = await regeneratePartnerKey(db, params.partner);
        return { body: { ...presentPartner(partner), api_key: apiKey } };
      },
    }),
    defineRoute<{ partner: string }>({
      method: 'get', path: '/api/knowledgebases/{partner}', access: 'partner', summary: "List the partner's knowledge bases",
      params: s.pathParams('partner'), responses: { 200: { description: 'Array of KB objects (spec 2.2)', schema: { type: 'array', items: s.knowledgeBaseObject } }, ...s.standardErrors },
      handler: async ({ params }) => ({ body: await Promise.all((await listKnowledgeBases(db, params.partner)).map((kb) => describeKnowledgeBase(db, kb))) }),
    }),
    defineRoute<{ partner: string }, unknown, KnowledgeBaseInput>({
      method: 'post', path: '/api/knowledgebases/{partner}', access: 'partner', summary: 'Create a knowledge base',
      params: s.pathParams('partner'), body: { type: 'form', schema: s.createKnowledgeBaseForm },
      responses: { 201: { description: 'The new KB object (spec 2.2) with its limits', schema: s.knowledgeBaseObject }, 409: { description: 'Name taken' }, ...s.standardErrors },
      handler: async ({ params, body }) => ({ status: 201, body: await describeKnowledgeBase(db, await createKnowledgeBase(db, params.partner, body)) }),
    }),
    defineRoute<{ partner: string; kb: string }>({
      method: 'get', path: '/api/knowledgebases/{partner}/{kb}/limits', access: 'partner', summary: 'Budget status of a knowledge base',
      params: s.pathParams('partner', 'kb'), responses: { 200: { description: 'Budget status (spec 2.3)', schema: s.budgetStatusObject }, ...s.standardErrors },
      handler: async ({ params }) => ({ body: await budgetStatus(db, (await findKnowledgeBase(db, params.partner, params.kb)).kb.id) }),
    }),
    defineRoute<{ partner: string; kb: string }, unknown, LimitsPatch>({
      method: 'patch', path: '/api/knowledgebases/{partner}/{kb}/limits', access: 'partner', summary: 'Change budget limits',
      description: 'Omitted properties are kept; null removes a limit; lowering below usage blocks new spending immediately; raising wakes budget-blocked work.',
      params: s.pathParams('partner', 'kb'), body: { type: 'json', schema: s.limitsPatchBody },
      responses: { 200: { description: 'Budget status (spec 2.3)', schema: s.budgetStatusObject }, ...s.standardErrors },
      handler: async ({ params, body }) => {
        const { kb } = await findKnowledgeBase(db, params.partner, params.kb);
        await updateLimits(db, deps.temporal, kb.id, body);
        return { body: await budgetStatus(db, kb.id) };
      },
    }),
    defineRoute<{ partner: string; kb: string }>({
      method: 'get', path: '/api/knowledgebases/{partner}/{kb}/uncertain-operations', access: 'admin', summary: 'Operations whose provider outcome is unresolved',
      params: s.pathParams('partner', 'kb'), responses: { 200: { description: 'The operations whose outcome is unresolved', schema: s.uncertainOperationsAnswer }, ...s.standardErrors },
      handler: async ({ params }) => ({ body: { operations: await listUncertainOperations(db, (await findKnowledgeBase(db, params.partner, params.kb)).kb.id) } }),
    }),
    defineRoute<{ partner: string; kb: string }, unknown, ResolveOperationRequest>({
      method: 'post', path: '/api/knowledgebases/{partner}/{kb}/uncertain-operations/resolve', access: 'admin', summary: 'Resolve an uncertain operation',
      description: '`used: false` releases its hold; `used: true` records the given usage as a settled event. Then waiting work is woken.',
      params: s.pathParams('partner', 'kb'), body: { type: 'json', schema: s.resolveOperationBody },
      responses: { 200: { description: 'Budget status after resolution', schema: s.budgetStatusObject }, 409: { description: 'Not an uncertain operation of this KB' }, ...s.standardErrors },
      handler: async ({ params, body }) => {
        const { kb } = await findKnowledgeBase(db, params.partner, params.kb);
        await resolveOperation(db, deps.temporal, kb.id, body);
        return { body: await budgetStatus(db, kb.id) };
      },
    }),
    defineRoute<{ partner: string; kb: string }>({
      method: 'get', path: '/api/folders/{partner}/{kb}', access: 'partner', summary: 'List folder names',
      params: s.pathParams('partner', 'kb'), responses: { 200: { description: 'Folder names', schema: s.folderNamesAnswer }, ...s.standardErrors },
      handler: async ({ params }) => ({ body: { folders: (await listFolders(db, params.partner, params.kb)).map((f) => f.name) } }),
    }),
    defineRoute<{ partner: string; kb: string }, unknown, CreateChannelFolderInput & { type: 'regular' | 'video_channel' }>({
      method: 'post', path: '/api/folders/{partner}/{kb}', access: 'partner', summary: 'Create a folder',
      description:
        'A regular folder, or a `video_channel` folder with its channel source (workflow `channel-source-<id>`), created together. A channel folder waits up to 10 s for the first resolution of its channel: a channel that does not exist answers 404 and a channel another folder of the KB already has answers 409 (with `duplicate_source` and `duplicate_document_ids`); nothing is kept then.',
      params: s.pathParams('partner', 'kb'), body: { type: 'form', schema: s.createFolderForm },
      responses: {
        201: { description: '`{name, type, created_at}`, and `channel_source` (the folder_details entry) for a video_channel folder', schema: s.createdFolderAnswer },
        ...s.standardErrors,
        403: { description: 'No access, or video URLs are not enabled for the partner', schema: s.detailError },
        404: { description: 'Knowledge base, or the channel, does not exist', schema: s.detailError },
        409: { description: 'Name taken, or the channel already has a source in this KB' },
      },
      handler: async ({ params, body }) => {
        if (body.type === 'video_channel') return { status: 201, body: await createChannelFolder(channelDeps, params.partner, params.kb, body) };
        const folder = await createFolder(db, params.partner, params.kb, body);
        return { status: 201, body: { name: folder.name, type: folder.type, created_at: folder.createdAt.toISOString() } };
      },
    }),
    ...channelRoutes(deps),
    defineRoute<unknown, unknown, RagSearchRequest>({
      method: 'post', path: '/api/rag-test/search', access: 'authenticated', summary: 'Retrieval diagnostics',
      description: 'The key must have access to `partner` in the body. Non-admin keys must use the default top_k, search_multiplier and rrf_k, may not use collection_override / rag_index_override, and get no internal identifiers. Response fields (each stream\'s contribution to every fused result, the re-rank stage): docs/api/retrieval.md.',
      body: { type: 'json', schema: s.ragSearchBody },
      responses: { 200: { description: 'Effective configuration, per-retriever streams, combined_results, timings', schema: s.ragSearchResponse }, ...s.standardErrors },
      handler: async ({ body, principal }) => {
        if (!principal!.isAdmin && principal!.partnerName !== body.partner) throw forbidden('this key has no access to that partner');
        return { body: await ragSearch(deps, body, principal!.isAdmin) };
      },
    }),
    ...documentContentRoutes(deps),
    ...documentRoutes(deps),
    ...queueRoutes(deps),
    ...embeddingRoutes(deps),
  ];
}
