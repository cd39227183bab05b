import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import zlib from 'node:zlib';
import { client, eventually, startWorker, useRunningSystem } from '../support/system.js';
import { newKnowledgeBase, newPartner, unique } from '../support/fixtures.js';
import { documentWorkflowId } from '../../lib/contracts/document-pipeline.js';
import { documentFiles } from '../../lib/platform/storage.js';
import { pdf } from '../support/samples.js';
import { WorkflowNotFoundError } from '@temporalio/client';

/**
 * Document content (knowledge-base spec 4.4): reading versions, clean Markdown, replacing
 * original / digitized / rewritten content under the character budget, downloads and the
 * rewritten bundle. Everything runs against the real API, worker, Postgres, Temporal and Weaviate.
 */

type Kb = Awaited<ReturnType<typeof newKnowledgeBase>>;

const chars = (n: number, c = 'x') => c.repeat(n - 1) + '\n';

/** Entries of a ZIP archive, read from its central directory (stored or deflated entries). */
function unzip(buf: Buffer): Map<string, Buffer> {
  let eocd = buf.length - 22;
  while (eocd >= 0 && buf.readUInt32LE(eocd) !== 0x06054b50) eocd--;
  assert.ok(eocd >= 0, 'the archive has an end-of-central-directory record');
  const count = buf.readUInt16LE(eocd + 10);
  let p = buf.readUInt32LE(eocd + 16);
  const entries = new Map<string, Buffer>();
  for (let i = 0; i < count; i++) {
    assert.equal(buf.readUInt32LE(p), 0x02014b50, 'central directory entry');
    const method = buf.readUInt16LE(p + 10);
    const crc = buf.readUInt32LE(p + 16);
    const compressedSize = buf.readUInt32LE(p + 20);
    const nameLength = buf.readUInt16LE(p + 28);
    const extraLength = buf.readUInt16LE(p + 30);
    const commentLength = buf.readUInt16LE(p + 32);
    const local = buf.readUInt32LE(p + 42);
    const name = buf.subarray(p + 46, p + 46 + nameLength).toString('utf8');
    assert.equal(buf.readUInt32LE(local), 0x04034b50, 'local file header');
    const start = local + 30 + buf.readUInt16LE(local + 26) + buf.readUInt16LE(local + 28);
    const raw = buf.subarray(start, start + compressedSize);
    const data = method === 8 ? zlib.inflateRawSync(raw) : Buffer.from(raw);
    const zlibCrc = (zlib as unknown as { crc32?: (b: Buffer) => number }).crc32;
    if (zlibCrc) assert.equal(zlibCrc(data) >>> 0, crc, `CRC of ${name}`);
    entries.set(name, data);
    p += 46 + nameLength + extraLength + commentLength;
  }
  return entries;
}

/** The file name of an `attachment` Content-Disposition (quoted or a plain token). */
function disposition(res: Response): string | undefined {
  const m = /^attachment; filename=(?:"([^"]*)"|([^;\s]+))$/.exec(res.headers.get('content-disposition') ?? '');
  return m ? (m[1] ?? m[2]) : undefined;
}

const messyMarkdown =
  '# Title\r\nIntro line   \r\n\r\n\r\n\r\nMore text\t\r\n## Section\r\nBody\r\n```js\r\nconst x = 1;   \r\n\r\n\r\n```\r\n\r\n\r\n';
const cleanMarkdown = '# Title\n\nIntro line\n\nMore text\n\n## Section\n\nBody\n\n```js\nconst x = 1;   \n\n\n```\n';

const oldArticle = (() => {
  const out = ['# Lighthouse keeping'];
  for (let i = 0; i < 40; i++) {
    out.push(
      `Entry ${i}: the keeper of the Skerryvore lighthouse trimmed the lamp wicks at dusk and sounded the fog horn every ninety seconds ` +
        `while fishing boats ${i} and ${i + 1} searched for the channel past the reef near marker ${i * 3}.`,
    );
  }
  return out.join('\n\n');
})();
const newArticle = '# Volcanic glass\n\nObsidian forms when felsic lava cools so quickly that crystals cannot grow; knappers split it into blades sharper than surgical steel.\n';

describe('document content (spec 4.4)', function () {
  this.timeout(240_000);
  const system = useRunningSystem();
  const http: ReturnType<typeof client> = (...args) => system.http(...args);
  const db = () => system.api.deps.db;

  const docPath = (k: Kb, id: string) => `/api/documents/${k.partner.name}/${k.kb}/${id}`;
  const read = async (k: Kb, id: string) => (await http('GET', `/api/document/${k.partner.name}/${k.kb}/${id}`, { key: k.partner.key })).body;
  const limits = async (k: Kb) => (await http('GET', `/api/knowledgebases/${k.partner.name}/${k.kb}/limits`, { key: k.partner.key })).body;
  const getContent = (k: Kb, id: string, type: string, format?: string) =>
    http('GET', `${docPath(k, id)}/content/${type}${format ? `?format=${format}` : ''}`, { key: k.partner.key });
  const putContent = (k: Kb, id: string, type: string, form: Record<string, string>) => http('PUT', `${docPath(k, id)}/content/${type}`, { key: k.partner.key, form });

  async function upload(k: Kb, content: string, options: { name?: string; asRewritten?: boolean } = {}) {
    const res = await http('POST', `/api/documents/${k.partner.name}/${k.kb}`, {
      key: k.partner.key,
      form: { type: 'file', folder: k.folder, use_original_as_rewritten: String(options.asRewritten ?? false), file: { name: options.name ?? `${unique('doc')}.txt`, content } },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.id as string;
  }

  /** Waits until the document's workflow has closed, so that content updates are accepted. */
  async function idle(id: string) {
    await eventually(`workflow of ${id} to close`, async () => {
      try {
        return (await system.api.deps.temporal.workflow.getHandle(documentWorkflowId(id)).describe()).status.name !== 'RUNNING';
      } catch (err) {
        return err instanceof WorkflowNotFoundError;
      }
    });
  }

  async function processed(k: Kb, id: string, until: (d: any) => boolean) {
    const d = await eventually(`document ${id}`, async () => {
      const doc = await read(k, id);
      return until(doc) ? doc : null;
    });
    await idle(id);
    return d;
  }

  /** A document whose original is a PDF, made directly (this build cannot digitize PDFs yet). */
  async function pdfDocument(k: Kb) {
    const kbRow = await db().knowledgeBase.findFirstOrThrow({ where: { name: k.kb, partner: { name: k.partner.name } } });
    const folder = await db().folder.findFirstOrThrow({ where: { knowledgeBaseId: kbRow.id, name: k.folder } });
    const id = crypto.randomUUID();
    const bytes = Buffer.concat([Buffer.from('%PDF-1.4\n'), crypto.randomBytes(64)]);
    await system.api.deps.storage.write(documentFiles.original(id, 'pdf'), bytes);
    await db().document.create({ data: { id, knowledgeBaseId: kbRow.id, folderId: folder.id, name: 'scan.pdf', type: 'file', originalExtension: 'pdf', fileOriginal: 'scan.pdf' } });
    return { id, bytes };
  }

  it('reads every version raw, renders rewritten and draft content as clean Markdown, and answers 400/404 by the rules', async () => {
    const k = await newKnowledgeBase(http);
    const id = await upload(k, messyMarkdown, { name: 'guide.md', asRewritten: true });
    await processed(k, id, (d) => d.embedding_status === 'success');

    let r = await getContent(k, id, 'original');
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body, { content: messyMarkdown, format: 'raw' });
    r = await getContent(k, id, 'original', 'markdown');
    assert.deepEqual(r.body, { content: messyMarkdown, format: 'raw' }, 'markdown is ignored for the original');
    const normalised = messyMarkdown.replace(/\r\n/g, '\n');
    r = await getContent(k, id, 'digitized', 'markdown');
    assert.deepEqual(r.body, { content: normalised, format: 'raw' }, 'markdown is ignored for digitized content');
    r = await getContent(k, id, 'rewritten', 'raw');
    assert.deepEqual(r.body, { content: normalised, format: 'raw' });
    r = await getContent(k, id, 'rewritten', 'markdown');
    assert.deepEqual(r.body, { content: cleanMarkdown, format: 'markdown' });

    r = await getContent(k, id, 'rewritten', 'html');
    assert.equal(r.status, 400);
    assert.match(r.body.detail, /format must be one of raw, markdown/);
    r = await getContent(k, id, 'draft');
    assert.equal(r.status, 404);
    assert.match(r.body.detail, /has no rewritten draft content/);
    r = await getContent(k, id, 'draft', 'markdown');
    assert.equal(r.status, 400, 'markdown for a draft that does not exist');
    assert.equal((await getContent(k, id, 'summary')).status, 400, 'unknown content type');
    assert.equal((await getContent(k, crypto.randomUUID(), 'original')).status, 404);

    // A draft (written by the rewrite step once it exists) is read and rendered the same way.
    await system.api.deps.storage.write(documentFiles.rewrittenDraft(id), messyMarkdown);
    await db().document.update({ where: { id }, data: { fileRewrittenDraft: 'rewritten_draft.md' } });
    r = await getContent(k, id, 'draft', 'markdown');
    assert.deepEqual(r.body, { content: cleanMarkdown, format: 'markdown' });

    // Not yet rewritten: raw is 404, markdown is 400.
    const plain = await upload(k, 'plain text\n');
    await processed(k, plain, (d) => d.digitized_char_count === 11);
    assert.equal((await getContent(k, plain, 'rewritten')).status, 404);
    r = await getContent(k, plain, 'rewritten', 'markdown');
    assert.equal(r.status, 400);
    assert.match(r.body.detail, /not been rewritten/);
    // A draft without a successful rewrite (a rejected rewrite's output): raw, never rendered.
    await system.api.deps.storage.write(documentFiles.rewrittenDraft(plain), messyMarkdown);
    await db().document.update({ where: { id: plain }, data: { fileRewrittenDraft: 'rewritten_draft.md' } });
    r = await getContent(k, plain, 'draft', 'raw');
    assert.deepEqual(r.body, { content: messyMarkdown, format: 'raw' });
    r = await getContent(k, plain, 'draft', 'markdown');
    assert.equal(r.status, 400);
    assert.match(r.body.detail, /has not been rewritten successfully yet; read its draft with format=raw/);

    const pdf = await pdfDocument(k);
    r = await getContent(k, pdf.id, 'original');
    assert.equal(r.status, 400);
    assert.equal(r.body.detail, 'original is binary; use download');
    assert.equal((await getContent(k, pdf.id, 'digitized')).status, 404);

    const other = await newPartner(http);
    assert.equal((await http('GET', `${docPath(k, id)}/content/original`, { key: other.key })).status, 403);
    assert.equal((await http('GET', `${docPath(k, id)}/content/original`)).status, 401);
  });

  it('digitized updates: admitted at once, 403 over the request-level limit, budget_blocked over the KB limit until the limit is raised', async () => {
    const k = await newKnowledgeBase(http);
    await http('PATCH', `/api/knowledgebases/${k.partner.name}/${k.kb}/limits`, { key: k.partner.key, json: { character_limit: 1000 } });
    const id = await upload(k, chars(100));
    await processed(k, id, (d) => d.digitized_char_count === 100);
    assert.equal((await limits(k)).characters.consumed, 100);

    // Admitted: the content and the counts change at once.
    const v150 = chars(150, 'a');
    let r = await putContent(k, id, 'digitized', { content: v150 });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.id, id);
    assert.equal(r.body.digitized_char_count, 150);
    assert.equal(r.body.file_digitized, 'digitized.md');
    assert.equal(r.body.processing_error, null);
    assert.equal((await getContent(k, id, 'digitized')).body.content, v150);
    const status = await limits(k);
    assert.equal(status.characters.consumed, 150);
    assert.equal(status.characters.reserved, 0);

    // Over the request-level limit only: 403 and nothing changes.
    r = await putContent(k, id, 'digitized', { content: chars(200, 'b'), character_limit: '120' });
    assert.equal(r.status, 403);
    assert.deepEqual(r.body, { detail: 'QUOTA_EXCEEDED:knowledge_chars' });
    assert.equal((await getContent(k, id, 'digitized')).body.content, v150);
    assert.equal((await read(k, id)).digitized_char_count, 150);
    assert.equal((await limits(k)).characters.consumed, 150);
    assert.equal((await putContent(k, id, 'digitized', { content: 'x', character_limit: '0' })).status, 400, 'character_limit must be positive');

    // Over the KB limit: budget_blocked; the previous content stays until capacity exists.
    await http('PATCH', `/api/knowledgebases/${k.partner.name}/${k.kb}/limits`, { key: k.partner.key, json: { character_limit: 200 } });
    const v300 = chars(300, 'c');
    r = await putContent(k, id, 'digitized', { content: v300 });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.status, 'budget_blocked');
    assert.equal(r.body.filename, 'digitized.md');
    assert.equal(r.body.reason, 'character_limit_exhausted');
    const blocked = await eventually('the block to show', async () => {
      const d = await read(k, id);
      return d.processing_error?.startsWith('BUDGET_BLOCKED:character_limit_exhausted') ? d : null;
    });
    assert.equal(blocked.digitized_char_count, 150);
    assert.equal((await getContent(k, id, 'digitized')).body.content, v150, 'previous accepted content preserved');
    const busy = await putContent(k, id, 'digitized', { content: chars(10) });
    assert.equal(busy.status, 409, 'no update while the pending work waits');
    assert.match(busy.body.detail, /being processed/);

    await http('PATCH', `/api/knowledgebases/${k.partner.name}/${k.kb}/limits`, { key: k.partner.key, json: { character_limit: 1000 } });
    const done = await processed(k, id, (d) => d.digitized_char_count === 300);
    assert.equal(done.processing_error, null);
    assert.equal((await getContent(k, id, 'digitized')).body.content, v300);
    assert.equal((await limits(k)).characters.consumed, 300);

    // Shorter content frees characters.
    r = await putContent(k, id, 'digitized', { content: chars(50, 'd') });
    assert.equal(r.status, 200);
    assert.equal((await limits(k)).characters.consumed, 50);

    // Uploads: a digitized file must be UTF-8.
    const latin1 = Buffer.from('caf\xe9 cr\xe8me\n', 'latin1');
    r = await http('POST', `${docPath(k, id)}/content/digitized`, { key: k.partner.key, form: { file: { name: 'menu.txt', content: latin1 } } });
    assert.equal(r.status, 400);
    assert.match(r.body.detail, /not valid UTF-8/);
    assert.equal((await getContent(k, id, 'digitized')).body.content, chars(50, 'd'));
    r = await http('POST', `${docPath(k, id)}/content/digitized`, { key: k.partner.key, form: { file: { name: 'menu.md', content: '\uFEFFcafé crème\r\n' } } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.digitized_char_count, 11);
    assert.equal((await getContent(k, id, 'digitized')).body.content, 'café crème\n');
    assert.equal((await limits(k)).characters.consumed, 11);
    r = await http('POST', `${docPath(k, id)}/content/digitized`, { key: k.partner.key, form: { character_limit: '5', file: { name: 'long.md', content: chars(40) } } });
    assert.equal(r.status, 403);
    assert.equal(r.body.detail, 'QUOTA_EXCEEDED:knowledge_chars');
    assert.equal((await http('POST', `${docPath(k, id)}/content/digitized`, { key: k.partner.key, form: { character_limit: '5' } })).status, 400, 'file is required');
  });

  it('an uploaded digitized file blocked by the KB limit answers budget_blocked with its filename', async () => {
    const k = await newKnowledgeBase(http);
    const id = await upload(k, chars(20));
    await processed(k, id, (d) => d.digitized_char_count === 20);
    await http('PATCH', `/api/knowledgebases/${k.partner.name}/${k.kb}/limits`, { key: k.partner.key, json: { character_limit: 30 } });
    const r = await http('POST', `${docPath(k, id)}/content/digitized`, { key: k.partner.key, form: { file: { name: 'bigger.md', content: chars(60) } } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual([r.body.status, r.body.filename, r.body.reason], ['budget_blocked', 'bigger.md', 'character_limit_exhausted']);
    assert.equal((await getContent(k, id, 'digitized')).body.content, chars(20));
    await http('PATCH', `/api/knowledgebases/${k.partner.name}/${k.kb}/limits`, { key: k.partner.key, json: { character_limit: null } });
    await processed(k, id, (d) => d.digitized_char_count === 60 && d.processing_error === null);
    assert.equal((await getContent(k, id, 'digitized')).body.content, chars(60));
  });

  it('concurrent digitized updates racing for the last characters: exactly as many as fit are admitted', async () => {
    const k = await newKnowledgeBase(http);
    const ids = await Promise.all(Array.from({ length: 4 }, () => upload(k, 'a\n')));
    for (const id of ids) await processed(k, id, (d) => d.digitized_char_count === 2);
    await http('PATCH', `/api/knowledgebases/${k.partner.name}/${k.kb}/limits`, { key: k.partner.key, json: { character_limit: 108 } });
    const results = await Promise.all(ids.map((id) => putContent(k, id, 'digitized', { content: chars(52) })));
    assert.ok(results.every((r) => r.status === 200), JSON.stringify(results.map((r) => r.body)));
    assert.equal(results.filter((r) => r.body.status === 'budget_blocked').length, 2);
    assert.equal(results.filter((r) => r.body.digitized_char_count === 52).length, 2);
    const status = await limits(k);
    assert.equal(status.characters.consumed, 108);
    assert.equal(status.characters.remaining, 0);
  });

  it('a rewritten update cleans the old vectors first, then only the new chunks are embedded, with no quota effect', async () => {
    const k = await newKnowledgeBase(http);
    const id = await upload(k, oldArticle, { name: 'lighthouse.md', asRewritten: true });
    const before = await processed(k, id, (d) => d.embedding_status === 'success');
    assert.ok(before.embedding_chunk_count > 1, 'the old version has several chunks');
    const index = system.api.deps.index;
    assert.equal((await index.listDocumentChunkIndexes(id)).length, before.embedding_chunk_count);
    const consumed = (await limits(k)).characters.consumed;

    // Without a worker the fresh embedding cannot run yet: what the update itself did is visible.
    await system.worker.kill();
    try {
      const r = await putContent(k, id, 'rewritten', { content: newArticle, character_limit: '1' });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.embedding_status, 'pending');
      assert.ok(r.body.in_queues.includes('embedding'));
      assert.equal(r.body.file_rewritten, 'rewritten.md');
      assert.equal(r.body.final_rewrite_char_count, [...newArticle].length);
      assert.deepEqual(await index.listDocumentChunkIndexes(id), [], 'the old version is no longer searchable once the update is accepted');
      assert.equal(r.body.embedding_chunk_count, 0);
      assert.equal((await getContent(k, id, 'rewritten')).body.content, newArticle);
      assert.equal((await limits(k)).characters.consumed, consumed, 'no quota effect');
      const busy = await putContent(k, id, 'rewritten', { content: 'another\n' });
      assert.equal(busy.status, 409);
      assert.match(busy.body.detail, /being processed/);
    } finally {
      system.worker = await startWorker();
    }

    const after = await processed(k, id, (d) => d.embedding_status === 'success');
    assert.equal(after.in_queues.includes('embedding'), false);
    assert.ok(after.embedding_chunk_count >= 1 && after.embedding_chunk_count < before.embedding_chunk_count);
    const indexes = (await index.listDocumentChunkIndexes(id)).sort((a, b) => a - b);
    assert.deepEqual(indexes, Array.from({ length: after.embedding_chunk_count }, (_, i) => i), 'exactly the new chunks');

    const search = await http('POST', '/api/rag-test/search', { key: k.partner.key, json: { partner: k.partner.name, kb: k.kb, user_message: 'how is obsidian formed from lava?' } });
    assert.equal(search.status, 200, JSON.stringify(search.body));
    const ours = search.body.combined_results.filter((h: { document_id: string }) => h.document_id === id);
    assert.ok(ours.length > 0);
    assert.match(ours[0].text, /Obsidian/);
    assert.ok(ours.every((h: { text: string }) => !/lighthouse|ninety seconds/i.test(h.text)), 'no old text is left in the index');

    // Rewritten content by upload: UTF-8 required; a valid file re-embeds the same way.
    let r = await http('POST', `${docPath(k, id)}/content/rewritten`, { key: k.partner.key, form: { file: { name: 'bad.md', content: Buffer.from([0xc3, 0x28, 0x0a]) } } });
    assert.equal(r.status, 400);
    r = await http('POST', `${docPath(k, id)}/content/rewritten`, { key: k.partner.key, form: { file: { name: 'v3.md', content: '# Basalt\n\nBasalt columns cool slowly.\n' } } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    await processed(k, id, (d) => d.embedding_status === 'success');
    assert.equal((await getContent(k, id, 'rewritten')).body.content, '# Basalt\n\nBasalt columns cool slowly.\n');
  });

  it('replaces text originals without quota effect; a binary original only by upload; refuses drafts and empty content', async () => {
    const k = await newKnowledgeBase(http);
    const id = await upload(k, 'first original\n', { name: 'notes.txt' });
    await processed(k, id, (d) => d.digitized_char_count === 15);
    const consumed = (await limits(k)).characters.consumed;

    let r = await putContent(k, id, 'original', { content: 'second original\n', character_limit: '1' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.file_original, 'notes.txt');
    assert.equal((await getContent(k, id, 'original')).body.content, 'second original\n');
    assert.equal((await getContent(k, id, 'digitized')).body.content, 'first original\n', 'the digitized version is untouched');
    assert.equal((await limits(k)).characters.consumed, consumed);

    r = await http('POST', `${docPath(k, id)}/content/original`, { key: k.partner.key, form: { file: { name: 'fresh.md', content: '# Fresh\n' } } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.file_original, 'fresh.md');
    assert.equal((await getContent(k, id, 'original')).body.content, '# Fresh\n');
    const dl = await fetch(`${system.api.url}${docPath(k, id)}/download/original`, { headers: { 'X-API-Key': k.partner.key } });
    assert.equal(dl.headers.get('content-type'), 'text/markdown; charset=utf-8');
    assert.match(dl.headers.get('content-disposition') ?? '', /^attachment; filename="?fresh\.md"?$/);
    assert.equal(await dl.text(), '# Fresh\n');
    assert.equal(await system.api.deps.storage.exists(documentFiles.original(id, 'txt')), false, 'the replaced original file is gone');

    const pdf1 = await pdfDocument(k);
    r = await putContent(k, pdf1.id, 'original', { content: 'text' });
    assert.equal(r.status, 400);
    assert.match(r.body.detail, /original is binary.*upload the new original as a file/);
    // Uploaded, a new binary original is checked like a new document's file and stored as it came.
    const scan = pdf(['A better scan']);
    r = await http('POST', `${docPath(k, pdf1.id)}/content/original`, { key: k.partner.key, form: { file: { name: 'rescan.pdf', content: scan } } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.file_original, 'rescan.pdf');
    const stored = await fetch(`${system.api.url}${docPath(k, pdf1.id)}/download/original`, { headers: { 'X-API-Key': k.partner.key } });
    assert.deepEqual(Buffer.from(await stored.arrayBuffer()), scan);
    r = await http('POST', `${docPath(k, pdf1.id)}/content/original`, { key: k.partner.key, form: { file: { name: 'fake.pdf', content: 'not a pdf at all' } } });
    assert.equal(r.status, 400, 'content that contradicts its extension is refused as on creation');
    assert.equal((await putContent(k, id, 'draft', { content: 'x' })).status, 400, 'drafts are not edited by hand');
    assert.equal((await putContent(k, id, 'original', {})).status, 400, 'content is required');
    assert.equal((await putContent(k, id, 'digitized', { content: ' \n\t' })).status, 400, 'blank content is refused');
    assert.equal((await putContent(k, id, 'rewritten', { content: '\u200b\u200d\n' })).status, 400, 'content of invisible characters only is refused');
    assert.equal((await putContent(k, crypto.randomUUID(), 'digitized', { content: 'x' })).status, 404);
    const other = await newPartner(http);
    assert.equal((await http('PUT', `${docPath(k, id)}/content/original`, { key: other.key, form: { content: 'hijack' } })).status, 403);
    assert.equal((await getContent(k, id, 'original')).body.content, '# Fresh\n');
  });

  it('fills an empty document by hand: original, digitized and rewritten content', async () => {
    const k = await newKnowledgeBase(http);
    const created = await http('POST', `/api/documents/${k.partner.name}/${k.kb}/empty`, { key: k.partner.key, form: { name: 'Handbook', folder: k.folder, type: 'file' } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.id as string;
    assert.equal((await getContent(k, id, 'original')).status, 404);

    let r = await putContent(k, id, 'original', { content: 'Handwritten original.\n' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.file_original, 'Handbook.txt');
    assert.equal((await getContent(k, id, 'original')).body.content, 'Handwritten original.\n');
    r = await putContent(k, id, 'digitized', { content: 'Handwritten digitized text.\n' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.digitized_char_count, 28);
    assert.equal((await limits(k)).characters.consumed, 28);
    r = await putContent(k, id, 'rewritten', { content: '# Handbook\n\nTide tables list the hours of high and low water.\n' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const done = await processed(k, id, (d) => d.embedding_status === 'success');
    assert.ok(done.embedding_chunk_count >= 1);
    const res = await fetch(`${system.api.url}${docPath(k, id)}/download/rewritten`, { headers: { 'X-API-Key': k.partner.key } });
    assert.equal(disposition(res), 'Handbook.rewritten.md');
  });

  it('downloads each version with its media type and file name', async () => {
    const k = await newKnowledgeBase(http);
    const id = await upload(k, 'Fog horns and lamp wicks.\n', { name: 'notes.txt', asRewritten: true });
    await processed(k, id, (d) => d.embedding_status === 'success');
    const download = (docId: string, type: string, key: string | null = k.partner.key) =>
      fetch(`${system.api.url}${docPath(k, docId)}/download/${type}`, { headers: key ? { 'X-API-Key': key } : {} });

    let res = await download(id, 'original');
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/plain; charset=utf-8');
    assert.equal(disposition(res), 'notes.txt');
    assert.equal(await res.text(), 'Fog horns and lamp wicks.\n');
    for (const type of ['digitized', 'rewritten']) {
      res = await download(id, type);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'text/markdown; charset=utf-8');
      assert.equal(disposition(res), `notes.${type}.md`);
      assert.equal(await res.text(), 'Fog horns and lamp wicks.\n');
    }
    res = await download(id, 'draft');
    assert.equal(res.status, 404);
    assert.match((await res.json()).detail, /no rewritten draft/);

    const pdf = await pdfDocument(k);
    res = await download(pdf.id, 'original');
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/pdf');
    assert.equal(disposition(res), 'scan.pdf');
    assert.deepEqual(Buffer.from(await res.arrayBuffer()), pdf.bytes);
    assert.equal((await download(pdf.id, 'rewritten')).status, 404);

    const other = await newPartner(http);
    assert.equal((await download(id, 'original', other.key)).status, 403);
    assert.equal((await download(id, 'original', null)).status, 401);
  });

  it('streams a ZIP bundle with documents_info.json and one <doc_id>.md per rewritten document', async () => {
    const k = await newKnowledgeBase(http);
    const bundle = (key: string | null = k.partner.key) =>
      fetch(`${system.api.url}/api/documents/${k.partner.name}/${k.kb}/rewritten-bundle`, { headers: key ? { 'X-API-Key': key } : {} });

    let res = await bundle();
    assert.equal(res.status, 200);
    let entries = unzip(Buffer.from(await res.arrayBuffer()));
    assert.deepEqual([...entries.keys()], ['documents_info.json']);
    assert.deepEqual(JSON.parse(entries.get('documents_info.json')!.toString('utf8')), []);

    const texts = ['# One\n\nThe first rewritten text.\n', '# Two\n\nThe second rewritten text, with ünïcödé.\n'];
    const ids = [await upload(k, texts[0]!, { name: 'one.md', asRewritten: true }), await upload(k, texts[1]!, { name: 'two.md', asRewritten: true })];
    const unrewritten = await upload(k, 'only digitized\n');
    for (const id of ids) await processed(k, id, (d) => d.embedding_status === 'success');
    await processed(k, unrewritten, (d) => d.digitized_char_count === 15);

    res = await bundle();
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/zip');
    assert.equal(disposition(res), `${k.kb}-rewritten.zip`);
    entries = unzip(Buffer.from(await res.arrayBuffer()));
    assert.deepEqual([...entries.keys()].sort(), ['documents_info.json', ...ids.map((id) => `${id}.md`)].sort());
    const info = JSON.parse(entries.get('documents_info.json')!.toString('utf8'));
    assert.equal(info.length, 2);
    for (const [i, id] of ids.entries()) {
      const item = info.find((x: { id: string }) => x.id === id);
      assert.deepEqual(Object.keys(item).sort(), ['file', 'final_rewrite_char_count', 'folder', 'id', 'name', 'updated_at']);
      assert.deepEqual([item.name, item.folder, item.file, item.final_rewrite_char_count], [['one.md', 'two.md'][i], k.folder, `${id}.md`, [...texts[i]!].length]);
      assert.ok(Date.parse(item.updated_at) > 0);
      assert.equal(entries.get(`${id}.md`)!.toString('utf8'), texts[i]);
    }

    const other = await newPartner(http);
    assert.equal((await bundle(other.key)).status, 403);
    assert.equal((await bundle(null)).status, 401);
    assert.equal((await http('GET', `/api/documents/${k.partner.name}/${unique('nokb')}/rewritten-bundle`, { key: k.partner.key })).status, 404);
  });

  it('publishes the content endpoints in the OpenAPI document', async () => {
    const doc = (await http('GET', '/openapi.json')).body;
    const paths = doc.paths as Record<string, Record<string, unknown>>;
    assert.deepEqual(Object.keys(paths['/api/documents/{partner}/{kb}/{doc_id}/content/{type}'] ?? {}).sort(), ['get', 'post', 'put']);
    assert.ok(paths['/api/documents/{partner}/{kb}/{doc_id}/download/{type}']?.get);
    assert.ok(paths['/api/documents/{partner}/{kb}/rewritten-bundle']?.get);
  });
});
