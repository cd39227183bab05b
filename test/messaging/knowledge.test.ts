import assert from 'node:assert/strict';
import type OpenAI from 'openai';
import { client, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { chatCompletion, startOpenAiUpstream, type OpenAiUpstream, type UpstreamCall } from '../support/openai-upstream.js';
import { newKnowledgeBase, unique } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { freePort } from '../../scripts/stack.js';
import { collect, embeddedDocument, knowledgeCharacter, newQuotaKey, responseEvents, responseObject, v3Client } from './support.js';

/**
 * Knowledge context on /v3/responses against a real knowledge base whose document went through
 * the pipeline (digitize, chunk, embed into Weaviate): the visibility items of spec 2.4 in order,
 * previews instead of chunks, the event order of spec section 4 when streamed.
 */
const fogParagraph =
  'When fog rolled in from the Atlantic,   the keeper of Skerryvore sounded a compressed-air horn every ninety seconds\n\nso that fishing boats could find the channel between the reefs. ' +
  'The horn was driven by an engine in the base of the tower that the assistant keeper started whenever the far buoy vanished from sight, and the log recorded every hour of fog.';
const article = `# Lighthouse keeping\n\nThe keeper trimmed the lamp wicks every evening at dusk.\n\n## Fog signals\n\n${fogParagraph}\n`;

describe('messaging v3: knowledge context and visibility items', function () {
  let upstream: OpenAiUpstream;
  let api: RunningApi;
  let worker: RunningWorker;
  let openai: OpenAI;
  let openaiEmpty: OpenAI;
  let service: { character: { name: string; prompt: string; knowledge_base: { partner: string; kb: string } } };
  let emptyService: typeof service;
  let documentId: string;

  const responder = (call: UpstreamCall) => {
    if (call.path.endsWith('/chat/completions')) return { json: chatCompletion(call, 'Every ninety seconds.') };
    return call.body?.stream ? { sse: responseEvents(call, 'Every ninety seconds.', ['Check  the\nsources. ']), named: true, done: false } : { json: responseObject(call, 'Every ninety seconds.') };
  };

  before(async function () {
    this.timeout(180_000);
    upstream = await startOpenAiUpstream(responder);
    api = await startApi({ OPENAI_BASE_URL: upstream.baseUrl });
    worker = await startWorker();
    const http = client(api.url);
    const made = await knowledgeCharacter(http, { name: 'lighthouse.md', content: article });
    documentId = made.documentId;
    openai = v3Client(api.url, made.quota.key);
    openaiEmpty = openai;
    service = made.service(made.kb);
    emptyService = made.service(made.emptyKb);
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
    await upstream?.close();
  });

  const question = 'How often was the fog horn sounded?';

  function assertVisibility(output: any[], expectSources: boolean) {
    const [searching, fileSearch, found] = output;
    assert.equal(searching.type, 'reasoning');
    assert.match(searching.id, /^rs_service_/);
    assert.equal(searching.summary[0].type, 'summary_text');
    assert.match(searching.summary[0].text, /knowledge base/i);
    assert.equal(fileSearch.type, 'file_search_call');
    assert.match(fileSearch.id, /^fs_service_/);
    assert.equal(fileSearch.status, 'completed');
    assert.deepEqual(fileSearch.queries, [question]);
    assert.ok(Array.isArray(fileSearch.results));
    assert.equal(found.type, 'reasoning');
    assert.match(found.id, /^rs_service_/);
    assert.notEqual(found.id, searching.id);
    assert.equal(found.summary[0].text, `Found ${fileSearch.results.length} relevant documents, thinking...`);
    if (!expectSources) {
      assert.deepEqual(fileSearch.results, []);
      return;
    }
    assert.ok(fileSearch.results.length > 0);
    const top = fileSearch.results.find((r: any) => /ninety seconds/.test(r.text));
    assert.ok(top, JSON.stringify(fileSearch.results));
    assert.equal(top.file_id, documentId);
    assert.equal(top.filename, 'lighthouse.md');
    assert.equal(typeof top.score, 'number');
    assert.equal(typeof top.attributes.chunk_index, 'number');
    // OpenAI's attributes map takes strings, numbers and booleans only: the streams as one string.
    assert.match(top.attributes.retrievers, /^(dense|sparse|bm25)(,(dense|sparse|bm25))*$/);
    for (const r of fileSearch.results) {
      assert.ok(Object.values(r.attributes).every((v) => ['string', 'number', 'boolean'].includes(typeof v)), JSON.stringify(r.attributes));
      assert.ok([...r.text].length <= 200, `preview of ${[...r.text].length} characters`);
      assert.equal(r.text, r.text.trim());
      assert.doesNotMatch(r.text, /\s{2,}|\n/, 'whitespace collapsed');
    }
    assert.ok(!JSON.stringify(fileSearch.results).includes('the log recorded every hour of fog'), 'never the full chunk');
  }

  it('puts the three visibility items before the model output and the sources into the instructions', async () => {
    const r: any = await openai.responses.create({ model: 'm', input: question, instructions: 'Answer briefly.', metadata: { service } } as any);
    assert.equal(r.output.length, 4);
    assertVisibility(r.output, true);
    assert.equal(r.output[3].type, 'message');
    assert.equal(r.output_text, 'Every ninety seconds.');
    const sent = upstream.callsTo('/v1/responses').at(-1)!.body;
    assert.equal(sent.metadata, undefined, 'metadata.service never reaches the model');
    assert.match(sent.instructions, /^You are the lighthouse keeper\.\n\nAnswer briefly\./);
    assert.match(sent.instructions, /the log recorded every hour of fog/, 'the model gets full chunks');
    assert.equal(r.instructions, 'You are the lighthouse keeper.\n\nAnswer briefly.', 'the answer repeats the instructions without the excerpts');
    assert.ok(!JSON.stringify(r).includes('the log recorded every hour of fog'), 'no full chunk anywhere in the answer');
  });

  it("a next turn that sends the answer's output back as input reaches the model without the service's visibility items", async () => {
    const first: any = await openai.responses.create({ model: 'm', input: question, metadata: { service } } as any);
    const input = [{ role: 'user', content: question }, ...first.output, { role: 'user', content: 'And in clear weather?' }];
    const next: any = await openai.responses.create({ model: 'm', input, metadata: { service } } as any);
    assert.deepEqual(next.output.slice(0, 3).map((i: any) => i.id.slice(0, i.id.lastIndexOf('_') + 1)), ['rs_service_', 'fs_service_', 'rs_service_']);
    const sent = upstream.callsTo('/v1/responses').at(-1)!.body;
    assert.deepEqual(sent.input.map((i: any) => i.id ?? i.role), ['user', first.output[3].id, 'user']);
    assert.ok(!JSON.stringify(sent.input).includes('_service_'), 'no service item id reaches the model');
  });

  it('a search without sources still returns a completed file_search_call with results []', async () => {
    const r: any = await openaiEmpty.responses.create({ model: 'm', input: question, metadata: { service: emptyService } } as any);
    assertVisibility(r.output, false);
    assert.equal(r.output[2].summary[0].text, 'Found 0 relevant documents, thinking...');
  });

  it('streams the events of spec section 4 in order, then the model events, then response.completed', async () => {
    const stream = await openai.responses.create({ model: 'm', input: question, stream: true, metadata: { service } } as any);
    const events: any[] = await collect(stream as any);
    const types = events.map((e) => e.type);
    assert.deepEqual(types.slice(0, 9), [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.output_item.done',
      'response.file_search_call.in_progress',
      'response.file_search_call.searching',
      'response.file_search_call.completed',
      'response.output_item.added',
      'response.output_item.done',
    ]);
    assert.match(events[2].item.id, /^rs_service_/);
    assert.match(events[6].item.id, /^fs_service_/);
    assert.ok(events[6].item.results.length > 0, 'item.results is the source list');
    assert.match(events[7].item.summary[0].text, /^Found \d+ relevant documents, thinking\.\.\.$/);
    assert.equal(types.at(-1), 'response.completed');
    assert.equal(types.filter((t) => t === 'response.created').length, 1, "the provider's own created event is not repeated");
    const model = events.slice(9, -1);
    assert.ok(model.length > 0);
    assert.ok(model.every((e) => e.output_index === undefined || e.output_index >= 3), 'model items come after the service items');
    assert.deepEqual(model.filter((e) => e.type === 'response.reasoning_text.delta').map((e) => e.delta), ['Check  the\nsources. ']);
    assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
    const final = events.at(-1).response;
    assertVisibility(final.output, true);
    assert.equal(final.output.at(-1).type, 'message');
    assert.equal(final.id, events[0].response.id);
    assert.equal(final.instructions, 'You are the lighthouse keeper.');
    assert.equal(events[0].response.instructions, 'You are the lighthouse keeper.');
    assert.ok(!JSON.stringify(events).includes('the log recorded every hour of fog'), 'no full chunk anywhere in the stream');
  });

  it("a turn without text (a tool's output sent back) searches nothing: 0 found, and the model is asked", async () => {
    const toolOutput = [{ type: 'function_call_output', call_id: 'call_1', output: '{"visibility_m": 40}' }];
    const r: any = await openai.responses.create({ model: 'm', input: toolOutput, metadata: { service } } as any);
    assert.equal(r.output[1].type, 'file_search_call');
    assert.deepEqual(r.output[1].results, []);
    assert.equal(r.output[2].summary[0].text, 'Found 0 relevant documents, thinking...');
    assert.equal(r.output_text, 'Every ninety seconds.');
    assert.equal(upstream.callsTo('/v1/responses').at(-1)!.body.instructions, 'You are the lighthouse keeper.');
    const streamed: any[] = await collect((await openai.responses.create({ model: 'm', input: toolOutput, stream: true, metadata: { service } } as any)) as any);
    assert.equal(streamed.at(-1).type, 'response.completed');
    assert.deepEqual(streamed[6].item.results, []);
  });

  it('a knowledge search that fails in a stream ends in an error event that says so (503 when not streamed)', async () => {
    // A port nothing listens on: every connection to the index is refused.
    const noIndex = await startApi({ OPENAI_BASE_URL: upstream.baseUrl, WEAVIATE_URL: `http://127.0.0.1:${await freePort()}` });
    try {
      const before = upstream.calls.length;
      const body = { model: 'm', input: question, metadata: { service } };
      const call = (stream: boolean) => fetch(`${noIndex.url}/v3/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${openai.apiKey}` }, body: JSON.stringify({ ...body, stream }) });
      const plain = await call(false);
      assert.equal(plain.status, 503);
      const res = await call(true);
      const events = (await res.text()).split('\n\n').filter(Boolean).map((e) => ({ type: /^event: (.*)$/m.exec(e)?.[1], data: JSON.parse(/^data: (.*)$/m.exec(e)![1]!) }));
      assert.equal(events.at(-1)!.type, 'error');
      assert.equal(events.at(-1)!.data.code, 'unavailable');
      assert.match(events.at(-1)!.data.message, /^the knowledge search failed: .*Weaviate.*; try again shortly$/);
      assert.equal(upstream.calls.length, before, 'no model was asked');
    } finally {
      await noIndex.close();
    }
  });

  it('a knowledge stream the provider ends before response.completed ends in an error event, not a completed response', async () => {
    upstream.respond((call) => ({ sse: responseEvents(call, 'Every ninety seconds.').slice(0, 5), named: true, done: false }));
    try {
      const res = await fetch(`${api.url}/v3/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${openai.apiKey}` }, body: JSON.stringify({ model: 'm', input: question, stream: true, metadata: { service } }) });
      const events = (await res.text()).split('\n\n').filter(Boolean).map((e) => ({ type: /^event: (.*)$/m.exec(e)?.[1], data: JSON.parse(/^data: (.*)$/m.exec(e)![1]!) }));
      assert.equal(events[6]!.type, 'response.file_search_call.completed', 'the service items came first');
      assert.ok(!events.some((e) => e.type === 'response.completed'));
      assert.equal(events.at(-1)!.type, 'error');
      assert.equal(events.at(-1)!.data.code, 'upstream_invalid_response');
      assert.deepEqual(events.map((e) => e.data.sequence_number), events.map((_, i) => i));
    } finally {
      upstream.respond(responder);
    }
  });

  it("a streamed answer's id can be named as previous_response_id by the same key: the provider gets its own id for it", async () => {
    const providerIds: string[] = [];
    upstream.respond((call) => {
      const answer = responder(call);
      if ('sse' in answer && Array.isArray(answer.sse)) providerIds.push(answer.sse[0].response.id);
      return answer;
    });
    try {
      const events: any[] = await collect((await openai.responses.create({ model: 'm', input: question, stream: true, metadata: { service } } as any)) as any);
      const ours = events.at(-1).response.id;
      assert.match(ours, /^resp_service_/);
      assert.equal(providerIds.length, 1);
      await openai.responses.create({ model: 'm', input: 'And in the night?', previous_response_id: ours, metadata: { service } } as any);
      assert.equal(upstream.callsTo('/v1/responses').at(-1)!.body.previous_response_id, providerIds[0]);
      // Any other id reaches the provider as it is.
      await openai.responses.create({ model: 'm', input: 'And then?', previous_response_id: 'resp_from_elsewhere' } as any);
      assert.equal(upstream.callsTo('/v1/responses').at(-1)!.body.previous_response_id, 'resp_from_elsewhere');

      // Another key's answer, or an id never given: 400 before any provider call.
      const http = client(api.url);
      const other = await newQuotaKey(http, {});
      const before = upstream.calls.length;
      for (const [key, id] of [[other.key, ours], [other.key, 'resp_service_0123'], [undefined, 'resp_service_0123']] as const) {
        const res = await http('POST', '/v3/responses', { json: { model: 'm', input: 'x', previous_response_id: id }, headers: { Authorization: `Bearer ${key ?? (openai.apiKey as string)}` } });
        assert.equal(res.status, 400, JSON.stringify(res.body));
        assert.equal(res.body.detail.code, 'bad_request');
        assert.match(res.body.detail.message, /previous_response_id resp_service_\w+ names no response of this key/);
      }
      assert.equal(upstream.calls.length, before);
    } finally {
      upstream.respond(responder);
    }
  });

  it("a character searches the knowledge base its key was checked against, while a renamed partner's old name belongs to another", async () => {
    // Keys stay cached for an hour here, so the rename is not noticed by this API process.
    const cached = await startApi({ OPENAI_BASE_URL: upstream.baseUrl, MESSAGING_KEY_CACHE_SECONDS: '3600' });
    try {
      const http = client(cached.url);
      const admin = testStack().adminApiKey;
      const { partner, kb, folder } = await newKnowledgeBase(http);
      await embeddedDocument(http, partner, kb, folder, 'tides.md', '# Tides\n\nThe harbour tide tables are printed every Monday by the harbour office.\n');
      const quota = await newQuotaKey(http, { partner: partner.name });
      const ask = async () => {
        const r: any = await v3Client(cached.url, quota.key).responses.create({ model: 'm', input: 'When are the harbour tide tables printed?', metadata: { service: { character: { name: 'Clerk', knowledge_base: { partner: partner.name, kb } } } } } as any);
        return (r.output[1].results as Array<{ filename: string }>).map((x) => x.filename);
      };
      assert.deepEqual(await ask(), ['tides.md']);

      // Through another API process, the administrator renames the partner and gives its old name
      // to a new one with a KB of the same name.
      const elsewhere = client(api.url);
      assert.equal((await elsewhere('PUT', `/api/partners/${partner.name}`, { key: admin, form: { new_name: unique('renamed') } })).status, 200);
      const taken = await elsewhere('POST', `/api/partners/${partner.name}`, { key: admin, form: {} });
      assert.equal(taken.status, 201, JSON.stringify(taken.body));
      const other = { name: partner.name, key: taken.body.api_key as string };
      assert.equal((await elsewhere('POST', `/api/knowledgebases/${other.name}`, { key: other.key, form: { name: kb } })).status, 201);
      assert.equal((await elsewhere('POST', `/api/folders/${other.name}/${kb}`, { key: other.key, form: { name: folder } })).status, 201);
      await embeddedDocument(elsewhere, other, kb, folder, 'ledger.md', '# Ledger\n\nThe harbour tide tables of the new partner are printed on Fridays.\n');

      assert.deepEqual(await ask(), ['tides.md'], "never the other partner's document");
    } finally {
      await cached.close();
    }
  });

  it('chat completions use the knowledge but keep the normal shape', async () => {
    const c: any = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: question }], metadata: { service } } as any);
    assert.equal(c.object, 'chat.completion');
    assert.deepEqual(Object.keys(c.choices[0].message).sort(), ['content', 'refusal', 'role']);
    assert.ok(!JSON.stringify(c).includes('rs_service_'));
    const sent = upstream.callsTo('/v1/chat/completions').at(-1)!.body;
    assert.equal(sent.messages[0].role, 'system');
    assert.match(sent.messages[0].content, /ninety seconds/);
  });
});
