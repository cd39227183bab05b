import assert from 'node:assert/strict';
import { client, eventually, useRunningSystem } from '../support/system.js';
import { holdsFor } from '../support/wait.js';
import { newKnowledgeBase } from '../support/fixtures.js';
import { anythingStored } from '../support/stored-files.js';
import { documentFiles } from '../../lib/platform/storage.js';
import { documentWorkflowId } from '../../lib/contracts/document-pipeline.js';
import { deletionWorkflowId } from '../../lib/contracts/deletion.js';

function longDocument(paragraphs: number): string {
  return Array.from({ length: paragraphs }, (_, i) => `Entry ${i}: the harbour master logged vessel ${i} arriving with ${i % 40} crates of pepper at berth ${i % 9}.`).join('\n\n');
}

describe('deletion leaves nothing behind', function () {
  this.timeout(180_000);
  const system = useRunningSystem();
  const http: ReturnType<typeof client> = (...args) => system.http(...args);

  async function embeddedDocument(content: string) {
    const f = await newKnowledgeBase(http);
    const created = await http('POST', `/api/documents/${f.partner.name}/${f.kb}`, {
      key: f.partner.key,
      form: { type: 'file', folder: f.folder, use_original_as_rewritten: 'true', file: { name: 'doc.md', content } },
    });
    assert.equal(created.status, 201);
    return { ...f, id: created.body.id as string };
  }
  const search = (f: { partner: { name: string; key: string }; kb: string }, q: string) =>
    http('POST', '/api/rag-test/search', { key: f.partner.key, json: { partner: f.partner.name, kb: f.kb, user_message: q } });
  const filesOf = (id: string) => anythingStored(documentFiles.prefix(id));

  async function assertGone(id: string) {
    assert.deepEqual(await system.api.deps.index.listDocumentChunkIndexes(id), [], 'no vectors');
    assert.equal(await filesOf(id), false, 'no stored files');
    assert.equal(await system.api.deps.db.document.count({ where: { id } }), 0, 'no row');
  }

  it('an embedded document: vectors, files and row are removed, its characters freed, and search no longer finds it', async () => {
    const f = await embeddedDocument('Saffron is harvested by hand from crocus flowers in autumn.');
    await eventually('embedding', async () => (await http('GET', `/api/document/${f.partner.name}/${f.kb}/${f.id}`, { key: f.partner.key })).body.embedding_status === 'success');
    assert.equal((await search(f, 'saffron crocus')).body.combined_results[0].document_id, f.id);

    const res = await http('DELETE', `/api/documents/${f.partner.name}/${f.kb}/${f.id}`, { key: f.partner.key });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.status, 'deleted');
    await assertGone(f.id);
    assert.equal((await http('GET', `/api/document/${f.partner.name}/${f.kb}/${f.id}`, { key: f.partner.key })).status, 404);
    assert.deepEqual((await search(f, 'saffron crocus')).body.combined_results, []);
    const limits = await http('GET', `/api/knowledgebases/${f.partner.name}/${f.kb}/limits`, { key: f.partner.key });
    assert.equal(limits.body.characters.consumed, 0);
  });

  it('force=false answers 409 while the document is processed and changes nothing', async () => {
    const f = await embeddedDocument(longDocument(500));
    await eventually('processing', async () => (await http('GET', `/api/document/${f.partner.name}/${f.kb}/${f.id}`, { key: f.partner.key })).body.embedding_status === 'in_progress');
    const res = await http('DELETE', `/api/documents/${f.partner.name}/${f.kb}/${f.id}?force=false`, { key: f.partner.key });
    assert.equal(res.status, 409);
    assert.equal(typeof res.body.detail, 'string');
    const doc = await http('GET', `/api/document/${f.partner.name}/${f.kb}/${f.id}`, { key: f.partner.key });
    assert.equal(doc.body.deletion_requested_at, null);
    await eventually('the document to finish', async () => (await http('GET', `/api/document/${f.partner.name}/${f.kb}/${f.id}`, { key: f.partner.key })).body.embedding_status === 'success', 120_000);
  });

  it('a deletion racing a running embedding cancels the workflow cleanly and leaves no orphaned chunk', async () => {
    const f = await embeddedDocument(longDocument(600));
    await eventually('chunks being written', async () => (await system.api.deps.index.countDocumentChunks(f.id)) > 0);
    const res = await http('DELETE', `/api/documents/${f.partner.name}/${f.kb}/${f.id}`, { key: f.partner.key });
    assert.equal(res.status, 200);
    assert.ok(['deleted', 'delete_pending'].includes(res.body.status));
    if (res.body.status === 'delete_pending') assert.equal(res.body.deletion_workflow_id, deletionWorkflowId.document(f.id));
    // From the moment of the DELETE the document is invisible to search.
    assert.ok((await search(f, 'harbour master pepper')).body.combined_results.every((r: { document_id: string }) => r.document_id !== f.id));

    await system.api.deps.temporal.workflow.getHandle(deletionWorkflowId.document(f.id)).result();
    const pipeline = await system.api.deps.temporal.workflow.getHandle(documentWorkflowId(f.id)).describe();
    assert.ok(['CANCELLED', 'COMPLETED'].includes(pipeline.status.name), pipeline.status.name);
    await assertGone(f.id);
    // Nothing arrives late either.
    await holdsFor('no chunk index of the deleted document', {
      ms: 2000,
      why: 'its pipeline and deletion workflows are closed (checked above): only an activity attempt that outlived them could write, and it learns of its cancellation at its next heartbeat, at most 2 s away (activities/heartbeating.ts)',
    }, async () => (await system.api.deps.index.listDocumentChunkIndexes(f.id)).length === 0);
  });

  it('deleting a folder deletes its documents; deleting a knowledge base deletes everything in it', async () => {
    const f = await embeddedDocument('Cardamom pods grow at the base of the plant.');
    await eventually('embedding', async () => (await http('GET', `/api/document/${f.partner.name}/${f.kb}/${f.id}`, { key: f.partner.key })).body.embedding_status === 'success');
    await http('POST', `/api/folders/${f.partner.name}/${f.kb}`, { key: f.partner.key, form: { name: 'second' } });
    const other = await http('POST', `/api/documents/${f.partner.name}/${f.kb}`, {
      key: f.partner.key,
      form: { type: 'file', folder: 'second', use_original_as_rewritten: 'true', file: { name: 'nutmeg.md', content: 'Nutmeg and mace come from the same fruit.' } },
    });
    await eventually('embedding', async () => (await http('GET', `/api/document/${f.partner.name}/${f.kb}/${other.body.id}`, { key: f.partner.key })).body.embedding_status === 'success');

    const folderRes = await http('DELETE', `/api/folders/${f.partner.name}/${f.kb}/${f.folder}`, { key: f.partner.key });
    assert.equal(folderRes.status, 200);
    assert.ok(['deleted', 'delete_pending'].includes(folderRes.body.status));
    await eventually('the folder to go', async () => !(await http('GET', `/api/folders/${f.partner.name}/${f.kb}`, { key: f.partner.key })).body.folders.includes(f.folder));
    await assertGone(f.id);
    assert.equal((await http('GET', `/api/document/${f.partner.name}/${f.kb}/${other.body.id}`, { key: f.partner.key })).status, 200, 'other folders keep their documents');

    const kbRes = await http('DELETE', `/api/knowledgebases/${f.partner.name}/${f.kb}`, { key: f.partner.key });
    assert.equal(kbRes.status, 200);
    await eventually('the KB to go', async () => !(await http('GET', `/api/knowledgebases/${f.partner.name}`, { key: f.partner.key })).body.some((k: { name: string }) => k.name === f.kb));
    await assertGone(other.body.id);
    assert.equal((await http('GET', `/api/kb-stats/${f.partner.name}/${f.kb}`, { key: f.partner.key })).status, 404);
  });
});
