import type { Readable } from 'node:stream';
import yazl from 'yazl';
import { documentFiles } from '../../platform/storage.js';
import { findKnowledgeBase } from '../lookup.js';
import { safeFileName, type ContentDeps, type DocumentRow } from './versions.js';

/**
 * GET .../rewritten-bundle: a ZIP, produced as a stream (files are read one at a time while the
 * archive is sent), with `documents_info.json` first and then `<doc_id>.md` for every document of
 * the KB that has final rewritten content and is not being deleted.
 */
export async function rewrittenBundle(deps: Pick<ContentDeps, 'db' | 'storage'>, partner: string, kbName: string): Promise<{ filename: string; stream: Readable }> {
  const { kb } = await findKnowledgeBase(deps.db, partner, kbName);
  const rows = await deps.db.document.findMany({
    where: { knowledgeBaseId: kb.id, deletionRequestedAt: null, fileRewritten: { not: null } },
    include: { folder: true },
    orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
  });
  const present = (await Promise.all(rows.map(async (d) => ((await deps.storage.exists(documentFiles.rewritten(d.id))) ? d : null)))).filter((d): d is DocumentRow => d !== null);
  const info = present.map((d) => ({
    id: d.id,
    name: d.name,
    folder: d.folder.name,
    file: `${d.id}.md`,
    final_rewrite_char_count: d.finalRewriteCharCount,
    updated_at: d.updatedAt.toISOString(),
  }));

  const zip = new yazl.ZipFile();
  const output = zip.outputStream as Readable;
  // yazl reports its own failures as 'error' events; a failed read stream must end the download
  // (the client then sees a broken transfer rather than a silently truncated archive).
  zip.on('error', (err: Error) => output.destroy(err));
  zip.addBuffer(Buffer.from(`${JSON.stringify(info, null, 2)}\n`), 'documents_info.json');
  for (const d of present) {
    zip.addReadStreamLazy(`${d.id}.md`, (cb) => {
      deps.storage.stream(documentFiles.rewritten(d.id)).then(
        (stream) => {
          stream.on('error', (err) => zip.emit('error', err));
          cb(null, stream);
        },
        (err: Error) => zip.emit('error', err),
      );
    });
  }
  zip.end();
  return { filename: safeFileName(`${kb.name}-rewritten.zip`, 'rewritten.zip'), stream: output };
}
