import type { Db } from '../platform/db.js';
import { badRequest, notFound } from '../platform/errors.js';
import { isBlank } from '../platform/text.js';
import type { RequestedContentType, RewriteContentType } from '../contracts/document-pipeline.js';

/** Rewrite prompts (spec 4.5 GET /api/prompts/{content_type}): `auto` resolves to `article`. */
export async function readPrompt(db: Db, requested: RequestedContentType) {
  const contentType: RewriteContentType = requested === 'auto' ? 'article' : requested;
  const row = await db.rewritePrompt.findUnique({ where: { contentType } });
  if (!row) throw notFound(`no prompt is configured for content type ${contentType}`);
  return { content_type: requested, resolved_content_type: contentType, prompt: row.prompt, updated_at: row.updatedAt.toISOString() };
}

/** Replaces a content type's prompt; rewrites started afterwards use it (running attempts keep theirs). */
export async function replacePrompt(db: Db, requested: RequestedContentType, prompt: string) {
  if (requested === 'auto') throw badRequest('auto is not a prompt of its own (it resolves per document); set article, video or book');
  if (isBlank(prompt)) throw badRequest('body.prompt must not be blank');
  await db.rewritePrompt.upsert({ where: { contentType: requested }, create: { contentType: requested, prompt }, update: { prompt } });
  return readPrompt(db, requested);
}
