import { pipeline } from 'node:stream/promises';
import type { Readable } from 'node:stream';
import type { Response } from 'express';
import { defineRoute, type RouteDefinition } from '../http/route.js';
import type { ApiDeps } from '../deps.js';
import type { JsonSchema } from '../http/validation.js';
import { presentDocument } from '../../lib/knowledge/presenters.js';
import { contentVersions, editableContentVersions, openDownload, readContent, type ContentDeps, type ContentFormat, type ContentVersion, type EditableContentVersion } from '../../lib/knowledge/content/versions.js';
import { updateContent, type ContentUpdateResult } from '../../lib/knowledge/content/updates.js';
import { rewrittenBundle } from '../../lib/knowledge/content/bundle.js';
import { badRequest } from '../../lib/platform/errors.js';
import * as s from './schemas.js';

/** Document content endpoints (knowledge-base spec 4.4); the logic is in lib/knowledge/content/. */

const withType = (types: readonly string[]): JsonSchema => {
  const base = s.pathParams('partner', 'kb', 'doc_id');
  return {
    ...base,
    required: [...(base.required as string[]), 'type'],
    properties: { ...(base.properties as object), type: { type: 'string', enum: [...types], description: 'Content version' } },
  };
};

const contentQuery: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    format: {
      type: 'string',
      enum: ['raw', 'markdown'],
      default: 'raw',
      description: '`markdown` renders rewritten/draft content as clean Markdown; ignored for original and digitized',
    },
  },
};

const characterLimit: JsonSchema = {
  type: 'integer',
  minimum: 1,
  maximum: Number.MAX_SAFE_INTEGER,
  description: 'Digitized only: request-level cap on the KB\'s digitized characters (the smaller of it and the KB limit applies); ignored for original and rewritten',
};

const contentForm: JsonSchema = {
  type: 'object',
  required: ['content'],
  additionalProperties: false,
  properties: { content: { type: 'string', description: 'The new content (UTF-8 text)' }, character_limit: characterLimit },
};

const uploadForm: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: { character_limit: characterLimit },
};

const contentResponse: JsonSchema = {
  type: 'object',
  required: ['content', 'format'],
  properties: { content: { type: 'string' }, format: { type: 'string', enum: ['raw', 'markdown'] } },
};

const budgetBlockedResponse: JsonSchema = {
  type: 'object',
  description: 'Digitized content blocked by the KB budget: kept as pending work that resumes by itself',
  properties: {
    status: { type: 'string', enum: ['budget_blocked'] },
    filename: { type: 'string' },
    reason: { type: 'string' },
    detail: { type: 'string' },
    document_id: { type: 'string', format: 'uuid' },
  },
};

const updateDescription =
  'original: replaces a text original (no quota effect, no processing). digitized: admitted against the character budget at once; ' +
  'rejected only by the request-level character_limit → 403 `QUOTA_EXCEEDED:knowledge_chars` (nothing changes); blocked by the KB budget → ' +
  '200 `{status: budget_blocked, filename, reason}` and the content waits as pending work (the previous digitized content stays until it is accepted). ' +
  'rewritten: saved as final rewritten content, the document\'s vectors are removed and a fresh embedding is queued. ' +
  '409 while the document is being processed or deleted. Answers with the document (spec 2.5).';

type ContentParams = { partner: string; kb: string; doc_id: string; type: ContentVersion };
type EditParams = { partner: string; kb: string; doc_id: string; type: EditableContentVersion };

async function streamFile(res: Response, file: { stream: NodeJS.ReadableStream; filename: string; contentType: string }) {
  res.attachment(file.filename);
  res.setHeader('Content-Type', file.contentType);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  try {
    await pipeline(file.stream as Readable, res);
  } catch (err) {
    // A client that goes away mid-download is not a server error.
    if ((err as NodeJS.ErrnoException).code === 'ERR_STREAM_PREMATURE_CLOSE') return;
    throw err;
  }
}

export function documentContentRoutes(deps: ApiDeps): RouteDefinition[] {
  const contentDeps: ContentDeps = { db: deps.db, storage: deps.storage, index: deps.index, temporal: deps.temporal, taskQueue: deps.config.temporalTaskQueue };
  const updateErrors = {
    ...s.standardErrors,
    403: { description: 'No access, or `QUOTA_EXCEEDED:knowledge_chars` (digitized content over the request-level character_limit)', schema: s.detailError },
    409: { description: 'The document is being processed or deleted', schema: s.detailError },
  };
  const answer = (result: ContentUpdateResult, admin: boolean) =>
    result.status === 'budget_blocked'
      ? { body: { status: result.status, filename: result.filename, reason: result.reason, detail: result.detail, document_id: result.document.id } }
      : { body: presentDocument(result.document, { admin }) };

  return [
    // Registered before any `{doc_id}` route of the same shape could capture it.
    defineRoute<{ partner: string; kb: string }>({
      method: 'get', path: '/api/documents/{partner}/{kb}/rewritten-bundle', access: 'partner', summary: 'Download all final rewritten content as a ZIP',
      description: 'A streamed ZIP archive: `documents_info.json` (array of `{id, name, folder, file, final_rewrite_char_count, updated_at}`) and one `<doc_id>.md` per document with final rewritten content.',
      params: s.pathParams('partner', 'kb'),
      responses: { 200: { description: 'ZIP archive', contentType: 'application/zip', schema: { type: 'string', format: 'binary' } }, ...s.standardErrors },
      handler: async ({ params, res }) => {
        const bundle = await rewrittenBundle(contentDeps, params.partner, params.kb);
        await streamFile(res, { stream: bundle.stream, filename: bundle.filename, contentType: 'application/zip' });
        return undefined;
      },
    }),
    defineRoute<ContentParams, { format: ContentFormat }>({
      method: 'get', path: '/api/documents/{partner}/{kb}/{doc_id}/content/{type}', access: 'partner', summary: 'Read a content version',
      description: '`{content, format}`. 404 when the version does not exist; 400 for format=markdown on rewritten/draft content that does not exist yet, and for a binary original (use download).',
      params: withType(contentVersions), query: contentQuery,
      responses: { 200: { description: '`{content, format}`', schema: contentResponse }, ...s.standardErrors },
      handler: async ({ params, query }) => ({ body: await readContent(contentDeps, params.partner, params.kb, params.doc_id, params.type, query.format) }),
    }),
    defineRoute<EditParams, unknown, { content: string; character_limit?: number }>({
      method: 'put', path: '/api/documents/{partner}/{kb}/{doc_id}/content/{type}', access: 'partner', summary: 'Replace a content version with text',
      description: updateDescription,
      params: withType(editableContentVersions), body: { type: 'form', schema: contentForm },
      responses: { 200: { description: 'The document (spec 2.5), or `{status: budget_blocked, ...}`', schema: { oneOf: [s.documentObject, budgetBlockedResponse] } }, ...updateErrors },
      handler: async ({ params, body, requestId, principal }) => {
        const result = await updateContent(contentDeps, params.partner, params.kb, params.doc_id, params.type, { text: body.content, characterLimit: body.character_limit ?? null, requestId });
        return answer(result, principal!.isAdmin);
      },
    }),
    defineRoute<EditParams, unknown, { character_limit?: number }>({
      method: 'post', path: '/api/documents/{partner}/{kb}/{doc_id}/content/{type}', access: 'partner', summary: 'Replace a content version with an uploaded file',
      description: `Multipart field \`file\`. Digitized and rewritten files must be UTF-8 text; an original must be a text file (.txt, .md, .markdown). ${updateDescription}`,
      params: withType(editableContentVersions), body: { type: 'form', schema: uploadForm, files: [{ name: 'file', maxCount: 1 }] },
      responses: { 200: { description: 'The document (spec 2.5), or `{status: budget_blocked, filename, ...}`', schema: { oneOf: [s.documentObject, budgetBlockedResponse] } }, 413: { description: 'File too large' }, ...updateErrors },
      handler: async ({ params, body, files, requestId, principal }) => {
        const file = files.find((f) => f.field === 'file');
        if (!file) throw badRequest('form.file is required');
        const result = await updateContent(contentDeps, params.partner, params.kb, params.doc_id, params.type, { file, characterLimit: body.character_limit ?? null, requestId });
        return answer(result, principal!.isAdmin);
      },
    }),
    defineRoute<ContentParams>({
      method: 'get', path: '/api/documents/{partner}/{kb}/{doc_id}/download/{type}', access: 'partner', summary: 'Download a content version as a file',
      description: 'Original: the uploaded file with its media type and name. Other versions: `text/markdown`, named `<document name>.<type>.md`.',
      params: withType(contentVersions),
      responses: { 200: { description: 'The file (Content-Disposition: attachment): a version as `text/markdown`, the original with the media type it was uploaded with', contentType: ['text/markdown', '*/*'], schema: { type: 'string', format: 'binary' } }, ...s.standardErrors },
      handler: async ({ params, res }) => {
        await streamFile(res, await openDownload(contentDeps, params.partner, params.kb, params.doc_id, params.type));
        return undefined;
      },
    }),
  ];
}
