import assert from 'node:assert/strict';
import { client, eventually, useRunningSystem } from '../support/system.js';
import { newKnowledgeBase, newPartner } from '../support/fixtures.js';
import { pdf } from '../support/samples.js';

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
});
