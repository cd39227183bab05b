import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { client, eventually, useRunningSystem } from '../support/system.js';
import { newKnowledgeBase, newPartner, unique } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { documentWorkflowId } from '../../lib/contracts/document-pipeline.js';
import { release, reserve, settle } from '../../lib/budget/ledger.js';
import { freeDocumentCharacters } from '../../lib/budget/operations.js';

const text = (n: number) => 'x'.repeat(n - 1) + '\n';

describe('knowledge-base budgets over HTTP and through workflows', function () {
  this.timeout(120_000);
  const system = useRunningSystem();
  const http: ReturnType<typeof client> = (...args) => system.http(...args);

  const upload = (p: { name: string; key: string }, kb: string, folder: string, content: string, extra: Record<string, string> = {}) =>
    http('POST', `/api/documents/${p.name}/${kb}`, { key: p.key, form: { type: 'file', folder, use_original_as_rewritten: 'true', ...extra, file: { name: `${unique('doc')}.txt`, content } } });
  const read = async (p: { name: string; key: string }, kb: string, id: string) => (await http('GET', `/api/document/${p.name}/${kb}/${id}`, { key: p.key })).body;
  const limits = async (p: { name: string; key: string }, kb: string) => (await http('GET', `/api/knowledgebases/${p.name}/${kb}/limits`, { key: p.key })).body;

  it('creates a KB with limits and reports its budget status', async () => {
    const partner = await newPartner(http);
    const kb = unique('kb');
    const created = await http('POST', `/api/knowledgebases/${partner.name}`, { key: partner.key, form: { name: kb, character_limit: '500', token_limit: '0', dollar_limit_usd: '12.34567891' } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.deepEqual(created.body.limits, { character_limit: 500, token_limit: 0, dollar_limit_usd: 12.34567891 });
    const status = await limits(partner, kb);
    assert.deepEqual(status.characters, { limit: 500, consumed: 0, reserved: 0, remaining: 500, unknown_events: 0 });
    assert.deepEqual(status.tokens, { limit: 0, consumed: 0, reserved: 0, remaining: 0, unknown_events: 0 });
    assert.equal(status.dollars.limit, 12.34567891);
    assert.equal(status.uncertain_operations, 0);
    assert.deepEqual(status.blocking_reasons.map((r: { type: string; dimension: string }) => `${r.type}:${r.dimension}`), ['limit_exhausted:tokens']);
    assert.equal(status.blocked, true);
  });

  it('PATCH keeps omitted limits, removes a limit with null, and accepts 0', async () => {
    const { partner, kb } = await newKnowledgeBase(http);
    const path = `/api/knowledgebases/${partner.name}/${kb}/limits`;
    let r = await http('PATCH', path, { key: partner.key, json: { character_limit: 100, token_limit: 50, dollar_limit_usd: '0.10000001' } });
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.limits, { character_limit: 100, token_limit: 50, dollar_limit_usd: 0.10000001 });
    r = await http('PATCH', path, { key: partner.key, json: { token_limit: null } });
    assert.deepEqual(r.body.limits, { character_limit: 100, token_limit: null, dollar_limit_usd: 0.10000001 });
    assert.equal(r.body.tokens.remaining, null);
    r = await http('PATCH', path, { key: partner.key, json: { character_limit: 0 } });
    assert.equal(r.body.characters.remaining, 0);
    assert.equal(r.body.blocked, true);
    for (const dollars of ['1.123456789', 0.123456789, 1e-9, 1e25, -1]) {
      const bad = await http('PATCH', path, { key: partner.key, json: { dollar_limit_usd: dollars } });
      assert.equal(bad.status, 400, `${dollars}: ${JSON.stringify(bad.body)}`);
      assert.match(bad.body.detail, /dollar_limit_usd/);
    }
    r = await http('PATCH', path, { key: partner.key, json: { dollar_limit_usd: 2.5 } });
    assert.equal(r.body.limits.dollar_limit_usd, 2.5, 'a number with few decimals is taken as written');
    await http('PATCH', path, { key: partner.key, json: { dollar_limit_usd: '0.10000001' } });
    const badType = await http('PATCH', path, { key: partner.key, json: { character_limit: -1 } });
    assert.equal(badType.status, 400);
    assert.deepEqual((await limits(partner, kb)).limits, { character_limit: 0, token_limit: null, dollar_limit_usd: 0.10000001 }, 'rejected PATCHes change nothing');
  });

  it('a document over the character limit waits BUDGET_BLOCKED, and raising the limit resumes it with no further call', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    await http('PATCH', `/api/knowledgebases/${partner.name}/${kb}/limits`, { key: partner.key, json: { character_limit: 150 } });
    const first = await upload(partner, kb, folder, text(100));
    await eventually('the first document', async () => (await read(partner, kb, first.body.id)).embedding_status === 'success');

    const second = await upload(partner, kb, folder, text(80));
    assert.equal(second.status, 201);
    const id = second.body.id as string;
    const blocked = await eventually('the block to show', async () => {
      const d = await read(partner, kb, id);
      return d.processing_error?.startsWith('BUDGET_BLOCKED:') ? d : null;
    });
    assert.match(blocked.processing_error, /^BUDGET_BLOCKED:character_limit_exhausted/);
    assert.equal(blocked.file_digitized, null, 'nothing was accepted');
    const status = await limits(partner, kb);
    assert.equal(status.characters.consumed, 100);
    assert.equal(status.characters.remaining, 50);
    // A budget block is not an error (spec, Errors): the statistics do not count it as one.
    const stats = (await http('GET', `/api/kb-stats/${partner.name}/${kb}`, { key: partner.key })).body;
    assert.deepEqual({ document_count: stats.document_count, error_count: stats.error_count, embedded_count: stats.embedded_count }, { document_count: 2, error_count: 0, embedded_count: 1 });
    // Operators can find the blocked workflow. It sets these search attributes once the activity
    // that wrote BUDGET_BLOCKED: to the document has returned: wait on the workflow, not the row.
    await eventually('the search attributes of the blocked run', async () => {
      const described = await system.api.deps.temporal.workflow.getHandle(documentWorkflowId(id)).describe();
      return described.searchAttributes.PipelineStatus?.[0] === 'budget_blocked' && described.searchAttributes.BudgetBlocked?.[0] === true;
    });

    const raised = await http('PATCH', `/api/knowledgebases/${partner.name}/${kb}/limits`, { key: partner.key, json: { character_limit: 200 } });
    assert.equal(raised.status, 200);
    const done = await eventually('the document to resume and finish', async () => {
      const d = await read(partner, kb, id);
      return d.embedding_status === 'success' ? d : null;
    });
    assert.equal(done.processing_error, null);
    assert.equal(done.digitized_char_count, 80);
    assert.equal((await limits(partner, kb)).characters.consumed, 180);

    // The text was extracted once: the resumed workflow reused the cached extraction (a run
    // digitizes in one activity, `digitizeDocument` or `digitizeAndEmbedDocument`, which extracts;
    // runs of older code in `extractText`).
    const history = await system.api.deps.temporal.workflow.getHandle(documentWorkflowId(id)).fetchHistory();
    const extractions = (history.events ?? []).filter((e) => ['extractText', 'digitizeDocument', 'digitizeAndEmbedDocument'].includes(e.activityTaskScheduledEventAttributes?.activityType?.name ?? ''));
    assert.equal(extractions.length, 1);
    const kbList = await http('GET', `/api/knowledgebases/${partner.name}`, { key: partner.key });
    const usage = kbList.body.find((k: { name: string }) => k.name === kb);
    assert.equal(usage.lifetime_usage.digitization_event_count, 2);
    assert.equal(usage.lifetime_usage.event_count, 2);
    assert.equal(usage.digitization_usage.scraper_document_count, 2);
  });

  it('many documents racing for the last characters: exactly as many as fit are digitized', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    await http('PATCH', `/api/knowledgebases/${partner.name}/${kb}/limits`, { key: partner.key, json: { character_limit: 100 } });
    const created = await Promise.all(Array.from({ length: 8 }, () => upload(partner, kb, folder, text(30))));
    assert.ok(created.every((c) => c.status === 201));
    const settled = await eventually('every document to be embedded or blocked', async () => {
      const docs = await Promise.all(created.map((c) => read(partner, kb, c.body.id)));
      return docs.every((d) => d.embedding_status === 'success' || d.processing_error?.startsWith('BUDGET_BLOCKED:')) ? docs : null;
    });
    assert.equal(settled.filter((d) => d.embedding_status === 'success').length, 3);
    assert.equal(settled.filter((d) => d.processing_error?.startsWith('BUDGET_BLOCKED:')).length, 5);
    assert.equal((await limits(partner, kb)).characters.consumed, 90);

    // Lowering a limit below what is already used is accepted; it blocks new spending at once.
    const lowered = await http('PATCH', `/api/knowledgebases/${partner.name}/${kb}/limits`, { key: partner.key, json: { character_limit: 50 } });
    assert.equal(lowered.status, 200);
    assert.deepEqual([lowered.body.characters.consumed, lowered.body.characters.remaining, lowered.body.blocked], [90, 0, true]);
  });

  it('freeing characters (content deleted) resumes blocked work, and never refunds tokens or dollars', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const db = system.api.deps.db;
    await http('PATCH', `/api/knowledgebases/${partner.name}/${kb}/limits`, { key: partner.key, json: { character_limit: 60 } });
    const kept = await upload(partner, kb, folder, text(50));
    await eventually('the first document', async () => (await read(partner, kb, kept.body.id)).embedding_status === 'success');
    const kbRow = await db.knowledgeBase.findFirstOrThrow({ where: { name: kb, partner: { name: partner.name } } });
    const paid = `paid-${crypto.randomUUID()}`;
    await reserve(db, { knowledgeBaseId: kbRow.id, operationKey: paid, workflowId: 'wf', documentId: kept.body.id, category: 'rewrite', bound: { tokens: 40, dollars: '0.5' } });
    await settle(db, paid, { inputTokens: 30, outputTokens: 10, costUsd: '0.25' });

    const waiting = await upload(partner, kb, folder, text(40));
    await eventually('the block', async () => (await read(partner, kb, waiting.body.id)).processing_error?.startsWith('BUDGET_BLOCKED:'));
    await freeDocumentCharacters(db, system.api.deps.temporal, kept.body.id);
    await eventually('the blocked document to resume', async () => (await read(partner, kb, waiting.body.id)).embedding_status === 'success');
    const status = await limits(partner, kb);
    assert.equal(status.characters.consumed, 40);
    assert.equal(status.tokens.consumed, 40, 'tokens are lifetime');
    assert.equal(status.dollars.consumed, 0.25, 'dollars are lifetime');
  });

  it('a request-level character_limit smaller than the KB limit rejects with QUOTA_EXCEEDED:knowledge_chars', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const created = await upload(partner, kb, folder, text(50), { character_limit: '40' });
    assert.equal(created.status, 201);
    const d = await eventually('the rejection', async () => {
      const doc = await read(partner, kb, created.body.id);
      return doc.processing_error ? doc : null;
    });
    assert.match(d.processing_error, /^QUOTA_EXCEEDED:knowledge_chars/);
    assert.equal(d.file_digitized, null);
    assert.equal((await limits(partner, kb)).characters.consumed, 0);
  });

  it('an uncertain provider outcome blocks capped work until an operator resolves it', async () => {
    const { partner, kb } = await newKnowledgeBase(http);
    const db = system.api.deps.db;
    const kbRow = await db.knowledgeBase.findFirstOrThrow({ where: { name: kb, partner: { name: partner.name } } });
    await http('PATCH', `/api/knowledgebases/${partner.name}/${kb}/limits`, { key: partner.key, json: { token_limit: 1000 } });
    const key = `rewrite-${crypto.randomUUID()}`;
    assert.equal((await reserve(db, { knowledgeBaseId: kbRow.id, operationKey: key, workflowId: 'wf', category: 'rewrite', bound: { tokens: 300 } })).admitted, true);
    assert.equal(await settle(db, key, { inputTokens: null, outputTokens: null }), 'uncertain');

    let status = await limits(partner, kb);
    assert.equal(status.uncertain_operations, 1);
    assert.equal(status.tokens.reserved, 300, 'an uncertain operation keeps its hold');
    assert.ok(status.blocking_reasons.some((r: { type: string }) => r.type === 'unresolved_provider_outcome'));
    const next = await reserve(db, { knowledgeBaseId: kbRow.id, operationKey: `n-${crypto.randomUUID()}`, workflowId: 'wf', category: 'rewrite', bound: { tokens: 1 } });
    assert.deepEqual(next.admitted ? 'admitted' : next.reason, 'unresolved_provider_outcome');

    const admin = testStack().adminApiKey;
    const listed = await http('GET', `/api/knowledgebases/${partner.name}/${kb}/uncertain-operations`, { key: admin });
    assert.deepEqual(listed.body.operations.map((o: { operation_key: string }) => o.operation_key), [key]);
    const partnerTry = await http('POST', `/api/knowledgebases/${partner.name}/${kb}/uncertain-operations/resolve`, { key: partner.key, json: { operation_key: key, used: true, input_tokens: 200, output_tokens: 50 } });
    assert.equal(partnerTry.status, 403);
    const resolved = await http('POST', `/api/knowledgebases/${partner.name}/${kb}/uncertain-operations/resolve`, { key: admin, json: { operation_key: key, used: true, input_tokens: 200, output_tokens: 50, cost_usd: '0.0125' } });
    assert.equal(resolved.status, 200, JSON.stringify(resolved.body));
    status = resolved.body;
    assert.equal(status.uncertain_operations, 0);
    assert.equal(status.tokens.consumed, 250);
    assert.equal(status.tokens.reserved, 0);
    assert.equal(status.dollars.consumed, 0.0125);
    assert.equal(status.blocked, false);
    const again = await http('POST', `/api/knowledgebases/${partner.name}/${kb}/uncertain-operations/resolve`, { key: admin, json: { operation_key: key, used: false } });
    assert.equal(again.status, 409, 'resolved exactly once');

    const kbList = await http('GET', `/api/knowledgebases/${partner.name}`, { key: partner.key });
    const usage = kbList.body.find((k: { name: string }) => k.name === kb);
    assert.equal(usage.lifetime_usage.rewrite_event_count, 1);
    assert.equal(usage.lifetime_usage.priced_event_count, 1);
    assert.equal(usage.lifetime_usage.cost_usd_total, 0.0125);
    assert.equal(usage.rewrite_usage[0].input_tokens_total, 200);
    assert.equal(usage.rewrite_usage[0].output_tokens_total, 50);
  });

  it('partner deletion is refused (409) while a budget hold is unsettled or vectors remain, and changes nothing', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const db = system.api.deps.db;
    const kbRow = await db.knowledgeBase.findFirstOrThrow({ where: { name: kb, partner: { name: partner.name } } });
    const admin = testStack().adminApiKey;
    const key = `hold-${crypto.randomUUID()}`;
    await reserve(db, { knowledgeBaseId: kbRow.id, operationKey: key, workflowId: 'wf', category: 'rewrite', bound: { tokens: 5 } });
    let res = await http('DELETE', `/api/partners/${partner.name}`, { key: admin });
    assert.equal(res.status, 409, JSON.stringify(res.body));
    assert.match(res.body.detail, /unsettled budget reservations/);
    assert.deepEqual(res.body.blocking, { documents_with_vectors: 0, vendor_synced_documents: 0, unsettled_budget_reservations: 1 });
    assert.equal((await http('GET', `/api/knowledgebases/${partner.name}`, { key: partner.key })).status, 200, 'the key still works');
    await release(db, key);

    const id = (await upload(partner, kb, folder, text(50))).body.id;
    await eventually('the document embedded', async () => (await read(partner, kb, id)).embedding_status === 'success');
    res = await http('DELETE', `/api/partners/${partner.name}`, { key: admin });
    assert.equal(res.status, 409, JSON.stringify(res.body));
    assert.equal(res.body.blocking.documents_with_vectors, 1);

    // Deleting the knowledge base first cleans its vectors; then the partner goes.
    assert.equal((await http('DELETE', `/api/knowledgebases/${partner.name}/${kb}`, { key: partner.key })).status, 200);
    await eventually('the knowledge base gone', async () => (await db.knowledgeBase.count({ where: { id: kbRow.id } })) === 0);
    res = await http('DELETE', `/api/partners/${partner.name}`, { key: admin });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    await eventually('the partner to be gone', async () => (await http('GET', `/api/partners/${partner.name}`, { key: admin })).status === 404);
  });

  it('partner deletion with force=true runs as a workflow: the key stops at once, and the partner goes with its knowledge bases and unsettled holds', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const db = system.api.deps.db;
    const kbRow = await db.knowledgeBase.findFirstOrThrow({ where: { name: kb, partner: { name: partner.name } } });
    await upload(partner, kb, folder, text(50));
    const key = `hold-${crypto.randomUUID()}`;
    await reserve(db, { knowledgeBaseId: kbRow.id, operationKey: key, workflowId: 'wf', category: 'rewrite', bound: { tokens: 5 } });
    const admin = testStack().adminApiKey;
    const res = await http('DELETE', `/api/partners/${partner.name}?force=true`, { key: admin });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.ok(['deleted', 'delete_pending'].includes(res.body.status), res.body.status);
    assert.equal((await http('GET', `/api/knowledgebases/${partner.name}`, { key: partner.key })).status, 401, 'the key of a partner being deleted no longer works');
    await eventually('the partner to be gone', async () => (await http('GET', `/api/partners/${partner.name}`, { key: admin })).status === 404);
    assert.equal(await db.knowledgeBase.count({ where: { id: kbRow.id } }), 0);
    assert.equal(await db.document.count({ where: { knowledgeBaseId: kbRow.id } }), 0);
    assert.equal(await db.budgetReservation.count({ where: { operationKey: key } }), 0);
    assert.equal((await http('DELETE', `/api/partners/${partner.name}`, { key: admin })).status, 404);
  });
});
