import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { client, eventually, useRunningSystem } from '../support/system.js';
import { newKnowledgeBase, newPartner } from '../support/fixtures.js';
import { pdf } from '../support/samples.js';
import { testStack } from '../support/stack.js';
import { storedNames } from '../support/stored-files.js';
import { createApp } from '../../api/app.js';
import { lazyTemporalClient } from '../../lib/platform/temporal.js';
import { freePort } from '../../scripts/stack.js';

describe('document endpoints (spec 4.3)', function () {
  this.timeout(120_000);
  const system = useRunningSystem();
  const http: ReturnType<typeof client> = (...args) => system.http(...args);

  it('batch upload: each file is its own document; an invalid file fails alone', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const fd = new FormData();
    fd.append('folder', folder);
    fd.append('use_original_as_rewritten', 'true');
    fd.append('files', new Blob(['Alpha notes about anchors.']), 'alpha.txt');
    fd.append('files', new Blob([new Uint8Array([0x50, 0x4b, 0x03, 0x04, 1, 2, 3])]), 'archive.zip');
    fd.append('files', new Blob(['# Beta\n\nBeta notes about buoys.']), 'beta.md');
    fd.append('names', 'Alpha');
    fd.append('names', 'Archive');
    fd.append('names', 'Beta');
    const res = await fetch(`${system.api.url}/api/documents/${partner.name}/${kb}/files/batch`, { method: 'POST', headers: { 'X-API-Key': partner.key }, body: fd });
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.deepEqual(body.summary, { total: 3, succeeded: 2, failed: 1 });
    assert.deepEqual(body.results.map((r: { filename: string; status: string }) => [r.filename, r.status]), [['alpha.txt', 'success'], ['archive.zip', 'failed'], ['beta.md', 'success']]);
    assert.match(body.results[1].error, /archive/i);
    const beta = await eventually('beta embedded', async () => {
      const d = await http('GET', `/api/document/${partner.name}/${kb}/${body.results[2].document_id}`, { key: partner.key });
      return d.body.embedding_status === 'success' ? d.body : null;
    });
    assert.equal(beta.name, 'Beta');
  });

  it('batch upload refuses a names list that does not match the files', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const fd = new FormData();
    fd.append('folder', folder);
    fd.append('files', new Blob(['one']), 'one.txt');
    fd.append('files', new Blob(['two']), 'two.txt');
    fd.append('names', 'Only one name');
    const res = await fetch(`${system.api.url}/api/documents/${partner.name}/${kb}/files/batch`, { method: 'POST', headers: { 'X-API-Key': partner.key }, body: fd });
    assert.equal(res.status, 400);
    assert.match((await res.json()).detail, /names has 1 entries for 2 files/);
    assert.equal((await http('GET', `/api/kb-stats/${partner.name}/${kb}`, { key: partner.key })).body.document_count, 0);
  });

  it('lists the knowledge base with its documents, statistics and combined data', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const up = await http('POST', `/api/documents/${partner.name}/${kb}`, { key: partner.key, form: { type: 'file', folder, use_original_as_rewritten: 'true', file: { name: 'a.md', content: 'Twelve characters.' } } });
    await eventually('embedded', async () => (await http('GET', `/api/document/${partner.name}/${kb}/${up.body.id}`, { key: partner.key })).body.embedding_status === 'success');
    const empty = await http('POST', `/api/documents/${partner.name}/${kb}/empty`, { key: partner.key, form: { name: 'Blank page', folder, type: 'url', url: 'https://example.org/blank' } });
    assert.equal(empty.status, 201, JSON.stringify(empty.body));
    assert.equal(empty.body.type, 'url');
    assert.equal(empty.body.url, 'https://example.org/blank');
    assert.deepEqual(empty.body.in_queues, []);

    const list = await http('GET', `/api/documents/${partner.name}/${kb}`, { key: partner.key });
    assert.equal(list.status, 200);
    assert.equal(list.body.name, kb);
    assert.equal(list.body.documents.length, 2);
    const listed = list.body.documents.find((d: { id: string }) => d.id === up.body.id);
    assert.equal(listed.lifetime_usage.digitization_event_count, 1);
    assert.deepEqual(
      [list.body.embedding_info.eligible_document_count, list.body.embedding_info.embedded_document_count, list.body.embedding_info.embedding_status],
      [1, 1, 'success'],
    );

    const stats = await http('GET', `/api/kb-stats/${partner.name}/${kb}`, { key: partner.key });
    assert.deepEqual(stats.body, {
      document_count: 2, digitized_count: 1, draft_rewrite_count: 0, final_rewrite_count: 1,
      total_digitized_chars: 18, total_draft_rewrite_chars: 0, total_final_rewrite_chars: 18, error_count: 0, embedded_count: 1,
    });

    const data = await http('GET', `/api/kb-data/${partner.name}/${kb}`, { key: partner.key });
    assert.equal(data.status, 200);
    assert.deepEqual(data.body.folders, [folder]);
    assert.equal(data.body.documents.length, 2);
    assert.equal(data.body.budget.characters.consumed, 18);
    assert.equal(data.body.usage_totals.event_count, 1);
    assert.deepEqual(data.body.folder_details, []);
    assert.equal(data.body.deletion_requested_at, null);
  });

  it('renames a document, changes its type and URL, and refuses a non-http URL', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const d = await http('POST', `/api/documents/${partner.name}/${kb}/empty`, { key: partner.key, form: { name: 'Draft', folder, type: 'file' } });
    const base = `/api/documents/${partner.name}/${kb}/${d.body.id}`;
    assert.equal((await http('PUT', `${base}/name`, { key: partner.key, form: { name: 'Final title' } })).body.name, 'Final title');
    assert.equal((await http('PUT', `${base}/type`, { key: partner.key, form: { type: 'url' } })).body.type, 'url');
    assert.equal((await http('PUT', `${base}/url`, { key: partner.key, form: { url: 'https://example.org/a' } })).body.url, 'https://example.org/a');
    const bad = await http('PUT', `${base}/url`, { key: partner.key, form: { url: 'javascript:alert(1)' } });
    assert.equal(bad.status, 400);
    const badType = await http('PUT', `${base}/type`, { key: partner.key, form: { type: 'video' } });
    assert.equal(badType.status, 400);
    const after = await http('GET', `/api/document/${partner.name}/${kb}/${d.body.id}`, { key: partner.key });
    assert.deepEqual([after.body.name, after.body.type, after.body.url], ['Final title', 'url', 'https://example.org/a']);
  });

  it('audio and video are refused for partners with allow_audio_video=false', async () => {
    // A minimal PCM WAV file: RIFF header, fmt chunk, 8 samples of silence.
    const data = Buffer.alloc(16);
    const wav = Buffer.alloc(44 + data.length);
    wav.write('RIFF', 0);
    wav.writeUInt32LE(36 + data.length, 4);
    wav.write('WAVEfmt ', 8);
    wav.writeUInt32LE(16, 16);
    wav.writeUInt16LE(1, 20);
    wav.writeUInt16LE(1, 22);
    wav.writeUInt32LE(16000, 24);
    wav.writeUInt32LE(32000, 28);
    wav.writeUInt16LE(2, 32);
    wav.writeUInt16LE(16, 34);
    wav.write('data', 36);
    wav.writeUInt32LE(data.length, 40);
    const upload = async (settings: Record<string, string>) => {
      const partner = await newPartner(http, settings);
      await http('POST', `/api/knowledgebases/${partner.name}`, { key: partner.key, form: { name: 'kb' } });
      await http('POST', `/api/folders/${partner.name}/kb`, { key: partner.key, form: { name: 'f' } });
      return http('POST', `/api/documents/${partner.name}/kb`, { key: partner.key, form: { type: 'file', folder: 'f', file: { name: 'call.wav', content: wav } } });
    };
    const refused = await upload({ allow_audio_video: 'false' });
    assert.equal(refused.status, 403);
    assert.match(refused.body.detail, /audio and video uploads are not enabled/);
    const allowed = await upload({});
    assert.notEqual(allowed.status, 403, 'the default partner may send audio');
  });

  it('a PDF upload is digitized with its text and embedded', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const created = await http('POST', `/api/documents/${partner.name}/${kb}`, {
      key: partner.key,
      form: { type: 'file', folder, use_original_as_rewritten: 'true', file: { name: 'almanac.pdf', content: pdf(['Low water at Dover is at 04:12.', 'High water follows at 10:31.']) } },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    await eventually('embedding', async () => (await http('GET', `/api/document/${partner.name}/${kb}/${created.body.id}`, { key: partner.key })).body.embedding_status === 'success');
    const digitized = await http('GET', `/api/documents/${partner.name}/${kb}/${created.body.id}/content/digitized`, { key: partner.key });
    assert.match(digitized.body.content, /Low water at Dover is at 04:12\./);
    assert.match(digitized.body.content, /High water follows at 10:31\./);
  });

  it('max_documents holds when uploads race', async () => {
    const partner = await newPartner(http, { max_documents: '3' });
    await http('POST', `/api/knowledgebases/${partner.name}`, { key: partner.key, form: { name: 'kb' } });
    await http('POST', `/api/folders/${partner.name}/kb`, { key: partner.key, form: { name: 'f' } });
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => http('POST', `/api/documents/${partner.name}/kb/empty`, { key: partner.key, form: { name: `d${i}`, folder: 'f', type: 'file' } })),
    );
    assert.equal(results.filter((r) => r.status === 201).length, 3);
    assert.ok(results.filter((r) => r.status !== 201).every((r) => r.status === 403 && /^QUOTA_EXCEEDED:max_documents/.test(r.body.detail)));
  });

  it('max_documents holds when single uploads, empty documents and batch uploads race, and only created documents start a workflow', async () => {
    const partner = await newPartner(http, { max_documents: '7' });
    await http('POST', `/api/knowledgebases/${partner.name}`, { key: partner.key, form: { name: 'kb' } });
    await http('POST', `/api/folders/${partner.name}/kb`, { key: partner.key, form: { name: 'f' } });
    const batch = () => {
      const fd = new FormData();
      fd.append('folder', 'f');
      for (let i = 0; i < 5; i++) fd.append('files', new Blob([`Batch note ${i}.`]), `b${i}.txt`);
      return fetch(`${system.api.url}/api/documents/${partner.name}/kb/files/batch`, { method: 'POST', headers: { 'X-API-Key': partner.key }, body: fd }).then(async (r) => ({ status: r.status, body: await r.json() }));
    };
    const [singles, empties, batches] = await Promise.all([
      Promise.all(Array.from({ length: 8 }, (_, i) => http('POST', `/api/documents/${partner.name}/kb`, { key: partner.key, form: { type: 'file', folder: 'f', file: { name: `s${i}.txt`, content: `Single note ${i}.` } } }))),
      Promise.all(Array.from({ length: 8 }, (_, i) => http('POST', `/api/documents/${partner.name}/kb/empty`, { key: partner.key, form: { name: `e${i}`, folder: 'f', type: 'file' } }))),
      Promise.all([batch(), batch()]),
    ]);
    const created = [...singles, ...empties].filter((r) => r.status === 201).map((r) => r.body.id as string);
    const refused = [...singles, ...empties].filter((r) => r.status !== 201);
    const batchResults = batches.flatMap((b) => b.body.results as Array<{ status: string; document_id: string | null; error?: string; http_status?: number }>);
    created.push(...batchResults.filter((r) => r.status === 'success').map((r) => r.document_id!));
    assert.equal(created.length, 7, 'exactly max_documents were created');
    assert.ok(refused.every((r) => r.status === 403 && /^QUOTA_EXCEEDED:max_documents/.test(r.body.detail)), JSON.stringify(refused.map((r) => r.body)));
    assert.ok(batchResults.filter((r) => r.status !== 'success').every((r) => r.http_status === 403 && /^QUOTA_EXCEEDED:max_documents/.test(r.error!)));
    const rows = await system.api.deps.db.document.findMany({ where: { knowledgeBase: { partner: { name: partner.name } } }, select: { id: true } });
    assert.deepEqual(rows.map((r) => r.id).sort(), [...created].sort(), 'the database holds exactly the documents answered as created');
    // Empty documents start nothing; every created upload has its workflow.
    const uploads = await system.api.deps.db.document.findMany({ where: { id: { in: created }, fileOriginal: { not: null } }, select: { id: true } });
    for (const { id } of uploads) assert.ok(await system.api.deps.temporal.workflow.getHandle(`document-${id}`).describe(), `document-${id} was started`);
  });

  it('a folder whose deletion another replica is marking takes no new document, though this replica looked it up a moment ago', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const first = await http('POST', `/api/documents/${partner.name}/${kb}/empty`, { key: partner.key, form: { name: 'first', folder, type: 'file' } });
    assert.equal(first.status, 201, JSON.stringify(first.body));
    const { folderId } = await system.api.deps.db.document.findUniqueOrThrow({ where: { id: first.body.id } });
    // DELETE /api/folders/... on another replica: its transaction marks the folder, then its documents.
    const other = new pg.Client({ connectionString: testStack().databaseUrl });
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query(`UPDATE folders SET "deletionRequestedAt" = now() WHERE id = $1`, [folderId]);
      const otherPid = (await other.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      let answered = false;
      const late = http('POST', `/api/documents/${partner.name}/${kb}`, { key: partner.key, form: { type: 'file', folder, file: { name: 'late.txt', content: 'Sent while the folder was being deleted.' } } }).finally(() => (answered = true));
      // Observed where it waits: a query of the API blocked by the deletion's transaction.
      await eventually('the creation to wait on the deletion\'s lock', async () => {
        const rows = await system.api.deps.db.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE ${otherPid}::int = ANY(pg_blocking_pids(pid))`;
        return rows[0]!.n > 0;
      });
      assert.equal(answered, false, 'the creation waits for the deletion that holds the folder');
      await other.query(`UPDATE documents SET "deletionRequestedAt" = now() WHERE "folderId" = $1 AND "deletionRequestedAt" IS NULL`, [folderId]);
      await other.query('COMMIT');
      const res = await late;
      assert.equal(res.status, 404, JSON.stringify(res.body));
      const unmarked = await system.api.deps.db.document.count({ where: { folderId, deletionRequestedAt: null } });
      assert.equal(unmarked, 0, 'every document of the folder is marked: none was added behind the deletion');
    } finally {
      await other.end();
    }
  });

  it('with Temporal unreachable a creation that starts a workflow answers 503 and leaves nothing behind: no row, no count, no stored file', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const deps = system.api.deps;
    const nowhere = lazyTemporalClient(`127.0.0.1:${await freePort()}`, 'default');
    const server = createApp({ ...deps, temporal: nowhere }).listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const stored = async () => new Set(await storedNames('documents'));
    const storedBefore = await stored();
    try {
      const down = client(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
      const [upload, url, empty] = await Promise.all([
        down('POST', `/api/documents/${partner.name}/${kb}`, { key: partner.key, form: { type: 'file', folder, file: { name: 'kept.txt', content: 'Nothing of this may stay.' } } }),
        down('POST', `/api/documents/${partner.name}/${kb}`, { key: partner.key, form: { type: 'url', folder, url: 'https://example.org/never' } }),
        down('POST', `/api/documents/${partner.name}/${kb}/empty`, { key: partner.key, form: { name: 'starts nothing', folder, type: 'file' } }),
      ]);
      for (const res of [upload, url]) {
        assert.equal(res.status, 503, JSON.stringify(res.body));
        assert.match(res.body.detail, /could not start processing/);
      }
      assert.equal(empty.status, 201, 'an empty document starts no workflow');
      const rows = await deps.db.document.findMany({ where: { knowledgeBase: { name: kb, partner: { name: partner.name } } }, select: { id: true } });
      assert.deepEqual(rows.map((r) => r.id), [empty.body.id]);
      assert.equal((await deps.db.partner.findUniqueOrThrow({ where: { name: partner.name } })).documentCount, 1);
      const left = [...(await stored())].filter((d) => !storedBefore.has(d));
      assert.deepEqual(left, [], 'no original stored for a document that was not created');
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('a video URL is refused once its partner no longer allows audio and video, though this replica looked the folder up a moment ago', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const video = 'https://www.youtube.com/watch?v=dQw4w9WgXcQ';
    const before = await http('POST', `/api/documents/${partner.name}/${kb}/empty`, { key: partner.key, form: { name: 'first', folder, type: 'file' } });
    assert.equal(before.status, 201, JSON.stringify(before.body));
    const changed = await http('PUT', `/api/partners/${partner.name}`, { key: testStack().adminApiKey, form: { allow_audio_video: 'false' } });
    assert.equal(changed.status, 200, JSON.stringify(changed.body));
    const res = await http('POST', `/api/documents/${partner.name}/${kb}`, { key: partner.key, form: { type: 'url', folder, url: video } });
    assert.equal(res.status, 403, JSON.stringify(res.body));
    assert.match(res.body.detail, /video URLs are not enabled/);
    assert.equal(await system.api.deps.db.document.count({ where: { url: video, knowledgeBase: { partner: { name: partner.name } } } }), 0);

    // Nor by the other ways a document gets a URL: an empty URL document, or a URL changed later.
    const empty = await http('POST', `/api/documents/${partner.name}/${kb}/empty`, { key: partner.key, form: { name: 'clip', folder, type: 'url', url: video } });
    assert.equal(empty.status, 403, JSON.stringify(empty.body));
    assert.match(empty.body.detail, /video URLs are not enabled/);
    const page = await http('POST', `/api/documents/${partner.name}/${kb}/empty`, { key: partner.key, form: { name: 'page', folder, type: 'url', url: 'https://example.org/tides' } });
    assert.equal(page.status, 201, JSON.stringify(page.body));
    const moved = await http('PUT', `/api/documents/${partner.name}/${kb}/${page.body.id}/url`, { key: partner.key, form: { url: video } });
    assert.equal(moved.status, 403, JSON.stringify(moved.body));
    assert.equal((await system.api.deps.db.document.findUniqueOrThrow({ where: { id: page.body.id } })).url, 'https://example.org/tides', 'unchanged');
    assert.equal(await system.api.deps.db.document.count({ where: { url: video, knowledgeBase: { partner: { name: partner.name } } } }), 0);
  });
});
