import { defineRoute, type RouteDefinition } from '../http/route.js';
import type { ApiDeps } from '../deps.js';
import type { JsonSchema } from '../http/validation.js';
import * as s from './schemas.js';
import { embedSingleDocument, embeddingStatusOf, retryFailedEmbeddings, type EmbeddingDeps } from '../../lib/retrieval/embedding-status.js';
import { tableOfContents } from '../../lib/retrieval/toc.js';
import { backfillVendorSync, retryFailedVendorSync, vendorSyncStatus, type VendorSyncDeps } from '../../lib/vendor-sync/vendor-sync.js';

type PK = { partner: string; kb: string };

const embedQuery: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: { force: { type: 'boolean', default: true, description: 'false: leave a document that is already embedded (or queued) alone' } },
};
const tocQuery: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: { include_status: { type: 'boolean', default: false, description: 'include every document with its embedding status' } },
};

/** Embedding status and jobs, the table of contents, vendor sync (spec 4.5). */
export function embeddingRoutes(deps: ApiDeps): RouteDefinition[] {
  const { db } = deps;
  const embeddingDeps: EmbeddingDeps = { db, temporal: deps.temporal, taskQueue: deps.config.temporalTaskQueue, embedder: deps.embedder };
  const syncDeps: VendorSyncDeps = { db, temporal: deps.temporal, taskQueue: deps.config.temporalTaskQueue };

  return [
    defineRoute<PK>({
      method: 'get', path: '/api/embedding/{partner}/{kb}', access: 'partner', summary: 'Aggregate embedding status (spec 2.6); starts nothing',
      params: s.pathParams('partner', 'kb'), responses: { 200: { description: 'Embedding status', schema: s.embeddingStatusAnswer }, ...s.standardErrors },
      handler: async ({ params }) => ({ body: await embeddingStatusOf(db, params.partner, params.kb) }),
    }),
    defineRoute<PK>({
      method: 'post', path: '/api/embedding/{partner}/{kb}/retry-failed', access: 'partner', summary: 'Queue every document whose embedding failed',
      params: s.pathParams('partner', 'kb'), responses: { 200: { description: 'Queued documents and the status', schema: s.retryFailedEmbeddingsAnswer }, 409: { description: 'KB being deleted' }, ...s.standardErrors },
      handler: async ({ params }) => ({ body: await retryFailedEmbeddings(embeddingDeps, params.partner, params.kb) }),
    }),
    defineRoute<PK & { doc_id: string }, { force: boolean }>({
      method: 'post', path: '/api/embedding/{partner}/{kb}/documents/{doc_id}', access: 'partner', summary: 'Embed one document',
      description: 'Rejected (409) without final rewritten content, while the document is in the digitize or rewrite queue, or while its pipeline runs.',
      params: s.pathParams('partner', 'kb', 'doc_id'), query: embedQuery,
      responses: { 200: { description: 'The job, the document and the status', schema: s.embedDocumentAnswer }, 409: { description: 'Not embeddable now' }, ...s.standardErrors },
      handler: async ({ params, query, principal }) => ({ body: await embedSingleDocument(embeddingDeps, params.partner, params.kb, params.doc_id, query.force, principal!.isAdmin) }),
    }),
    defineRoute<PK, { include_status: boolean }>({
      method: 'get', path: '/api/toc/{partner}/{kb}', access: 'partner', summary: 'Table of contents from the embedding manifests',
      params: s.pathParams('partner', 'kb'), query: tocQuery,
      responses: { 200: { description: 'Table of contents', schema: s.tocAnswer }, ...s.standardErrors },
      handler: async ({ params, query }) => ({ body: await tableOfContents(db, params.partner, params.kb, query.include_status) }),
    }),
    defineRoute<PK>({
      method: 'get', path: '/api/vendor-sync/{partner}/{kb}', access: 'admin', summary: 'Vendor vector-store sync status of a KB',
      params: s.pathParams('partner', 'kb'), responses: { 200: { description: 'Sync status', schema: s.vendorSyncStatusAnswer }, ...s.standardErrors },
      handler: async ({ params }) => ({ body: await vendorSyncStatus(db, params.partner, params.kb) }),
    }),
    defineRoute<PK>({
      method: 'post', path: '/api/vendor-sync/{partner}/{kb}/backfill', access: 'admin', summary: 'Queue every rewritten document for vendor sync',
      params: s.pathParams('partner', 'kb'), responses: { 200: { description: 'Queued', schema: s.vendorSyncQueuedAnswer }, 409: { description: 'Sync disabled or KB being deleted' }, ...s.standardErrors },
      handler: async ({ params }) => ({ body: await backfillVendorSync(syncDeps, params.partner, params.kb) }),
    }),
    defineRoute<PK>({
      method: 'post', path: '/api/vendor-sync/{partner}/{kb}/retry-failed', access: 'admin', summary: 'Queue documents whose vendor sync failed',
      params: s.pathParams('partner', 'kb'), responses: { 200: { description: 'Queued', schema: s.vendorSyncQueuedAnswer }, 409: { description: 'Sync disabled or KB being deleted' }, ...s.standardErrors },
      handler: async ({ params }) => ({ body: await retryFailedVendorSync(syncDeps, params.partner, params.kb) }),
    }),
  ];
}
