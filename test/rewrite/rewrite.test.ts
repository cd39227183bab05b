import assert from 'node:assert/strict';
import http_ from 'node:http';
import type { AddressInfo } from 'node:net';
import { client, eventually, isolatedSystemEnv, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newKnowledgeBase, unique } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { chatCompletion, fakeTokenCount, startOpenAiUpstream, type OpenAiUpstream, type Responder, type UpstreamCall } from '../support/openai-upstream.js';

/**
 * LLM rewriting through the document workflow, against a local server that speaks the OpenAI
 * chat-completions protocol: what is sent, what is recorded (tokens, passes, cost), and how rate
 * limits, outages, rejected output, missing usage and timeouts are handled.
 */

const PRICES = { 'rw-standard': { input: 2, output: 8 }, 'rw-fallback': { input: 1, output: 2 } };
const PASSES_CHAT = '/v1/chat/completions';

/** The fake model's rewrite: the source with a marker, so tests can see whose output landed. */
const rewritten = (call: UpstreamCall) => {
  const user: string = call.body.messages.find((m: { role: string }) => m.role === 'user').content;
  const part = /<part>\n([\s\S]*)\n<\/part>/.exec(user)?.[1] ?? user;
  return `## Rewritten by ${call.body.model}\n\n${part}`;
};
const ok: Responder = (call) => ({ json: chatCompletion(call, rewritten(call)) });

describe('LLM rewriting', function () {
  this.timeout(180_000);
  let upstream: OpenAiUpstream;
  let api: RunningApi;
  let worker: RunningWorker;
  let http: ReturnType<typeof client>;
  let platform: http_.Server;
  const platformCalls: string[] = [];
  const admin = () => testStack().adminApiKey;

  /** A local stand-in for the video platform: timedtext track list, captions and oEmbed. */
  const captions: Record<string, { title: string; lines: Array<[number, number, string]> }> = {
    riverTalk01: { title: 'How rivers build deltas', lines: [[0, 2, 'Welcome back.'], [2, 3, 'Today: deltas &amp; sediment.'], [9, 2, 'When the current slows,'], [11, 2, 'sand drops out.']] },
    tideTalk02: { title: 'Spring tides', lines: [[0, 2, 'Spring tides follow the full moon.']] },
    tideTalk03: { title: 'Neap tides', lines: [[0, 2, 'Neap tides follow the half moon.']] },
  };
  /** Videos the platform answers with an error status for, until the given time (ms). */
  const platformDown = new Map<string, { status: number; until: number }>();
  const startPlatform = async () => {
    platform = http_.createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      platformCalls.push(u.pathname + u.search);
      const video = captions[u.searchParams.get('v') ?? ''];
      const down = platformDown.get(u.searchParams.get('v') ?? '');
      if (down && down.until > Date.now()) return void res.writeHead(down.status).end();
      if (u.pathname === '/api/timedtext' && u.searchParams.get('type') === 'list') {
        res.writeHead(200, { 'content-type': 'text/xml' });
        return void res.end(video ? '<transcript_list><track id="0" name="" lang_code="en" lang_original="English" lang_default="true"/></transcript_list>' : '<transcript_list/>');
      }
      if (u.pathname === '/api/timedtext' && video && u.searchParams.get('lang') === 'en') {
        res.writeHead(200, { 'content-type': 'text/xml' });
        return void res.end(`<?xml version="1.0" encoding="utf-8" ?><transcript>${video.lines.map(([start, dur, t]) => `<text start="${start}" dur="${dur}">${t}</text>`).join('')}</transcript>`);
      }
      if (u.pathname === '/oembed') {
        const id = new URL(u.searchParams.get('url')!).searchParams.get('v')!;
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end(JSON.stringify({ title: captions[id]?.title, author_name: 'River Channel' }));
      }
      res.writeHead(404).end();
    });
    platform.listen(0, '127.0.0.1');
    await new Promise((r) => platform.once('listening', r));
    return `http://127.0.0.1:${(platform.address() as AddressInfo).port}`;
  };

  /** A local scraping provider speaking the Firecrawl v1 scrape protocol. */
  let scraper: http_.Server;
  const scrapes: Array<{ url: string; authorization: string | undefined }> = [];
  /** Pages the provider answers 503 for, until the given time (ms). */
  const scraperDownUntil = new Map<string, number>();
  const startScraper = async () => {
    scraper = http_.createServer(async (req, res) => {
      let body = '';
      for await (const c of req) body += c;
      const { url } = JSON.parse(body);
      scrapes.push({ url, authorization: req.headers.authorization });
      if ((scraperDownUntil.get(url) ?? 0) > Date.now()) {
        res.writeHead(503, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ success: false, error: 'Service Unavailable' }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ success: true, creditsUsed: 2, data: { markdown: `# Tides\n\nScraped from ${url}: tides follow the moon.`, metadata: { title: '\n  Tides\r\n\texplained\u0007 ', statusCode: 200, sourceURL: url } } }));
    });
    scraper.listen(0, '127.0.0.1');
    await new Promise((r) => scraper.once('listening', r));
    return `http://127.0.0.1:${(scraper.address() as AddressInfo).port}`;
  };

  let env: Record<string, string>;
  // A database and task queue of its own: retry-failed and clear-orphans act on every partner's
  // documents, which in the lane's database would be other test files' documents.
  let isolated: Awaited<ReturnType<typeof isolatedSystemEnv>>;
  before(async () => {
    upstream = await startOpenAiUpstream(ok);
    isolated = await isolatedSystemEnv('rewrite');
    env = {
      ...isolated.env,
      VIDEO_PLATFORM_BASE_URL: await startPlatform(),
      SCRAPER_BASE_URL: await startScraper(),
      SCRAPER_API_KEY: 'fc-test',
      SCRAPER_COST_PER_CREDIT_USD: '0.002',
      SCRAPER_CREDITS_PER_PAGE: '5',
      OPENAI_BASE_URL: upstream.baseUrl,
      OPENAI_API_KEY: 'sk-test',
      REWRITE_MODEL_STANDARD: 'rw-standard',
      REWRITE_MODEL_ECONOMY: 'rw-economy',
      REWRITE_FALLBACK_MODEL: 'rw-fallback',
      MODEL_PRICES: JSON.stringify(PRICES),
      REWRITE_PART_TOKENS: '300',
      REWRITE_OVERLAP_TOKENS: '30',
      REWRITE_MAX_OUTPUT_TOKENS: '1000',
      REWRITE_TIMEOUT_SECONDS: '2',
      REWRITE_MAX_OUTAGE_SECONDS: '6',
      DIGITIZATION_MAX_OUTAGE_SECONDS: '6',
    };
    api = await startApi(env);
    http = client(api.url);
    worker = await startWorker(env);
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
    await isolated?.drop();
    await upstream?.close();
    platform?.closeAllConnections();
    await new Promise((r) => platform?.close(r));
    scraper?.closeAllConnections();
    await new Promise((r) => scraper?.close(r));
  });
  beforeEach(() => upstream.respond(ok));

  type Kb = Awaited<ReturnType<typeof newKnowledgeBase>>;
  const upload = async (k: Kb, content: string, extra: Record<string, string> = {}) => {
    const res = await http('POST', `/api/documents/${k.partner.name}/${k.kb}`, { key: k.partner.key, form: { type: 'file', folder: k.folder, auto_rewrite: 'true', ...extra, file: { name: `${unique('doc')}.txt`, content } } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.id as string;
  };
  const read = async (k: Kb, id: string) => (await http('GET', `/api/document/${k.partner.name}/${k.kb}/${id}`, { key: admin() })).body;
  const content = async (k: Kb, id: string, type: string) => (await http('GET', `/api/documents/${k.partner.name}/${k.kb}/${id}/content/${type}`, { key: k.partner.key })).body;
  const limits = async (k: Kb) => (await http('GET', `/api/knowledgebases/${k.partner.name}/${k.kb}/limits`, { key: k.partner.key })).body;
  const kbUsage = async (k: Kb) => (await http('GET', `/api/knowledgebases/${k.partner.name}`, { key: k.partner.key })).body.find((x: { name: string }) => x.name === k.kb);
  const embedded = (k: Kb, id: string) => eventually(`document ${id} embedded`, async () => {
    const d = await read(k, id);
    if (d.processing_error && !d.processing_error.startsWith('BUDGET_BLOCKED')) throw new Error(d.processing_error);
    return d.embedding_status === 'success' ? d : null;
  }, 120_000);
  /** The final content holds `${marker} paragraph <i>:` for every i, in order. */
  const assertParagraphsInOrder = async (k: Kb, id: string, marker: string, count: number) => {
    const final: string = (await content(k, id, 'rewritten')).content;
    let at = -1;
    for (let i = 0; i < count; i++) {
      const next = final.indexOf(`${marker} paragraph ${i}:`);
      assert.ok(next > at, `paragraph ${i} is in the final content, in order`);
      at = next;
    }
  };
  const callsFor = (marker: string) => upstream.callsTo(PASSES_CHAT).filter((c) => JSON.stringify(c.body).includes(marker));

  it('rewrites an uploaded document with auto_rewrite, records the provider-reported usage exactly, and embeds the final content', async () => {
    const k = await newKnowledgeBase(http);
    const marker = unique('fact');
    upstream.respond((call) => ({ json: chatCompletion(call, rewritten(call), { usage: { prompt_tokens: 1234, completion_tokens: 567 } }) }));
    const id = await upload(k, `The ${marker} is that rivers carry sediment to the sea.\n`, { expert_name: 'Dr. Ada River' });
    const doc = await embedded(k, id);

    const calls = callsFor(marker);
    assert.equal(calls.length, 1);
    const sent = calls[0]!.body;
    assert.equal(sent.model, 'rw-standard');
    assert.equal(sent.max_completion_tokens, 1000);
    assert.equal(calls[0]!.headers.authorization, 'Bearer sk-test');
    assert.match(sent.messages[0].content, /web articles/, 'a .txt upload uses the article prompt');
    assert.match(sent.messages[0].content, /Dr\. Ada River/, 'the person is the document\'s expert');
    assert.equal(sent.messages[1].content, `The ${marker} is that rivers carry sediment to the sea.\n`);

    assert.equal(doc.rewrite_model, 'rw-standard');
    assert.equal(doc.rewrite_input_tokens_total, 1234);
    assert.equal(doc.rewrite_output_tokens, 567);
    assert.equal(doc.rewrite_cost_usd, (1234 * 2 + 567 * 8) / 1e6);
    assert.equal(doc.rewrite_input_tokens_passes.length, 1);
    const pass = doc.rewrite_input_tokens_passes[0];
    assert.equal(pass.model_name, 'rw-standard');
    assert.equal(pass.output_tokens, 567);
    assert.equal(pass.prompt_tokens, 1234);
    assert.ok(pass.prompt_overhead_tokens > 50, 'the system prompt is overhead');
    assert.equal(pass.source_input_tokens, 1234 - pass.prompt_overhead_tokens);
    assert.equal(doc.input_file_tokens, pass.source_input_tokens);
    assert.ok(Date.parse(doc.rewrite_completed_at) > Date.now() - 120_000);
    assert.deepEqual(doc.in_queues, []);
    assert.equal(doc.processing_error, null);

    const final = await content(k, id, 'rewritten');
    assert.equal(final.content, `## Rewritten by rw-standard\n\nThe ${marker} is that rivers carry sediment to the sea.`);
    assert.equal((await content(k, id, 'draft')).content, final.content, 'the validated draft became final');
    assert.equal(doc.final_rewrite_char_count, final.content.length);

    const budget = await limits(k);
    assert.equal(budget.tokens.consumed, 1234 + 567);
    assert.equal(budget.tokens.reserved, 0, 'the unused part of the bound was released');
    const usage = (await kbUsage(k)).rewrite_usage[0];
    assert.equal(usage.rewritten_count, 1);
    assert.equal(usage.input_tokens_total, 1234);
    assert.equal(usage.output_tokens_total, 567);
    assert.equal(usage.cost_usd_total, (1234 * 2 + 567 * 8) / 1e6);
  });

  it('splits a long input into overlapping parts, one pass each, and joins the rewrites in order', async () => {
    const k = await newKnowledgeBase(http);
    const marker = unique('long');
    const paragraphs = Array.from({ length: 40 }, (_, i) => `${marker} paragraph ${i}: the river delta grows by ${i} metres a year because the current slows and drops its load.`);
    const id = await upload(k, paragraphs.join('\n\n'));
    const doc = await embedded(k, id);
    const calls = callsFor(marker);
    assert.ok(calls.length >= 3, `${calls.length} calls`);
    assert.equal(doc.rewrite_input_tokens_passes.length, calls.length);
    const users = calls.map((c) => c.body.messages[1].content as string);
    assert.ok(users.slice(1).every((u) => u.includes('<context>')), 'later parts carry the previous part\'s end');

    const passes = doc.rewrite_input_tokens_passes;
    const reported = calls.map((c) => fakeTokenCount(c.body.messages.map((m: { content: string }) => m.content).join('\n')));
    assert.equal(doc.rewrite_input_tokens_total, reported.reduce((a, b) => a + b, 0));
    assert.equal(doc.input_file_tokens, passes.reduce((a: number, p: { source_input_tokens: number }) => a + p.source_input_tokens, 0));
    await assertParagraphsInOrder(k, id, marker, paragraphs.length);
  });

  it('a rewrite of hundreds of parts continues as new along the way and rewrites every part once, in order', async () => {
    const k = await newKnowledgeBase(http);
    const marker = unique('many');
    // One paragraph a part (REWRITE_PART_TOKENS 300): more calls than one run's history holds.
    const paragraphs = Array.from({ length: 320 }, (_, i) => `${marker} paragraph ${i}: ${'the river delta grows because the current slows and drops its load of sand and silt. '.repeat(12)}`);
    const id = await upload(k, paragraphs.join('\n\n'));
    const doc = await embedded(k, id);
    const calls = callsFor(marker);
    assert.equal(calls.length, paragraphs.length, 'one call a part, none repeated');
    assert.equal(doc.rewrite_input_tokens_passes.length, paragraphs.length);
    const progress = await api.deps.temporal.workflow.getHandle(`document-${id}`).result();
    assert.ok(progress.generation >= 2, `the pipeline ran in ${progress.generation} run(s)`);
    await assertParagraphsInOrder(k, id, marker, paragraphs.length);
  });

  it('a storm of 429s delays the rewrite but does not fail it, and rate-limited calls use no budget', async () => {
    const k = await newKnowledgeBase(http);
    await http('PATCH', `/api/knowledgebases/${k.partner.name}/${k.kb}/limits`, { key: k.partner.key, json: { token_limit: 1_000_000 } });
    const marker = unique('storm');
    let limited = 0;
    upstream.respond((call) => {
      if (JSON.stringify(call.body).includes(marker) && limited < 6) {
        limited++;
        return { status: 429, json: { error: { message: 'Rate limit reached', type: 'requests' } }, headers: { 'retry-after-ms': '50' } };
      }
      return ok(call, 0);
    });
    const id = await upload(k, `${marker}: slow water drops sand.\n`);
    const doc = await embedded(k, id);
    assert.equal(callsFor(marker).length, 7);
    assert.equal(doc.rewrite_input_tokens_passes.length, 1, 'only the answered call is a pass');
    const budget = await limits(k);
    assert.equal(budget.tokens.consumed, doc.rewrite_input_tokens_total + doc.rewrite_output_tokens);
    assert.equal(budget.tokens.reserved, 0);
    assert.equal(budget.uncertain_operations, 0);
  });

  it('falls back to the fallback model when the tier model is down, and accounts it as fallback usage', async () => {
    const k = await newKnowledgeBase(http);
    const marker = unique('down');
    upstream.respond((call) => {
      if (call.body.model === 'rw-standard' && JSON.stringify(call.body).includes(marker)) return { status: 503, json: { error: { message: 'overloaded' } }, headers: { 'retry-after-ms': '20' } };
      return ok(call, 0);
    });
    const id = await upload(k, `${marker}: deltas form where rivers meet the sea.\n`);
    const doc = await embedded(k, id);
    assert.equal(callsFor(marker).filter((c) => c.body.model === 'rw-standard').length, 5, 'the tier model is tried a few times first');
    assert.equal(doc.rewrite_model, 'rw-fallback');
    assert.equal(doc.rewrite_input_tokens_passes.length, 1);
    assert.equal(doc.rewrite_input_tokens_passes[0].fallback, true);
    const pass = doc.rewrite_input_tokens_passes[0];
    assert.equal(doc.rewrite_cost_usd, (pass.prompt_tokens * 1 + pass.output_tokens * 2) / 1e6, 'priced at the fallback model\'s list price');
    assert.match((await content(k, id, 'rewritten')).content, /Rewritten by rw-fallback/);
    const usage = (await kbUsage(k)).rewrite_usage[0];
    assert.equal(usage.fallback_complete_usage_count, 1);
    assert.equal(usage.fallback_input_tokens_total, pass.prompt_tokens);
    assert.equal(usage.input_tokens_total, 0);
  });

  it('when every model is down the rewrite waits the outage out and goes on by itself; down for longer than REWRITE_MAX_OUTAGE_SECONDS (6) fails the step', async () => {
    const k = await newKnowledgeBase(http);
    const recovers = unique('outage');
    const never = unique('gone');
    const down = { status: 503, json: { error: { message: 'overloaded' } }, headers: { 'retry-after-ms': '20' } };
    upstream.respond((call) => {
      const body = JSON.stringify(call.body);
      // The first round (5 tries of each model) finds both down; the next call is answered.
      if (body.includes(recovers) && callsFor(recovers).length <= 10) return down;
      if (body.includes(never)) return down;
      return ok(call, 0);
    });
    const [a, b] = await Promise.all([upload(k, `${recovers}: oxbow lakes are cut-off meanders.\n`), upload(k, `${never}: a delta in a dry season.\n`)]);
    const doc = await embedded(k, a);
    assert.equal(doc.processing_error, null);
    assert.equal(doc.rewrite_model, 'rw-standard', 'the tier model, once it is back');
    assert.equal(callsFor(recovers).length, 11);
    const failed = await eventually('the outage outlasts the window', async () => {
      const d = await read(k, b);
      return d.processing_error?.startsWith('REWRITE_FAILED:') ? d : null;
    });
    assert.match(failed.processing_error, /^REWRITE_FAILED: every model has been unavailable for \d+ s: .*overloaded/);
    assert.ok(callsFor(never).length >= 20, `tried again after the outage began: ${callsFor(never).length} calls`);
    assert.equal((await limits(k)).tokens.reserved, 0);
  });

  it('rejected output keeps its draft and its token counts, fails with REWRITE_REJECTED, and the retry endpoint resumes the rewrite', async () => {
    const k = await newKnowledgeBase(http);
    const marker = unique('cut');
    const source = `${marker}: ${'Sediment settles where the current slows. '.repeat(20)}`;
    upstream.respond((call) => {
      if (!JSON.stringify(call.body).includes(marker)) return ok(call, 0);
      if (call.body.model === 'rw-standard') return { json: chatCompletion(call, 'Sediment settles where', { finishReason: 'length' }) };
      return { json: chatCompletion(call, '   ') };
    });
    const id = await upload(k, source);
    const failed = await eventually('the rewrite is rejected', async () => {
      const d = await read(k, id);
      return d.processing_error?.startsWith('REWRITE_REJECTED:') ? d : null;
    });
    assert.match(failed.processing_error, /empty/);
    assert.equal(failed.rewrite_input_tokens_passes.length, 2, 'the tier model and the fallback were both tried');
    assert.deepEqual(failed.rewrite_input_tokens_passes.map((p: { rejected: boolean }) => p.rejected), [true, true]);
    const calls = callsFor(marker);
    const promptTotal = calls.reduce((a, c) => a + fakeTokenCount(c.body.messages.map((m: { content: string }) => m.content).join('\n')), 0);
    assert.equal(failed.rewrite_input_tokens_total, promptTotal, 'rejected output still counts its tokens');
    assert.ok(failed.rewrite_completed_at, 'a post-generation rejection is a completion time');
    assert.equal(failed.final_rewrite_char_count, null, 'no final content');
    assert.equal((await content(k, id, 'draft')).content, 'Sediment settles where', 'the draft is kept for inspection');
    assert.equal((await limits(k)).tokens.consumed, failed.rewrite_input_tokens_total + failed.rewrite_output_tokens);
    assert.equal((await kbUsage(k)).rewrite_usage[0].rejected_count, 2);

    upstream.respond(ok);
    const retried = await http('POST', '/api/queue/retry-failed', { key: admin() });
    assert.equal(retried.status, 200);
    assert.ok(retried.body.document_ids.includes(id));
    const doc = await embedded(k, id);
    assert.equal(doc.processing_error, null);
    assert.equal(doc.rewrite_input_tokens_passes.length, 1, 'the statistics describe the latest attempt');
    assert.match((await content(k, id, 'rewritten')).content, /Rewritten by rw-standard/);
  });

  it('a timed-out call is an ambiguous outcome: the operation becomes uncertain and blocks capped work until resolved', async () => {
    const k = await newKnowledgeBase(http);
    await http('PATCH', `/api/knowledgebases/${k.partner.name}/${k.kb}/limits`, { key: k.partner.key, json: { token_limit: 1_000_000 } });
    const marker = unique('slow');
    let hung = false;
    upstream.respond((call) => {
      if (JSON.stringify(call.body).includes(marker) && !hung) {
        hung = true;
        return { hang: true };
      }
      return ok(call, 0);
    });
    const id = await upload(k, `${marker}: a slow river meanders.\n`);
    const blocked = await eventually('the document is blocked by the unresolved outcome', async () => {
      const d = await read(k, id);
      return d.processing_error?.startsWith('BUDGET_BLOCKED:unresolved_provider_outcome') ? d : null;
    });
    assert.equal(blocked.embedding_status === 'success', false);
    const status = await limits(k);
    assert.equal(status.uncertain_operations, 1);
    assert.ok(status.tokens.reserved > 0, 'the uncertain call keeps its whole hold');
    const ops = (await http('GET', `/api/knowledgebases/${k.partner.name}/${k.kb}/uncertain-operations`, { key: admin() })).body.operations;
    assert.equal(ops.length, 1);
    assert.equal(ops[0].category, 'rewrite');
    assert.equal(ops[0].document_id, id);

    const resolved = await http('POST', `/api/knowledgebases/${k.partner.name}/${k.kb}/uncertain-operations/resolve`, { key: admin(), json: { operation_key: ops[0].operation_key, used: true, input_tokens: 100, output_tokens: 0, model: 'rw-standard' } });
    assert.equal(resolved.status, 200, JSON.stringify(resolved.body));
    const doc = await embedded(k, id);
    assert.equal(callsFor(marker).length, 2, 'the call was made again after the resolution');
    const after = await limits(k);
    assert.equal(after.uncertain_operations, 0);
    assert.equal(after.tokens.consumed, 100 + doc.rewrite_input_tokens_total + doc.rewrite_output_tokens);
  });

  it('an answer without usage completes the rewrite on an uncapped KB but leaves the operation uncertain and the totals unknown', async () => {
    const k = await newKnowledgeBase(http);
    const marker = unique('nousage');
    upstream.respond((call) => ({ json: chatCompletion(call, rewritten(call), JSON.stringify(call.body).includes(marker) ? { usage: null } : {}) }));
    const id = await upload(k, `${marker}: floods spread silt over the plain.\n`);
    const doc = await embedded(k, id);
    assert.equal(doc.rewrite_input_tokens_total, null);
    assert.equal(doc.rewrite_output_tokens, null);
    assert.equal(doc.rewrite_cost_usd, null);
    assert.equal(doc.rewrite_input_tokens_passes[0].prompt_tokens, null);
    assert.equal((await limits(k)).uncertain_operations, 1);
  });

  it('waits BUDGET_BLOCKED without calling the model when the token limit cannot hold the call, and resumes when it is raised', async () => {
    const k = await newKnowledgeBase(http);
    await http('PATCH', `/api/knowledgebases/${k.partner.name}/${k.kb}/limits`, { key: k.partner.key, json: { token_limit: 500 } });
    const marker = unique('tight');
    const id = await upload(k, `${marker}: reeds hold the bank.\n`);
    const blocked = await eventually('blocked on tokens', async () => {
      const d = await read(k, id);
      return d.processing_error?.startsWith('BUDGET_BLOCKED:token_limit_exhausted') ? d : null;
    });
    assert.ok(blocked.in_queues.includes('rewrite'));
    assert.equal(callsFor(marker).length, 0, 'nothing was dispatched');
    const raised = await http('PATCH', `/api/knowledgebases/${k.partner.name}/${k.kb}/limits`, { key: k.partner.key, json: { token_limit: 100_000 } });
    assert.equal(raised.status, 200);
    await embedded(k, id);
    assert.equal(callsFor(marker).length, 1);
  });

  it('the economy tier uses its own model; an unpriced model has a null cost', async () => {
    const k = await newKnowledgeBase(http);
    const id = await upload(k, `${unique('eco')}: oxbow lakes are cut-off meanders.\n`, { model_tier: 'economy' });
    const doc = await embedded(k, id);
    assert.equal(doc.rewrite_model, 'rw-economy');
    assert.equal(doc.model_tier, 'economy');
    assert.equal(doc.rewrite_cost_usd, null);
    assert.ok(doc.rewrite_input_tokens_total > 0);
    assert.equal((await kbUsage(k)).lifetime_usage.unpriced_event_count >= 1, true);
  });

  it('a model that refuses the request fails the step with a readable REWRITE_FAILED error', async () => {
    const k = await newKnowledgeBase(http);
    const marker = unique('bad');
    upstream.respond((call) => (JSON.stringify(call.body).includes(marker) ? { status: 400, json: { error: { message: 'This model\'s maximum context length is 10 tokens', type: 'invalid_request_error' } } } : ok(call, 0)));
    const id = await upload(k, `${marker}: a braided river.\n`);
    const doc = await eventually('failed', async () => {
      const d = await read(k, id);
      return d.processing_error?.startsWith('REWRITE_FAILED:') ? d : null;
    });
    assert.match(doc.processing_error, /maximum context length/);
    assert.deepEqual(doc.in_queues, []);
    assert.equal(callsFor(marker).length, 2, 'tier model once, fallback once: a refused request is not repeated');
    assert.equal((await limits(k)).tokens.reserved, 0);
  });

  it('a video URL is digitized from its transcript (titled by the video) and rewritten with the video prompt', async () => {
    const k = await newKnowledgeBase(http);
    const url = 'https://www.youtube.com/watch?v=riverTalk01';
    const created = await http('POST', `/api/documents/${k.partner.name}/${k.kb}`, { key: k.partner.key, form: { type: 'url', url, folder: k.folder, auto_rewrite: 'true' } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const doc = await embedded(k, created.body.id);
    assert.equal(doc.name, 'How rivers build deltas');
    assert.equal((await content(k, doc.id, 'digitized')).content, 'Welcome back. Today: deltas & sediment.\n\nWhen the current slows, sand drops out.');
    assert.ok(platformCalls.some((c) => c.includes('v=riverTalk01&lang=en')));
    const call = callsFor('Today: deltas & sediment.')[0]!;
    assert.match(call.body.messages[0].content, /transcripts of spoken video/, 'auto resolves a video URL to the video prompt');
    assert.match((await content(k, doc.id, 'rewritten')).content, /When the current slows/);
  });

  it('a video without a transcript fails with a readable processing_error', async () => {
    const k = await newKnowledgeBase(http);
    const created = await http('POST', `/api/documents/${k.partner.name}/${k.kb}`, { key: k.partner.key, form: { type: 'url', url: 'https://youtu.be/silentFilm9', folder: k.folder, auto_rewrite: 'true' } });
    assert.equal(created.status, 201);
    const doc = await eventually('failed', async () => {
      const d = await read(k, created.body.id);
      return d.processing_error ? d : null;
    });
    assert.match(doc.processing_error, /silentFilm9 has no transcript/);
    assert.equal(doc.digitized_char_count, null);
  });

  it('a video platform that rate-limits (429) or is down (503) delays the video, digitized once it answers; down longer than DIGITIZATION_MAX_OUTAGE_SECONDS (6) fails it saying so', async () => {
    const k = await newKnowledgeBase(http);
    platformDown.set('tideTalk02', { status: 429, until: Date.now() + 3000 });
    platformDown.set('tideTalk03', { status: 503, until: Infinity });
    const create = async (video: string) => (await http('POST', `/api/documents/${k.partner.name}/${k.kb}`, { key: k.partner.key, form: { type: 'url', url: `https://youtu.be/${video}`, folder: k.folder, use_original_as_rewritten: 'true' } })).body.id as string;
    const [briefId, longId] = [await create('tideTalk02'), await create('tideTalk03')];
    const digitized = await eventually('digitized after the rate limit', async () => {
      const d = await read(k, briefId);
      if (d.processing_error) throw new Error(d.processing_error);
      return d.digitized_char_count > 0 ? d : null;
    });
    assert.equal(digitized.name, 'Spring tides');
    assert.ok(platformCalls.filter((c) => c.includes('v=tideTalk02') && c.includes('type=list')).length >= 2, 'asked again after the 429');
    const failed = await eventually('the long outage failed the step', async () => {
      const d = await read(k, longId);
      return d.processing_error ? d : null;
    });
    assert.match(failed.processing_error, /^the video platform answered HTTP 503 \(unavailable for (\d+) s\)$/);
    assert.ok(Number(/for (\d+) s/.exec(failed.processing_error)![1]) >= 6);
    assert.equal(failed.digitized_char_count, null);
  });

  it('refuses video URLs for a partner without allow_audio_video, creating nothing', async () => {
    const k = await newKnowledgeBase(http);
    const off = await http('PUT', `/api/partners/${k.partner.name}`, { key: admin(), form: { allow_audio_video: 'false' } });
    assert.equal(off.status, 200);
    const res = await http('POST', `/api/documents/${k.partner.name}/${k.kb}`, { key: k.partner.key, form: { type: 'url', url: 'https://www.youtube.com/watch?v=riverTalk01', folder: k.folder } });
    assert.equal(res.status, 403);
    assert.match(res.body.detail, /video URLs are not enabled/);
    assert.equal((await http('GET', `/api/documents/${k.partner.name}/${k.kb}`, { key: k.partner.key })).body.documents.length, 0);
  });

  it('with a scraping provider configured, a URL page is scraped and its cost recorded as digitization_provider / digitization_cost_usd', async () => {
    const k = await newKnowledgeBase(http);
    const url = `https://news.example/${unique('tides')}`;
    const created = await http('POST', `/api/documents/${k.partner.name}/${k.kb}`, { key: k.partner.key, form: { type: 'url', url, folder: k.folder } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const doc = await eventually('digitized', async () => {
      const d = await read(k, created.body.id);
      return d.digitized_char_count > 0 ? d : null;
    });
    assert.deepEqual(scrapes.filter((x) => x.url === url), [{ url, authorization: 'Bearer fc-test' }]);
    assert.equal(doc.name, 'Tides explained');
    assert.equal(doc.digitization_provider, 'firecrawl');
    assert.equal(doc.digitization_cost_usd, 0.004, '2 reported credits at $0.002');
    assert.equal((await content(k, doc.id, 'digitized')).content, `# Tides\n\nScraped from ${url}: tides follow the moon.`);
    const budget = await limits(k);
    assert.equal(budget.dollars.consumed, 0.004);
    assert.equal(budget.dollars.reserved, 0);
    assert.equal((await kbUsage(k)).lifetime_usage.cost_usd_total, 0.004);
  });

  it('a scrape waits BUDGET_BLOCKED when the dollar limit cannot hold its bound, without calling the provider', async () => {
    const k = await newKnowledgeBase(http);
    await http('PATCH', `/api/knowledgebases/${k.partner.name}/${k.kb}/limits`, { key: k.partner.key, json: { dollar_limit_usd: '0.005' } });
    const url = `https://news.example/${unique('blocked')}`;
    const created = await http('POST', `/api/documents/${k.partner.name}/${k.kb}`, { key: k.partner.key, form: { type: 'url', url, folder: k.folder } });
    await eventually('blocked on dollars', async () => (await read(k, created.body.id)).processing_error?.startsWith('BUDGET_BLOCKED:dollar_limit_exhausted'));
    assert.equal(scrapes.filter((x) => x.url === url).length, 0);
    await http('PATCH', `/api/knowledgebases/${k.partner.name}/${k.kb}/limits`, { key: k.partner.key, json: { dollar_limit_usd: '1' } });
    await eventually('scraped', async () => (await read(k, created.body.id)).digitized_char_count > 0);
    assert.equal(scrapes.filter((x) => x.url === url).length, 1);
    assert.equal((await limits(k)).dollars.consumed, 0.004);
  });

  it('a scraping provider outage (503) is waited out; one longer than DIGITIZATION_MAX_OUTAGE_SECONDS (6) fails the step saying how long it lasted', async () => {
    const k = await newKnowledgeBase(http);
    const brief = `https://news.example/${unique('brief-outage')}`;
    const long = `https://news.example/${unique('long-outage')}`;
    scraperDownUntil.set(brief, Date.now() + 4000);
    scraperDownUntil.set(long, Infinity);
    const create = async (url: string) => (await http('POST', `/api/documents/${k.partner.name}/${k.kb}`, { key: k.partner.key, form: { type: 'url', url, folder: k.folder } })).body.id as string;
    const [briefId, longId] = [await create(brief), await create(long)];
    const scraped = await eventually('scraped after the outage', async () => {
      const d = await read(k, briefId);
      return d.digitized_char_count > 0 ? d : null;
    });
    assert.equal(scraped.processing_error, null);
    assert.ok(scrapes.filter((x) => x.url === brief).length >= 2, 'the page was asked for again after the 503');
    const failed = await eventually('the long outage failed the step', async () => {
      const d = await read(k, longId);
      return d.processing_error ? d : null;
    });
    assert.match(failed.processing_error, /^the scraping provider answered 503: Service Unavailable \(unavailable for (\d+) s\)$/);
    assert.ok(Number(/for (\d+) s/.exec(failed.processing_error)![1]) >= 6);
    const budget = await limits(k);
    assert.equal(budget.dollars.consumed, 0.004, 'the refused scrapes cost nothing: one page scraped, 2 credits at $0.002');
    assert.equal(budget.dollars.reserved, 0);
  });

  it('a worker killed during a model call loses nothing: the call\'s outcome becomes uncertain and a new worker finishes the rewrite', async () => {
    const k = await newKnowledgeBase(http);
    const marker = unique('crash');
    let first = true;
    upstream.respond((call) => {
      if (JSON.stringify(call.body).includes(marker) && first) {
        first = false;
        return { hang: true };
      }
      return ok(call, 0);
    });
    // Long enough that the worker dies before the call could time out by itself.
    await worker.kill();
    worker = await startWorker({ ...env, REWRITE_TIMEOUT_SECONDS: '600' });
    const id = await upload(k, `${marker}: levees rise with every flood.\n`);
    await eventually('the call is in flight', async () => callsFor(marker).length === 1);
    await worker.kill('SIGKILL');
    worker = await startWorker(env);
    const doc = await embedded(k, id);
    assert.equal(callsFor(marker).length, 2, 'the new worker called again');
    assert.equal(doc.rewrite_input_tokens_passes.length, 1);
    const status = await limits(k);
    assert.equal(status.uncertain_operations, 1, 'the lost call may have been billed: uncertain, not forgotten');
    const ops = (await http('GET', `/api/knowledgebases/${k.partner.name}/${k.kb}/uncertain-operations`, { key: admin() })).body.operations;
    assert.match(ops[0].note, /worker was lost/);
  });

  describe('queue, bulk and prompts', () => {
    const digitizedOnly = async (k: Kb, content: string) => {
      const id = await upload(k, content, { auto_rewrite: 'false' });
      await eventually('digitized', async () => (await read(k, id)).digitized_char_count > 0 && (await read(k, id)).in_queues.length === 0);
      return id;
    };
    const process = (k: Kb, id: string, query: string, key = k.partner.key) =>
      http('POST', `/api/queue/process?partner=${k.partner.name}&kb=${k.kb}&${query}`, { key, json: { document: { id } } });

    it('POST /api/queue/process rewrites a digitized document with the chosen content type and person', async () => {
      const k = await newKnowledgeBase(http);
      const marker = unique('queued');
      const id = await digitizedOnly(k, `${marker}: chapter one of the river book.\n`);
      assert.equal(callsFor(marker).length, 0, 'without auto_rewrite nothing is rewritten');
      const res = await process(k, id, 'action=rewrite&content_type=book&person_name=Mark%20Twain');
      assert.equal(res.status, 202, JSON.stringify(res.body));
      assert.equal(res.body.status, 'queued');
      assert.equal(res.body.content_type, 'book');
      assert.equal(res.body.workflow_id, `document-${id}`);
      await embedded(k, id);
      const sent = callsFor(marker)[0]!.body;
      assert.match(sent.messages[0].content, /book/);
      assert.match(sent.messages[0].content, /Mark Twain/);
    });

    it('POST /api/queue/process refuses what cannot be processed, changing nothing', async () => {
      const k = await newKnowledgeBase(http);
      const empty = await http('POST', `/api/documents/${k.partner.name}/${k.kb}/empty`, { key: k.partner.key, form: { folder: k.folder, name: 'blank', type: 'file' } });
      assert.equal(empty.status, 201, JSON.stringify(empty.body));
      const noContent = await process(k, empty.body.id, 'action=rewrite');
      assert.equal(noContent.status, 409);
      assert.match(noContent.body.detail, /no digitized content/);
      assert.deepEqual((await read(k, empty.body.id)).in_queues, []);
      assert.equal((await process(k, '00000000-0000-4000-8000-000000000000', 'action=rewrite')).status, 404);
      assert.equal((await process(k, empty.body.id, 'action=translate')).status, 400);
      assert.equal((await process(k, empty.body.id, 'action=rewrite&content_type=poem')).status, 400);
      assert.equal((await process(k, empty.body.id, 'action=digitize&character_limit=0')).status, 400);
      const other = await newKnowledgeBase(http);
      assert.equal((await process(k, empty.body.id, 'action=rewrite', other.partner.key)).status, 403);
      const badBody = await http('POST', `/api/queue/process?partner=${k.partner.name}&kb=${k.kb}`, { key: k.partner.key, json: { document: { id: 'not-a-uuid' } } });
      assert.equal(badBody.status, 400);
    });

    it('POST /api/queue/process digitize extracts the original again, under a request-level character limit', async () => {
      const k = await newKnowledgeBase(http);
      const id = await digitizedOnly(k, 'a'.repeat(99) + '\n');
      const replaced = await http('PUT', `/api/documents/${k.partner.name}/${k.kb}/${id}/content/original`, { key: k.partner.key, form: { content: 'b'.repeat(199) + '\n' } });
      assert.equal(replaced.status, 200, JSON.stringify(replaced.body));
      assert.equal((await content(k, id, 'digitized')).content, 'a'.repeat(99) + '\n', 'a new original alone does not change the digitized text');

      const res = await process(k, id, 'action=digitize&character_limit=150');
      assert.equal(res.status, 202, JSON.stringify(res.body));
      const failed = await eventually('refused by the request limit', async () => {
        const d = await read(k, id);
        return d.processing_error?.startsWith('QUOTA_EXCEEDED:knowledge_chars') ? d : null;
      });
      assert.equal(failed.digitized_char_count, 100, 'the previous digitized content stays');

      const again = await process(k, id, 'action=digitize');
      assert.equal(again.status, 202, 'a failed pipeline is superseded by a new request');
      await eventually('digitized again', async () => (await read(k, id)).digitized_char_count === 200 && (await read(k, id)).processing_error === null);
      assert.equal((await content(k, id, 'digitized')).content, 'b'.repeat(199) + '\n');
    });

    it('bulk rewrite of a folder or KB skips rewritten and undigitized documents unless told otherwise', async () => {
      const k = await newKnowledgeBase(http);
      const plain = await digitizedOnly(k, `${unique('bulk')}: plain.\n`);
      const finalised = await upload(k, `${unique('bulk')}: final.\n`, { auto_rewrite: 'false', use_original_as_rewritten: 'true' });
      await embedded(k, finalised);
      const blank = (await http('POST', `/api/documents/${k.partner.name}/${k.kb}/empty`, { key: k.partner.key, form: { folder: k.folder, name: 'blank', type: 'file' } })).body.id;

      const res = await http('POST', `/api/bulk/rewrite/folder/${k.partner.name}/${k.kb}/${k.folder}`, { key: k.partner.key });
      assert.equal(res.status, 202, JSON.stringify(res.body));
      assert.equal(res.body.total, 3);
      assert.equal(res.body.queued, 1);
      const byId = Object.fromEntries(res.body.results.map((r: { document_id: string }) => [r.document_id, r]));
      assert.equal(byId[plain].status, 'queued');
      assert.equal(byId[finalised].reason, 'already_rewritten');
      assert.equal(byId[blank].reason, 'not_digitized');
      await embedded(k, plain);
      assert.match((await content(k, plain, 'rewritten')).content, /Rewritten by rw-standard/);

      const all = await http('POST', `/api/bulk/rewrite/kb/${k.partner.name}/${k.kb}?skip_rewritten=false&content_type=video`, { key: k.partner.key });
      assert.equal(all.status, 202);
      assert.equal(all.body.queued, 2);
      await eventually('both rewritten', async () => (await content(k, finalised, 'rewritten')).content.includes('Rewritten by'));
      assert.equal((await http('POST', `/api/bulk/rewrite/folder/${k.partner.name}/${k.kb}/nope`, { key: k.partner.key })).status, 404);
      assert.equal((await http('POST', `/api/bulk/rewrite/kb/${k.partner.name}/${k.kb}?skip_rewritten=maybe`, { key: k.partner.key })).status, 400);
    });

    it('serves and replaces rewrite prompts; auto reads as article; new rewrites use the new prompt', async () => {
      const article = await http('GET', '/api/prompts/article', { key: admin() });
      assert.equal(article.status, 200);
      assert.match(article.body.prompt, /\{person_name\}/);
      const auto = await http('GET', '/api/prompts/auto', { key: admin() });
      assert.equal(auto.body.resolved_content_type, 'article');
      assert.equal(auto.body.prompt, article.body.prompt);
      for (const type of ['video', 'book']) assert.notEqual((await http('GET', `/api/prompts/${type}`, { key: admin() })).body.prompt, article.body.prompt);
      assert.equal((await http('GET', '/api/prompts/poem', { key: admin() })).status, 400);
      assert.equal((await http('PUT', '/api/prompts/auto', { key: admin(), json: { prompt: 'x' } })).status, 400);
      assert.equal((await http('PUT', '/api/prompts/video', { key: admin(), json: { prompt: '   ' } })).status, 400);

      const original = (await http('GET', '/api/prompts/video', { key: admin() })).body.prompt;
      try {
        const put = await http('PUT', '/api/prompts/video', { key: admin(), json: { prompt: 'Custom video prompt for {person_name}.' } });
        assert.equal(put.status, 200);
        const k = await newKnowledgeBase(http);
        const marker = unique('vid');
        const id = await digitizedOnly(k, `${marker}: transcript.\n`);
        assert.equal((await process(k, id, 'action=rewrite&content_type=video&person_name=Ann')).status, 202);
        await embedded(k, id);
        assert.equal(callsFor(marker)[0]!.body.messages[0].content, 'Custom video prompt for Ann.');
      } finally {
        await http('PUT', '/api/prompts/video', { key: admin(), json: { prompt: original } });
      }
    });

    it('queue administration lists jobs, correlates markers, and clears orphaned markers after checking Temporal', async () => {
      const k = await newKnowledgeBase(http);
      await http('PATCH', `/api/knowledgebases/${k.partner.name}/${k.kb}/limits`, { key: k.partner.key, json: { token_limit: 10 } });
      const blocked = await upload(k, `${unique('q')}: waiting.\n`);
      await eventually('blocked', async () => (await read(k, blocked)).processing_error?.startsWith('BUDGET_BLOCKED:'));

      // Which runs are jobs comes from Temporal's visibility, which lists a run a moment after it
      // starts: wait on the view itself. A job's status is its document's, so once listed it agrees
      // with the BUDGET_BLOCKED: the test waited for (visibility's PipelineStatus may still say running).
      const job = await eventually('the blocked pipeline listed as a job', async () => {
        const jobs = await http('GET', '/api/queue/jobs?limit=1000', { key: admin() });
        return jobs.body.jobs.find((j: { document_id: string }) => j.document_id === blocked);
      });
      assert.equal(job.status, 'budget_blocked');
      assert.equal(job.budget_blocked, true);
      assert.deepEqual(job.in_queues, ['rewrite']);
      // The window that flaked, held open: the document shows a state that visibility does not have
      // yet. The job view follows the document.
      const row = await api.deps.db.document.findUniqueOrThrow({ where: { id: blocked } });
      await api.deps.db.document.update({
        where: { id: blocked },
        data: { processingState: 'failed', failureMessage: 'REWRITE_FAILED: recorded a moment ago', budgetBlockReason: null, budgetBlockDetail: null },
      });
      const ahead = (await http('GET', '/api/queue/jobs?limit=1000', { key: admin() })).body.jobs.find((j: { document_id: string }) => j.document_id === blocked);
      assert.deepEqual([ahead.status, ahead.budget_blocked], ['failed', false]);
      const { processingState, budgetBlockReason, budgetBlockDetail, failureMessage } = row;
      await api.deps.db.document.update({ where: { id: blocked }, data: { processingState, budgetBlockReason, budgetBlockDetail, failureMessage } });
      const status = await http('GET', '/api/queue', { key: admin() });
      assert.equal(status.status, 200);
      assert.ok(status.body.queues.rewrite >= 1);
      assert.ok(status.body.jobs.by_status.budget_blocked >= 1);
      assert.ok(status.body.budget_blocked_documents >= 1);
      assert.equal((await http('GET', '/api/queue/jobs?limit=0', { key: admin() })).status, 400);
      assert.equal((await http('GET', '/api/queue/jobs?limit=1001', { key: admin() })).status, 400);

      // A marker whose job is gone (e.g. written by a crashed process): found, and cleared.
      const orphan = (await http('POST', `/api/documents/${k.partner.name}/${k.kb}/empty`, { key: k.partner.key, form: { folder: k.folder, name: 'orphan', type: 'file' } })).body.id;
      await api.deps.db.document.update({ where: { id: orphan }, data: { inQueues: ['embedding'] } });
      const debug = await http('GET', '/api/queue/debug', { key: admin() });
      const orphans = debug.body.orphan_markers.map((m: { document_id: string }) => m.document_id);
      assert.ok(orphans.includes(orphan));
      assert.ok(!orphans.includes(blocked), 'a marker with a running job is not an orphan');
      const cleared = await http('DELETE', '/api/queue/clear-orphans', { key: admin() });
      assert.equal(cleared.status, 200);
      assert.ok(cleared.body.document_ids.includes(orphan));
      assert.ok(!cleared.body.document_ids.includes(blocked));
      assert.deepEqual((await read(k, orphan)).in_queues, []);
      assert.deepEqual((await read(k, blocked)).in_queues, ['rewrite']);
    });
  });
});
