import assert from 'node:assert/strict';
import { eventually, useRunningSystem } from '../support/system.js';
import { newKnowledgeBase, newPartner } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { chunkClassFor } from '../../lib/providers/vector-index.js';
import { documentWorkflowId } from '../../lib/contracts/document-pipeline.js';

/**
 * Hybrid retrieval through the API, against the real worker, Temporal, Postgres and Weaviate:
 * each stream finds what it exists for, /api/rag-test/search's restrictions for partner keys,
 * re-embedded and deleted documents leave no stale chunks, the embedding endpoints and the TOC.
 */
describe('hybrid retrieval and embedding endpoints', function () {
  this.timeout(240_000);
  const system = useRunningSystem();
  let kb: Awaited<ReturnType<typeof newKnowledgeBase>>;
  const ids = {} as Record<'manual' | 'account' | 'german', string>;
  const admin = () => testStack().adminApiKey;

  const docs: Record<string, string> = {
    manual:
      '# Pump controller manual\n\nThe controller shows fault ZQ-7781-K when the coolant pressure sensor drifts out of its calibrated range.\n\n## Fixing the sensor\n\nReplace the sensor and run the calibration routine from the service menu.',
    account:
      '# Signing in\n\nIf you forgot your password, open the sign-in page and choose the reset link. We send an email with a link that is valid for one hour.',
    german:
      '# Kündigung\n\nDas Abonnement kann jederzeit mit einer Frist von einem Monat zum Monatsende gekündigt werden. Die Kündigung erfolgt schriftlich oder im Kundenkonto.',
  };

  const upload = async (name: string, content: string) => {
    const res = await system.http('POST', `/api/documents/${kb.partner.name}/${kb.kb}`, {
      key: kb.partner.key,
      form: { type: 'file', folder: kb.folder, use_original_as_rewritten: 'true', file: { name: `${name}.md`, content, type: 'text/markdown' } },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.id as string;
  };
  const documentOf = async (id: string) => (await system.http('GET', `/api/document/${kb.partner.name}/${kb.kb}/${id}`, { key: kb.partner.key })).body;
  const embedded = (id: string) => eventually(`document ${id} embedded`, async () => ((await documentOf(id)).embedding_status === 'success' ? true : undefined), 120_000);
  const search = (body: Record<string, unknown>, key = kb.partner.key) =>
    system.http('POST', '/api/rag-test/search', { key, json: { partner: kb.partner.name, kb: kb.kb, ...body } });

  before(async () => {
    kb = await newKnowledgeBase(system.http);
    for (const [name, content] of Object.entries(docs)) ids[name as keyof typeof ids] = await upload(name, content);
    for (const id of Object.values(ids)) await embedded(id);
  });

  it('reports three streams, fused results, languages and timings; BM25 finds a rare code, dense a paraphrase', async () => {
    const exact = await search({ user_message: 'ZQ-7781-K' });
    assert.equal(exact.status, 200, JSON.stringify(exact.body));
    assert.deepEqual(Object.keys(exact.body.streams).sort(), ['bm25', 'dense', 'sparse']);
    assert.equal(exact.body.streams.bm25[0].document_id, ids.manual, 'BM25 ranks the exact code first');
    assert.equal(exact.body.combined_results[0].document_id, ids.manual);
    assert.equal(exact.body.total_results, exact.body.combined_results.length);
    assert.ok(exact.body.supported_bm25_languages.some((l: { code: string }) => l.code === 'deu'));
    assert.equal(typeof exact.body.timings_ms.total, 'number');
    assert.deepEqual(exact.body.config.retrievers, ['dense', 'sparse', 'bm25']);
    assert.equal(exact.body.config.top_k, 12);
    // Why each result ranks where it does: its rank and score in every stream that found it, what
    // each stream added to its fused score, and what the re-scoring features added (the parts add up to `score`).
    assert.equal(exact.body.config.fusion, 'score');
    assert.match(exact.body.config.fusion_formula, /best − weakest/);
    assert.match(exact.body.config.fusion_formula, /name_match, lead_match/);
    const rescoring = exact.body.config.rescoring;
    assert.deepEqual(rescoring.features, ['name_match', 'lead_match']);
    assert.equal(rescoring.unit, 1, 'score fusion: a weight-1 stream gives its best candidate 1');
    assert.equal(typeof exact.body.timings_ms.rescore, 'number');
    for (const [i, r] of (exact.body.combined_results as Array<Record<string, any>>).entries()) {
      assert.deepEqual(Object.keys(r.contributions).sort(), Object.keys(r.retrievers).sort());
      assert.deepEqual(Object.keys(r.stream_scores).sort(), Object.keys(r.retrievers).sort());
      assert.deepEqual(Object.keys(r.features), ['name_match', 'lead_match']);
      for (const f of ['name_match', 'lead_match']) {
        assert.ok(r.features[f] >= 0 && r.features[f] <= 1, `${f} is a share`);
        assert.ok(Math.abs(r.feature_contributions[f] - rescoring.unit * rescoring.weights[f] * r.features[f]) < 1e-12, `${f} contribution = unit · weight · value`);
      }
      const sum = [...Object.values(r.contributions as Record<string, number>), ...Object.values(r.feature_contributions as Record<string, number>)].reduce((a, b) => a + b, 0);
      assert.ok(Math.abs(sum - r.score) < 1e-9, `stream and feature contributions of result ${i} add up to its score`);
      assert.equal(r.fused_rank, i + 1, 'without a re-ranker the order is the fused order');
      assert.ok(Number.isInteger(r.rank_without_rescoring) && r.rank_without_rescoring >= 1);
      for (const [stream, rank] of Object.entries(r.retrievers as Record<string, number>)) {
        assert.equal(exact.body.streams[stream][rank - 1].score, r.stream_scores[stream], 'stream_scores are the scores in the streams');
      }
    }
    assert.equal(exact.body.config.rerank, null, 'no re-ranker configured');
    const rrf = await search({ user_message: 'ZQ-7781-K', fusion: 'rrf' });
    assert.equal(rrf.body.config.fusion, 'rrf');
    const top = rrf.body.combined_results[0];
    assert.ok(Math.abs(top.contributions.bm25 - rrf.body.config.rrf_weight_bm25 / (rrf.body.config.rrf_k + top.retrievers.bm25)) < 1e-12, 'RRF contribution = weight / (k + rank)');
    assert.equal(rrf.body.config.rescoring.unit, 1 / (rrf.body.config.rrf_k + 1), 'RRF: a weight-1 stream gives its first place 1 / (k + 1)');
    assert.equal((await search({ user_message: 'x', fusion: 'borda' })).status, 400);
    assert.equal((await search({ user_message: 'x', rerank: true })).status, 400, 'rerank: true needs a configured re-ranker');

    const paraphrase = await search({ user_message: 'I cannot log in because I lost my credentials' });
    assert.equal(paraphrase.body.streams.dense[0].document_id, ids.account, 'dense ranks the paraphrase first');

    const german = await search({ user_message: 'Kündigungen Abonnements' });
    assert.equal(german.body.streams.bm25[0].document_id, ids.german, 'German stemming: plural forms find the singular');
    assert.equal((await documentOf(ids.german)).embedding_bm25_language_counts.deu, 1);
  });

  it('partner keys get the defaults only and no internal identifiers; the administrator may override', async () => {
    const plain = await search({ user_message: 'coolant sensor' });
    assert.equal(plain.status, 200);
    const text = JSON.stringify(plain.body);
    for (const field of ['chunk_id', 'collection', 'knowledge_base_id', 'embedding_profile']) assert.ok(!text.includes(`"${field}"`), `no ${field} for partner keys`);
    for (const body of [{ top_k: 5 }, { search_multiplier: 2 }, { rrf_k: 60 }, { collection_override: 'KnowledgeChunk' }, { rag_index_override: 'x' }]) {
      const res = await search({ user_message: 'coolant', ...body });
      assert.equal(res.status, 403, `${JSON.stringify(body)}: ${JSON.stringify(res.body)}`);
    }
    assert.equal((await search({ user_message: 'coolant', top_k: 12, rrf_k: 15, search_multiplier: 6, rrf_weight_sparse: 0 })).status, 200, 'defaults and weights are allowed');
    assert.equal((await search({ user_message: 'x'.repeat(20_001) })).status, 400);
    assert.equal((await search({ user_message: 'ok', robot_message: 'y'.repeat(20_001) })).status, 400);
    assert.equal((await search({ user_message: 'x'.repeat(20_000) })).status, 200, '20,000 characters are accepted');
    const stranger = await newPartner(system.http);
    assert.equal((await search({ user_message: 'coolant' }, stranger.key)).status, 403, 'access to the partner in the body');

    const asAdmin = await search({ user_message: 'coolant sensor', top_k: 2, rrf_k: 60 }, admin());
    assert.equal(asAdmin.status, 200);
    assert.equal(asAdmin.body.combined_results.length, 2);
    assert.ok(asAdmin.body.combined_results[0].chunk_id);
    const className = chunkClassFor(system.api.deps.embedder.profile.name);
    assert.equal(asAdmin.body.config.collection, className);
    assert.equal((await search({ user_message: 'coolant', collection_override: className }, admin())).status, 200);
    assert.equal((await search({ user_message: 'coolant', collection_override: 'Chunk_nope' }, admin())).status, 400);
  });

  it('a query variant with character_replacement_name is searched and weighted', async () => {
    const res = await search({ user_message: 'what do you say about the coolant sensor', character_replacement_name: 'Pump controller', query_weight_replaced: 0.8 });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.query_variants.map((v: { name: string }) => v.name), ['original', 'replaced']);
    assert.match(res.body.query_variants[1].text, /Pump controller say/);
    assert.ok(res.body.replaced_streams.dense.length > 0);
  });

  it('re-embedding replaces exactly the document\'s own chunks, and a deleted document leaves none', async () => {
    const { index } = system.api.deps;
    const long = Array.from({ length: 12 }, (_, i) => `## Part ${i}\n\n${'Lighthouse keepers trimmed the lamp wicks every evening. '.repeat(20)}`).join('\n\n');
    const id = await upload('long', `# Lighthouses\n\n${long}`);
    await embedded(id);
    const before = (await documentOf(id)).embedding_chunk_count;
    assert.ok(before > 3);
    assert.deepEqual((await index.listDocumentChunkIndexes(id)).sort((a, b) => a - b), [...Array(before).keys()]);

    const put = await system.http('PUT', `/api/documents/${kb.partner.name}/${kb.kb}/${id}/content/rewritten`, { key: kb.partner.key, form: { content: '# Short\n\nNow only the foghorn schedule remains.' } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    await embedded(id);
    assert.deepEqual(await index.listDocumentChunkIndexes(id), [0], 'one chunk, once, in one class');
    const old = await search({ user_message: 'lamp wicks lighthouse keepers' });
    assert.ok(!old.body.combined_results.some((r: { document_id: string; text: string }) => r.document_id === id && /wicks/.test(r.text)), 'no stale chunk of the old version');

    // Forced re-embedding of unchanged content writes the same chunk IDs: still exactly one.
    await eventually('the update run closed', async () => ((await system.api.deps.temporal.workflow.getHandle(documentWorkflowId(id)).describe()).status.name === 'COMPLETED') || undefined);
    const forced = await system.http('POST', `/api/embedding/${kb.partner.name}/${kb.kb}/documents/${id}?force=true`, { key: kb.partner.key });
    assert.equal(forced.status, 200, JSON.stringify(forced.body));
    assert.equal(forced.body.job_id, `document-${id}`);
    await eventually('forced run finished', async () => ((await documentOf(id)).embedding_status === 'success' && (await system.api.deps.temporal.workflow.getHandle(documentWorkflowId(id)).describe()).status.name === 'COMPLETED') || undefined, 120_000);
    assert.deepEqual(await index.listDocumentChunkIndexes(id), [0]);

    const del = await system.http('DELETE', `/api/documents/${kb.partner.name}/${kb.kb}/${id}`, { key: kb.partner.key });
    assert.equal(del.status, 200);
    await eventually('vectors removed', async () => ((await index.listDocumentChunkIndexes(id)).length === 0 ? true : undefined));
    const after = await search({ user_message: 'foghorn schedule' });
    assert.ok(!after.body.combined_results.some((r: { document_id: string }) => r.document_id === id));
  });

  it('embedding status, single-document embedding rules and retry-failed', async () => {
    const status = await system.http('GET', `/api/embedding/${kb.partner.name}/${kb.kb}`, { key: kb.partner.key });
    assert.equal(status.status, 200);
    for (const field of ['last_successful_update_time', 'last_update_time', 'last_update_status', 'last_update_details', 'last_successful_details', 'knowledge_base_id', 'embedding_profile_id', 'embedding_profile_name', 'eligible_document_count', 'pending_document_count', 'failed_document_count', 'embedded_document_count', 'last_error']) {
      assert.ok(field in status.body, `has ${field}`);
    }
    assert.equal(status.body.embedding_status, 'success');
    assert.equal(status.body.last_update_status, 'success');
    assert.equal(status.body.embedding_profile_name, system.api.deps.embedder.profile.name);
    assert.ok(status.body.last_successful_details.chunk_count >= 3);
    const again = await system.http('GET', `/api/embedding/${kb.partner.name}/${kb.kb}`, { key: kb.partner.key });
    assert.equal(again.body.pending_document_count, 0, 'reading the status starts nothing');

    const unchanged = await system.http('POST', `/api/embedding/${kb.partner.name}/${kb.kb}/documents/${ids.account}?force=false`, { key: kb.partner.key });
    assert.equal(unchanged.status, 200);
    assert.equal(unchanged.body.job_id, null, 'force=false leaves an embedded document alone');

    const empty = await system.http('POST', `/api/documents/${kb.partner.name}/${kb.kb}/empty`, { key: kb.partner.key, form: { name: 'blank', folder: kb.folder, type: 'file' } });
    assert.equal(empty.status, 201);
    const refused = await system.http('POST', `/api/embedding/${kb.partner.name}/${kb.kb}/documents/${empty.body.id}`, { key: kb.partner.key });
    assert.equal(refused.status, 409, 'no final rewritten content');

    const retry = await system.http('POST', `/api/embedding/${kb.partner.name}/${kb.kb}/retry-failed`, { key: kb.partner.key });
    assert.equal(retry.status, 200);
    assert.equal(retry.body.queued, 0);
    assert.equal(retry.body.embedding_info.failed_document_count, 0);
  });

  it('the table of contents follows the embedding manifests', async () => {
    const toc = await system.http('GET', `/api/toc/${kb.partner.name}/${kb.kb}`, { key: kb.partner.key });
    assert.equal(toc.status, 200);
    const manual = toc.body.folders[0].documents.find((d: { document_id: string }) => d.document_id === ids.manual);
    assert.equal(manual.sections[0].title, 'Pump controller manual');
    assert.equal(manual.sections[0].children[0].title, 'Fixing the sensor');
    assert.ok(!('embedding_status' in manual));
    const withStatus = await system.http('GET', `/api/toc/${kb.partner.name}/${kb.kb}?include_status=true`, { key: kb.partner.key });
    const all = withStatus.body.folders[0].documents;
    assert.ok(all.some((d: { embedding_status: string | null }) => d.embedding_status === null), 'documents not embedded are listed with their status');
    assert.equal(all.find((d: { document_id: string }) => d.document_id === ids.manual).embedding_status, 'success');
  });
});
