import assert from 'node:assert/strict';
import { generateText, streamText, type LanguageModel } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { ChatOpenAI } from '@langchain/openai';
import type { AIMessageChunk } from '@langchain/core/messages';
import { client, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { chatCompletion, fakeTokenCount, startOpenAiUpstream, type OpenAiUpstream, type UpstreamCall } from '../support/openai-upstream.js';
import { chatChunks, knowledgeCharacter, responseEvents, responseObject } from './support.js';

/**
 * Widely used OpenAI clients besides the official one, pointed at /v3 as a user would: the Vercel
 * AI SDK (`ai` with `@ai-sdk/openai`) on the responses and the chat model, and LangChain's
 * ChatOpenAI with and without the Responses API; each plain and streamed, without a character,
 * with a knowledge-enabled one, and with reasoning. What is asserted is what a user notices: the
 * text the model generated, the usage the provider reported, the reasoning summary, and no error.
 */
const article =
  '# Lighthouse keeping\n\nThe keeper trimmed the lamp wicks every evening at dusk.\n\n## Fog signals\n\n' +
  'When fog rolled in, the keeper of Skerryvore sounded a compressed-air horn every ninety seconds so that fishing boats could find the channel between the reefs.\n';
const question = 'How often was the fog horn sounded?';
const answer = 'Every ninety seconds, when fog rolled in.';
const summary = ['The keeper asks about ', 'the fog horn interval.'];
/** A model name the clients know as a reasoning model, so that they send reasoning options. */
const reasoningModel = 'gpt-5-mini';
const plainModel = 'gpt-4.1-mini';

/** What the fake provider reports: responses usage as in test/messaging/support.ts, chat usage per answer. */
const responsesUsage = (reasoning: boolean) => ({ input: 12, output: 7, total: 19, reasoning: reasoning ? 3 : 0 });
const chatUsage = { input: 10, output: fakeTokenCount(answer), total: 10 + fakeTokenCount(answer) };

/** Without a character, with a knowledge-enabled one, with reasoning (effort, and summaries where the API has them), and both. */
interface Variant {
  name: string;
  knowledge: boolean;
  reasoning: boolean;
}
const variants: Variant[] = [
  { name: 'plain', knowledge: false, reasoning: false },
  { name: 'knowledge', knowledge: true, reasoning: false },
  { name: 'reasoning', knowledge: false, reasoning: true },
  { name: 'knowledge and reasoning', knowledge: true, reasoning: true },
];
type Kind = 'responses' | 'chat';
/** The status texts of the knowledge search's two reasoning items, as one text. */
const knowledgeStatus = /^Searching the knowledge base\.\.\.\s*Found [1-9]\d* relevant documents, thinking\.\.\.\s*/;

/** The reasoning text a client should show: the knowledge search's status (when `status`), then the model's summary. */
function assertReasoningText(text: string, kind: Kind, variant: Variant, status: boolean) {
  const modelSummary = kind === 'responses' && variant.reasoning ? summary.join('') : '';
  if (kind === 'responses' && variant.knowledge && status) {
    assert.match(text, knowledgeStatus);
    assert.equal(text.replace(knowledgeStatus, ''), modelSummary);
  } else {
    assert.equal(text.trim(), modelSummary);
  }
}

/** The distinct file names of the file_search_call items among `items`. */
const sourceNames = (items: unknown) => [
  ...new Set(((items ?? []) as any[]).filter((o) => o.type === 'file_search_call').flatMap((o) => (o.results ?? []).map((r: any) => r.filename))),
];
const expectedSources = (kind: Kind, variant: Variant) => (kind === 'responses' && variant.knowledge ? ['lighthouse.md'] : []);

describe('messaging v3: third-party OpenAI clients (Vercel AI SDK, LangChain)', function () {
  let upstream: OpenAiUpstream;
  let api: RunningApi;
  let worker: RunningWorker;
  let key: string;
  let service: unknown;

  const responder = (call: UpstreamCall) => {
    const stream = call.body?.stream === true;
    if (call.path.endsWith('/chat/completions')) {
      return stream ? { sse: chatChunks(call, answer) } : { json: chatCompletion(call, answer, { usage: { prompt_tokens: chatUsage.input, completion_tokens: chatUsage.output } }) };
    }
    const thoughts = call.body?.reasoning?.summary ? summary : [];
    return stream ? { sse: responseEvents(call, answer, [], { summary: thoughts }), named: true, done: false } : { json: responseObject(call, answer, [], { summary: thoughts }) };
  };

  before(async function () {
    this.timeout(180_000);
    upstream = await startOpenAiUpstream(responder);
    api = await startApi({ OPENAI_BASE_URL: upstream.baseUrl });
    worker = await startWorker();
    const made = await knowledgeCharacter(client(api.url), { name: 'lighthouse.md', content: article });
    key = made.quota.key;
    service = made.service(made.kb);
  });
  beforeEach(() => upstream.respond(responder));
  after(async () => {
    await worker?.kill();
    await api?.close();
    await upstream?.close();
  });

  const lastCall = (kind: Kind) => upstream.callsTo(kind === 'responses' ? '/v1/responses' : '/v1/chat/completions').at(-1)!;

  /** What reached the model for a variant: the knowledge in its instructions, reasoning options as sent. */
  function assertProviderGot(kind: Kind, variant: Variant) {
    const sent = lastCall(kind).body;
    const instructions = kind === 'responses' ? sent.instructions : sent.messages.filter((m: any) => m.role === 'system' || m.role === 'developer').map((m: any) => m.content).join('\n');
    if (variant.knowledge) assert.match(String(instructions), /sounded a compressed-air horn every ninety seconds/, 'the knowledge reached the model');
    else assert.doesNotMatch(String(instructions ?? ''), /compressed-air horn/);
    assert.equal(sent.metadata?.service, undefined, 'metadata.service never reaches the model');
    if (variant.reasoning) {
      if (kind === 'responses') assert.deepEqual(sent.reasoning, { effort: 'low', summary: 'auto' });
      else assert.equal(sent.reasoning_effort, 'low');
    }
  }

  describe('Vercel AI SDK', () => {
    /**
     * The AI SDK's chat model takes `metadata` as OpenAI documents it (string values of at most
     * 512 characters), so a character goes in through a `fetch` that adds it to the body
     * (docs/api/messaging.md, "Other clients").
     */
    const withService =
      (extra: unknown): typeof fetch =>
      (input, init) => {
        const body = JSON.parse(String(init?.body));
        return fetch(input, { ...init, body: JSON.stringify({ ...body, metadata: { ...body.metadata, service: extra } }) });
      };

    function model(kind: Kind, variant: Variant): { model: LanguageModel; providerOptions: Record<string, any> } {
      const viaFetch = kind === 'chat' && variant.knowledge;
      const provider = createOpenAI({ baseURL: `${api.url}/v3`, apiKey: key, ...(viaFetch ? { fetch: withService(service) } : {}) });
      const name = variant.reasoning ? reasoningModel : plainModel;
      const openai: Record<string, unknown> = {};
      if (variant.knowledge && kind === 'responses') openai.metadata = { service };
      if (variant.reasoning) Object.assign(openai, kind === 'responses' ? { reasoningEffort: 'low', reasoningSummary: 'auto' } : { reasoningEffort: 'low' });
      return { model: kind === 'responses' ? provider.responses(name) : provider.chat(name), providerOptions: { openai } };
    }

    function assertUsage(usage: { inputTokens: number | undefined; outputTokens: number | undefined; totalTokens: number | undefined; outputTokenDetails: { reasoningTokens: number | undefined } }, kind: Kind, variant: Variant) {
      const expected = kind === 'responses' ? responsesUsage(variant.reasoning) : chatUsage;
      assert.equal(usage.inputTokens, expected.input);
      assert.equal(usage.outputTokens, expected.output);
      assert.equal(usage.totalTokens, expected.total);
      if (kind === 'responses' && variant.reasoning) assert.equal(usage.outputTokenDetails.reasoningTokens, 3);
    }

    for (const kind of ['responses', 'chat'] as Kind[]) {
      for (const variant of variants) {
        it(`generateText on openai.${kind}(): ${variant.name}`, async () => {
          const result = await generateText({ ...model(kind, variant), prompt: question, maxRetries: 0 });
          assert.equal(result.text, answer);
          assert.equal(result.finishReason, 'stop');
          assertUsage(result.usage, kind, variant);
          assertReasoningText(result.reasoningText ?? '', kind, variant, true);
          // The knowledge search's sources, as the AI SDK shows a file search's results.
          const sources = new Set(result.sources.map((x) => (x.sourceType === 'document' ? (x.filename ?? x.title) : x.url)));
          assert.deepEqual([...sources], expectedSources(kind, variant));
          assertProviderGot(kind, variant);
        });

        it(`streamText on openai.${kind}(): ${variant.name}`, async () => {
          const errors: unknown[] = [];
          const result = streamText({ ...model(kind, variant), prompt: question, maxRetries: 0, onError: ({ error }) => void errors.push(error) });
          let streamed = '';
          const reasoningItems: string[] = [];
          for await (const part of result.fullStream) {
            if (part.type === 'text-delta') streamed += part.text;
            if (part.type === 'reasoning-start') reasoningItems.push(String(part.providerMetadata?.openai?.itemId));
            if (part.type === 'error') errors.push(part.error);
          }
          assert.deepEqual(errors, []);
          assert.equal(streamed, answer);
          assert.equal(await result.text, answer);
          assert.equal(await result.finishReason, 'stop');
          assertUsage(await result.usage, kind, variant);
          // Streamed, the knowledge search's two status items arrive as reasoning parts of their
          // own but without their text: the AI SDK reads it from summary delta events, which spec
          // section 4's order does not have for them (docs/api/messaging.md, "Other clients").
          assertReasoningText((await result.reasoningText) ?? '', kind, variant, false);
          assert.equal(reasoningItems.filter((id) => id.startsWith('rs_service_')).length, kind === 'responses' && variant.knowledge ? 2 : 0);
          assertProviderGot(kind, variant);
        });
      }
    }

    it("refuses a character in the chat model's metadata (string values only): hence the fetch above", async () => {
      const provider = createOpenAI({ baseURL: `${api.url}/v3`, apiKey: key });
      const before = upstream.calls.length;
      await assert.rejects(
        generateText({ model: provider.chat(plainModel), prompt: question, maxRetries: 0, providerOptions: { openai: { metadata: { service } as any } } }),
        (err: any) => err.name === 'AI_InvalidArgumentError' && /"metadata"/.test(String(err.cause)),
      );
      assert.equal(upstream.calls.length, before, 'nothing was sent');
    });
  });

  describe('LangChain ChatOpenAI', () => {
    function chat(kind: Kind, variant: Variant) {
      return new ChatOpenAI({
        model: variant.reasoning ? reasoningModel : plainModel,
        apiKey: key,
        configuration: { baseURL: `${api.url}/v3` },
        maxRetries: 0,
        useResponsesApi: kind === 'responses',
        ...(variant.reasoning ? { reasoning: kind === 'responses' ? { effort: 'low', summary: 'auto' } : { effort: 'low' } } : {}),
        ...(variant.knowledge ? { modelKwargs: { metadata: { service } } } : {}),
      });
    }

    function assertUsage(message: AIMessageChunk, kind: Kind, variant: Variant) {
      const expected = kind === 'responses' ? responsesUsage(variant.reasoning) : chatUsage;
      const usage = message.usage_metadata;
      assert.ok(usage, 'usage_metadata');
      assert.equal(usage.input_tokens, expected.input);
      assert.equal(usage.output_tokens, expected.output);
      assert.equal(usage.total_tokens, expected.total);
      if (kind === 'responses' && variant.reasoning) assert.equal(usage.output_token_details?.reasoning, 3);
    }

    /** The text of the reasoning blocks of a message's content: the status items' and the model's summaries. */
    const reasoningOf = (message: AIMessageChunk) =>
      (Array.isArray(message.content) ? message.content : [])
        .filter((b: any) => b.type === 'reasoning')
        .map((b: any) => b.reasoning ?? (b.summary ?? []).map((x: any) => x.text).join(''))
        .join('');

    for (const kind of ['responses', 'chat'] as Kind[]) {
      for (const variant of variants) {
        const label = `useResponsesApi: ${kind === 'responses'}`;
        it(`invoke (${label}): ${variant.name}`, async () => {
          const message = (await chat(kind, variant).invoke(question)) as AIMessageChunk;
          assert.equal(message.text, answer);
          assertUsage(message, kind, variant);
          assertReasoningText(reasoningOf(message), kind, variant, true);
          // The knowledge search's sources, where LangChain keeps a built-in tool's output.
          assert.deepEqual(sourceNames(message.additional_kwargs.tool_outputs), expectedSources(kind, variant));
          assertProviderGot(kind, variant);
        });

        it(`stream (${label}): ${variant.name}`, async () => {
          let merged: AIMessageChunk | undefined;
          let streamed = '';
          for await (const chunk of await chat(kind, variant).stream(question)) {
            streamed += chunk.text;
            merged = merged ? merged.concat(chunk) : chunk;
          }
          assert.equal(streamed, answer);
          assert.ok(merged);
          assert.equal(merged.text, answer);
          assertUsage(merged, kind, variant);
          assertReasoningText(reasoningOf(merged), kind, variant, true);
          // Streamed, the sources are only in the final answer LangChain keeps
          // (docs/api/messaging.md, "Other clients").
          assert.deepEqual(sourceNames(merged.response_metadata.output), expectedSources(kind, variant));
          assertProviderGot(kind, variant);
        });
      }
    }
  });
});
