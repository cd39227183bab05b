import { defineRoute, type RouteDefinition } from '../http/route.js';
import type { ApiDeps } from '../deps.js';
import { presentDocument } from '../../lib/knowledge/presenters.js';
import { batchUploadLimits, createDocumentFromUpload, createDocumentsFromBatch, createDocumentsFromUrls, type BatchUploadInput, type BatchUrlInput, type CreateDocumentInput, createEmptyDocument, updateDocumentFields } from '../../lib/knowledge/documents.js';
import { findDocument } from '../../lib/knowledge/lookup.js';
import { combinedKnowledgeBaseData, kbStats, listKnowledgeBaseDocuments, type ListingPage } from '../../lib/knowledge/document-views.js';
import { deleteDocument, deleteFolder, deleteKnowledgeBase } from '../../lib/knowledge/deletion.js';
import { channelFolderDetails } from '../../lib/channels/views.js';
import { vendorSyncSummary } from '../../lib/vendor-sync/vendor-sync.js';
import * as s from './schemas.js';

/** Documents, and deletion of documents, folders and knowledge bases (spec 4.1-4.3). */
export function documentRoutes(deps: ApiDeps): RouteDefinition[] {
  const { db } = deps;
  const deletionDeps = { db, temporal: deps.temporal, taskQueue: deps.config.temporalTaskQueue };
  type P = { partner: string; kb: string };
  type PD = P & { doc_id: string };

  return [
    defineRoute<{ partner: string; kb: string }, unknown, CreateDocumentInput>({
      method: 'post', path: '/api/documents/{partner}/{kb}', access: 'partner', summary: 'Create a document from an upload',
      description: 'Stores the original and starts its workflow `document-<id>`. Answers with the document object (spec 2.5).',
      params: s.pathParams('partner', 'kb'), body: { type: 'form', schema: s.createDocumentForm, files: [{ name: 'file', maxCount: 1 }] },
      responses: { 201: { description: 'The new document', schema: s.documentObject }, 413: { description: 'File too large' }, 501: { description: 'Format or option not available yet' }, ...s.standardErrors },
      handler: async ({ params, body, files, principal }) => {
        const doc = await createDocumentFromUpload({ db, storage: deps.storage, temporal: deps.temporal, taskQueue: deps.config.temporalTaskQueue }, params.partner, params.kb, body, files);
        return { status: 201, body: presentDocument(doc, { admin: principal!.isAdmin }) };
      },
    }),
    defineRoute<{ partner: string; kb: string; doc_id: string }>({
      method: 'get', path: '/api/document/{partner}/{kb}/{doc_id}', access: 'partner', summary: 'Read one document',
      params: s.pathParams('partner', 'kb', 'doc_id'), responses: { 200: { description: 'Document (spec 2.5)', schema: s.documentObject }, ...s.standardErrors },
      handler: async ({ params, principal }) => {
        const { document } = await findDocument(db, params.partner, params.kb, params.doc_id);
        return { body: presentDocument(document, { admin: principal!.isAdmin }) };
      },
    }),
    defineRoute<P, unknown, BatchUrlInput>({
      method: 'post', path: '/api/documents/{partner}/{kb}/batch', access: 'partner', summary: 'Import up to 1,000 URLs',
      description: 'One document per URL, each created and admitted on its own. Answers `{summary: {total, succeeded, failed}, results: [{url, status: success|failed, document_id, error?}]}`.',
      params: s.pathParams('partner', 'kb'), body: { type: 'json', schema: s.batchUrlBody },
      responses: { 200: { description: 'Per-URL results and summary', schema: s.batchUrlAnswer }, ...s.standardErrors },
      handler: async ({ params, body }) => ({
        body: await createDocumentsFromUrls({ db, storage: deps.storage, temporal: deps.temporal, taskQueue: deps.config.temporalTaskQueue }, params.partner, params.kb, body),
      }),
    }),
    defineRoute<P, unknown, BatchUploadInput>({
      method: 'post', path: '/api/documents/{partner}/{kb}/files/batch', access: 'partner', summary: 'Upload several files at once',
      description: `Field \`files\` (repeatable), at most ${batchUploadLimits.maxFiles} files and ${batchUploadLimits.maxTotalBytes / 1024 ** 3} GiB in total. Each file is validated and admitted on its own; one failure never rolls back the others. Answers \`{summary: {total, succeeded, failed}, results: [{filename, status, document_id, error?, http_status?}]}\`.`,
      params: s.pathParams('partner', 'kb'), body: { type: 'form', schema: s.batchUploadForm, files: [{ name: 'files', maxCount: batchUploadLimits.maxFiles }], maxTotalBytes: Math.min(batchUploadLimits.maxTotalBytes, deps.config.limits.batchUploadMaxBytes) },
      responses: { 200: { description: 'Per-file results and summary', schema: s.batchUploadAnswer }, 413: { description: 'Batch too large' }, ...s.standardErrors },
      handler: async ({ params, body, files }) => ({
        body: await createDocumentsFromBatch({ db, storage: deps.storage, temporal: deps.temporal, taskQueue: deps.config.temporalTaskQueue }, params.partner, params.kb, body, files),
      }),
    }),
    defineRoute<P, ListingPage>({
      method: 'get', path: '/api/documents/{partner}/{kb}', access: 'partner', summary: 'The knowledge base with all its documents',
      description: 'The KB object (2.2) plus `documents` (2.5, each with `lifetime_usage`, in creation order) and `embedding_info` (aggregate counts). Optional `limit` (1-1000) and `cursor` page through the documents: the answer then also has `next_cursor` (null on the last page). Without them, every document.',
      params: s.pathParams('partner', 'kb'), query: s.listingQuery, responses: { 200: { description: 'KB with documents', schema: s.documentListingAnswer }, ...s.standardErrors },
      handler: async ({ params, query, principal }) => ({ body: await listKnowledgeBaseDocuments(db, params.partner, params.kb, principal!.isAdmin, query) }),
    }),
    defineRoute<P, ListingPage>({
      method: 'get', path: '/api/kb-data/{partner}/{kb}', access: 'partner', summary: 'Combined knowledge-base data (spec 2.6)',
      description: 'Optional `limit` (1-1000) and `cursor` page through `documents` as on `GET /api/documents/{partner}/{kb}` (then `next_cursor`); every other field is whole on every page.',
      params: s.pathParams('partner', 'kb'), query: s.listingQuery, responses: { 200: { description: 'Combined data (spec 2.6)', schema: s.combinedDataAnswer }, ...s.standardErrors },
      handler: async ({ params, query, principal }) => ({
        body: await combinedKnowledgeBaseData(db, params.partner, params.kb, principal!.isAdmin, { folderDetails: (kbId) => channelFolderDetails(db, kbId), vendorSync: (kbId) => vendorSyncSummary(db, kbId) }, query),
      }),
    }),
    defineRoute<P>({
      method: 'get', path: '/api/kb-stats/{partner}/{kb}', access: 'partner', summary: 'Knowledge-base statistics (spec 2.6)',
      params: s.pathParams('partner', 'kb'), responses: { 200: { description: 'Counts and character totals', schema: s.kbStatsAnswer }, ...s.standardErrors },
      handler: async ({ params }) => ({ body: await kbStats(db, params.partner, params.kb) }),
    }),
    defineRoute<P, unknown, { name: string; folder: string; type: 'file' | 'url'; url?: string }>({
      method: 'post', path: '/api/documents/{partner}/{kb}/empty', access: 'partner', summary: 'Create an empty document for manual content editing',
      params: s.pathParams('partner', 'kb'), body: { type: 'form', schema: s.emptyDocumentForm },
      responses: { 201: { description: 'The new document', schema: s.documentObject }, ...s.standardErrors },
      handler: async ({ params, body, principal }) => ({ status: 201, body: presentDocument(await createEmptyDocument(db, params.partner, params.kb, body), { admin: principal!.isAdmin }) }),
    }),
    ...(['name', 'type', 'url'] as const).map((field) =>
      defineRoute<PD, unknown, Record<string, string>>({
        method: 'put', path: `/api/documents/{partner}/{kb}/{doc_id}/${field}`, access: 'partner', summary: `Change the document's ${field}`,
        params: s.pathParams('partner', 'kb', 'doc_id'), body: { type: 'form', schema: field === 'name' ? s.renameForm : field === 'type' ? s.typeForm : s.urlForm },
        responses: { 200: { description: 'The updated document', schema: s.documentObject }, 409: { description: 'Document being deleted' }, ...s.standardErrors },
        handler: async ({ params, body, principal }) => ({
          body: presentDocument(await updateDocumentFields(db, params.partner, params.kb, params.doc_id, { [field]: body[field] }), { admin: principal!.isAdmin }),
        }),
      }),
    ),
    defineRoute<PD, { force: boolean }>({
      method: 'delete', path: '/api/documents/{partner}/{kb}/{doc_id}', access: 'partner', summary: 'Delete a document',
      description: 'Cancels active processing and removes vectors, files and the row. `status: deleted` when finished within a few seconds, else `delete_pending` with `pending_cleanup`. With `force=false`: 409 while processing is active.',
      params: s.pathParams('partner', 'kb', 'doc_id'), query: s.forceQuery,
      responses: { 200: { description: 'Deletion result', schema: s.deletionResult }, 409: { description: 'force=false and processing is active' }, ...s.standardErrors },
      handler: async ({ params, query }) => ({ body: await deleteDocument(deletionDeps, params.partner, params.kb, params.doc_id, query.force) }),
    }),
    defineRoute<P & { folder: string }>({
      method: 'delete', path: '/api/folders/{partner}/{kb}/{folder}', access: 'partner', summary: 'Delete a folder and its documents',
      params: s.pathParams('partner', 'kb', 'folder'), responses: { 200: { description: 'Deletion result', schema: s.deletionResult }, ...s.standardErrors },
      handler: async ({ params }) => ({ body: await deleteFolder(deletionDeps, params.partner, params.kb, params.folder) }),
    }),
    defineRoute<P>({
      method: 'delete', path: '/api/knowledgebases/{partner}/{kb}', access: 'partner', summary: 'Delete a knowledge base with everything in it',
      params: s.pathParams('partner', 'kb'), responses: { 200: { description: 'Deletion result', schema: s.deletionResult }, ...s.standardErrors },
      handler: async ({ params }) => ({ body: await deleteKnowledgeBase(deletionDeps, params.partner, params.kb) }),
    }),
  ];
}
