import { defineRoute, type RouteDefinition } from '../http/route.js';
import type { ApiDeps } from '../deps.js';
import type { JsonSchema } from '../http/validation.js';
import { forbidden } from '../../lib/platform/errors.js';
import { bulkRewrite, queueProcess } from '../../lib/knowledge/processing-requests.js';
import { clearOrphanMarkers, queueDebug, queueJobs, queueStatus, retryFailedRewrites } from '../../lib/knowledge/queue-admin.js';
import { readPrompt, replacePrompt } from '../../lib/rewrite/prompts.js';
import type { RequestedContentType } from '../../lib/contracts/document-pipeline.js';
import * as s from './schemas.js';

/** Processing on request, bulk rewrite, prompts and queue administration (knowledge-base spec 4.5). */

const contentType: JsonSchema = { type: 'string', enum: ['auto', 'article', 'video', 'book'], default: 'auto', description: 'Rewrite template; auto picks one per document (spec 4.5)' };
const personName: JsonSchema = { type: 'string', minLength: 1, maxLength: 200, description: 'Replaces {person_name} in the prompt (default: the document\'s, then the KB\'s expert_name)' };

const processQuery: JsonSchema = {
  type: 'object',
  required: ['partner', 'kb'],
  additionalProperties: false,
  properties: {
    action: { type: 'string', enum: ['digitize', 'rewrite'], default: 'digitize' },
    partner: s.partnerName,
    kb: s.nameString('Knowledge base name'),
    content_type: contentType,
    person_name: personName,
    character_limit: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'Request-level cap on digitized characters (digitize only)' },
  },
};

const processBody: JsonSchema = {
  type: 'object',
  required: ['document'],
  properties: {
    document: {
      type: 'object',
      required: ['id'],
      properties: { id: { type: 'string', format: 'uuid', description: 'The document to process' } },
      description: 'The document, as GET returns it; only `id` is read',
    },
  },
};

const bulkQuery: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    skip_rewritten: { type: 'boolean', default: true, description: 'Skip documents that have final rewritten content' },
    content_type: contentType,
    person_name: personName,
  },
};

const bulkResult: JsonSchema = {
  type: 'object',
  properties: {
    status: { const: 'queued' },
    total: { type: 'integer' },
    queued: { type: 'integer' },
    skipped: { type: 'integer' },
    results: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          document_id: { type: 'string' },
          name: { type: 'string' },
          status: { enum: ['queued', 'skipped'] },
          reason: { enum: ['not_digitized', 'already_rewritten', 'in_progress'] },
        },
      },
    },
  },
};

const promptParams: JsonSchema = { type: 'object', required: ['content_type'], properties: { content_type: { type: 'string', enum: ['auto', 'article', 'video', 'book'] } } };
const promptObject: JsonSchema = {
  type: 'object',
  properties: {
    content_type: { type: 'string' },
    resolved_content_type: { type: 'string' },
    prompt: { type: 'string', description: '`{person_name}` is replaced per document' },
    updated_at: { type: 'string', format: 'date-time' },
  },
};

type BulkQuery = { skip_rewritten: boolean; content_type: RequestedContentType; person_name?: string };

export function queueRoutes(deps: ApiDeps): RouteDefinition[] {
  const queueDeps = { db: deps.db, storage: deps.storage, temporal: deps.temporal, taskQueue: deps.config.temporalTaskQueue };
  const bulk = (partner: string, kb: string, query: BulkQuery, folder?: string) =>
    bulkRewrite(queueDeps, { partner, kb, folder, skipRewritten: query.skip_rewritten, contentType: query.content_type, personName: query.person_name });

  return [
    defineRoute<unknown, { action: 'digitize' | 'rewrite'; partner: string; kb: string; content_type: RequestedContentType; person_name?: string; character_limit?: number }, { document: { id: string } }>({
      method: 'post', path: '/api/queue/process', access: 'authenticated', summary: 'Digitize or rewrite one document',
      description: 'The key needs access to the partner in the query. `digitize` extracts the original again and continues as the document\'s auto_rewrite / use_original_as_rewritten say; `rewrite` rewrites the digitized content and embeds it. Budget blocks are not errors: the document shows `BUDGET_BLOCKED:` and resumes by itself.',
      query: processQuery, body: { type: 'json', schema: processBody },
      responses: { 202: { description: 'Queued', schema: s.processAnswer }, 409: { description: 'Already being processed, or nothing to process' }, ...s.standardErrors },
      handler: async ({ query, body, principal }) => {
        if (!principal!.isAdmin && principal!.partnerName !== query.partner) throw forbidden('this key has no access to that partner');
        const result = await queueProcess(queueDeps, {
          action: query.action, partner: query.partner, kb: query.kb, documentId: body.document.id,
          contentType: query.content_type, personName: query.person_name, characterLimit: query.character_limit,
        });
        return { status: 202, body: result };
      },
    }),
    defineRoute<{ partner: string; kb: string; folder: string }, BulkQuery>({
      method: 'post', path: '/api/bulk/rewrite/folder/{partner}/{kb}/{folder}', access: 'partner', summary: 'Rewrite every digitized document of a folder',
      params: s.pathParams('partner', 'kb', 'folder'), query: bulkQuery,
      responses: { 202: { description: 'Queued and skipped documents', schema: bulkResult }, 409: { description: 'KB being deleted' }, ...s.standardErrors },
      handler: async ({ params, query }) => ({ status: 202, body: await bulk(params.partner, params.kb, query, params.folder) }),
    }),
    defineRoute<{ partner: string; kb: string }, BulkQuery>({
      method: 'post', path: '/api/bulk/rewrite/kb/{partner}/{kb}', access: 'partner', summary: 'Rewrite every digitized document of a knowledge base',
      params: s.pathParams('partner', 'kb'), query: bulkQuery,
      responses: { 202: { description: 'Queued and skipped documents', schema: bulkResult }, 409: { description: 'KB being deleted' }, ...s.standardErrors },
      handler: async ({ params, query }) => ({ status: 202, body: await bulk(params.partner, params.kb, query) }),
    }),
    defineRoute<{ content_type: RequestedContentType }>({
      method: 'get', path: '/api/prompts/{content_type}', access: 'admin', summary: 'The rewrite prompt of a content type (`auto` resolves to `article`)',
      params: promptParams, responses: { 200: { description: 'Prompt', schema: promptObject }, ...s.standardErrors },
      handler: async ({ params }) => ({ body: await readPrompt(deps.db, params.content_type) }),
    }),
    defineRoute<{ content_type: RequestedContentType }, unknown, { prompt: string }>({
      method: 'put', path: '/api/prompts/{content_type}', access: 'admin', summary: 'Replace the rewrite prompt of a content type',
      description: 'Rewrites that start afterwards use the new prompt. `{person_name}` is replaced per document.',
      params: promptParams,
      body: { type: 'json', schema: { type: 'object', required: ['prompt'], additionalProperties: false, properties: { prompt: { type: 'string', minLength: 1, maxLength: 20000 } } } },
      responses: { 200: { description: 'Prompt', schema: promptObject }, ...s.standardErrors },
      handler: async ({ params, body }) => ({ body: await replacePrompt(deps.db, params.content_type, body.prompt) }),
    }),
    defineRoute({
      method: 'get', path: '/api/queue', access: 'admin', summary: 'Combined queue status',
      description: '`queues`: documents per queue (their `in_queues` markers); `jobs`: running document pipelines by status; `budget_blocked_documents`.',
      responses: { 200: { description: 'Queue status', schema: s.queueStatusAnswer }, ...s.standardErrors },
      handler: async () => ({ body: await queueStatus(queueDeps) }),
    }),
    defineRoute<unknown, { limit: number }>({
      method: 'get', path: '/api/queue/jobs', access: 'admin', summary: 'Running document pipeline jobs',
      query: { type: 'object', additionalProperties: false, properties: { limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } } },
      responses: { 200: { description: 'Running jobs', schema: s.queueJobsAnswer }, ...s.standardErrors },
      handler: async ({ query }) => ({ body: await queueJobs(queueDeps, query.limit) }),
    }),
    defineRoute({
      method: 'get', path: '/api/queue/debug', access: 'admin', summary: 'Queue markers correlated with running jobs',
      responses: { 200: { description: 'Markers and jobs', schema: s.queueDebugAnswer }, ...s.standardErrors },
      handler: async () => ({ body: await queueDebug(queueDeps) }),
    }),
    defineRoute({
      method: 'post', path: '/api/queue/retry-failed', access: 'admin', summary: 'Retry every failed rewrite',
      responses: { 200: { description: 'Queued again', schema: s.retryFailedAnswer }, ...s.standardErrors },
      handler: async () => ({ body: await retryFailedRewrites(queueDeps) }),
    }),
    defineRoute({
      method: 'delete', path: '/api/queue/clear-orphans', access: 'admin', summary: 'Clear queue markers of documents without a running job',
      responses: { 200: { description: 'Cleared', schema: s.clearOrphansAnswer }, ...s.standardErrors },
      handler: async () => ({ body: await clearOrphanMarkers(queueDeps) }),
    }),
  ];
}
