import { defineRoute, type HandlerInput, type Reply, type RouteDefinition } from '../http/route.js';
import type { ApiDeps } from '../deps.js';
import { deepHealth } from '../../lib/services.js';
import { presentsAdministratorKey } from '../http/api-key.js';
import type { QuotaKeyPrincipal } from '../../lib/messaging/quota-keys.js';
import type { GenerationContext, GenerationOutcome } from '../../lib/messaging/generation.js';
import { chatCompletions } from '../../lib/messaging/chat-completions.js';
import { responses } from '../../lib/messaging/responses.js';
import { UpstreamError, type ChatCompletionBody, type ResponsesBody } from '../../lib/messaging/upstream.js';
import { readLegacyCompletion, requestLegacyCompletion, type LegacyInput } from '../../lib/messaging/legacy.js';
import { chatCompletionBody, legacyCompletionBody, legacyIdParams, messagingAnswers, messagingErrors, modelParams, responsesBody } from './schemas.js';
import { listModels, readModel } from '../../lib/messaging/models.js';
import { clientGone, HttpAnswer } from './http-answer.js';
import { serviceVersion } from '../../lib/platform/version.js';

const startedAt = Date.now();

const quotaKeyAuth =
  'Authentication: a quota key (`Authorization: Bearer <key>`, or `X-API-Key: <key>`), checked by the quota gate (api/messaging/quota-gate.ts) before the body is read.';

/** Model-provider failures keep the OpenAI error shape (`error`) next to the service's `detail`. */
async function generate<B extends ChatCompletionBody | ResponsesBody>(input: HandlerInput<unknown, unknown, B>, deps: ApiDeps, run: (ctx: GenerationContext, body: B) => Promise<GenerationOutcome>): Promise<Reply> {
  const key = input.res.locals.quotaKey as QuotaKeyPrincipal;
  const answer = new HttpAnswer(input.res, deps.config.messaging.sseKeepAliveMs);
  let outcome: GenerationOutcome;
  try {
    outcome = await run({ deps, key, requestId: input.requestId, log: input.log, answer }, input.body);
  } catch (err) {
    if (!(err instanceof UpstreamError)) throw err;
    return upstreamFailure(input, err);
  }
  if (!('json' in outcome)) return undefined;
  answer.finishTiming();
  return { body: outcome.json };
}

function upstreamFailure<P, Q, B>(input: HandlerInput<P, Q, B>, err: UpstreamError): Reply {
  input.log.warn('model provider failed', { status: err.status, detail: err.message });
  const endpoint = input.req.originalUrl.split('?')[0];
  return { status: err.status, body: { error: err.openaiError, detail: { code: err.code, message: err.message, context: { request_id: input.requestId, endpoint } } } };
}

/** A provider answer relayed as JSON (the model list); provider failures as in `generate`. */
async function relay<P>(input: HandlerInput<P>, call: (signal: AbortSignal) => Promise<unknown>): Promise<Reply> {
  try {
    return { body: await call(clientGone(input.res).signal) };
  } catch (err) {
    if (!(err instanceof UpstreamError)) throw err;
    return upstreamFailure(input, err);
  }
}

/** The messaging interface (spec: messaging.md). Error bodies: `{detail: {code, message, context}}`. */
export function messagingRoutes(deps: ApiDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get', path: '/health', access: 'none', summary: 'Process is up',
      description: 'Answers without touching any dependency: `{status: "ok", uptime_seconds, version}`.',
      responses: { 200: { description: 'Up', schema: messagingAnswers.health } },
      handler: async () => ({ body: { status: 'ok', uptime_seconds: Math.round((Date.now() - startedAt) / 1000), version: serviceVersion } }),
    }),
    defineRoute({
      method: 'get', path: '/health/deep', access: 'none', summary: 'Postgres, Temporal, Weaviate and the file storage reachable',
      description: '200 `{status: "ok", checks: {postgres, temporal, weaviate}}` when every check passes; 503 with the same body and `status: "degraded"` otherwise. Each check is `{ok}`; with the administrator key (X-API-Key or Bearer) `{ok, latency_ms, error?}`.',
      responses: { 200: { description: 'All dependencies reachable', schema: messagingAnswers.deepHealth }, 503: { description: 'At least one dependency unreachable', schema: messagingAnswers.deepHealth } },
      handler: async ({ req }) => deepHealth(deps, presentsAdministratorKey(req, deps.config.adminApiKey)),
    }),
    defineRoute<unknown, unknown, ChatCompletionBody>({
      method: 'post', path: '/v3/chat/completions', access: 'quota', lean: true, summary: 'OpenAI-compatible chat completion (quota key)',
      description: `${quotaKeyAuth} Needs quota type \`chat\` or \`any\`. \`stream: true\` answers server-sent events (\`data: <chunk>\`, then \`data: [DONE]\`). The character of \`metadata.service\` becomes a system message (with knowledge context when it names a knowledge base); chat completions never carry visibility items.`,
      body: { type: 'json', schema: chatCompletionBody },
      responses: { 200: { description: 'A chat.completion object, or an SSE stream of chat.completion.chunk', content: messagingAnswers.chatCompletion }, ...messagingErrors },
      handler: (input) => generate(input, deps, chatCompletions),
    }),
    defineRoute<unknown, unknown, ResponsesBody>({
      method: 'post', path: '/v3/responses', access: 'quota', lean: true, summary: 'OpenAI-compatible responses (quota key), with knowledge visibility items',
      description: `${quotaKeyAuth} Needs quota type \`responses\` or \`any\`. For a knowledge-enabled character the output starts with the visibility items of spec 2.4 (\`rs_service_\`, \`fs_service_\`); streamed, the events follow spec section 4.`,
      body: { type: 'json', schema: responsesBody },
      responses: { 200: { description: 'A response object, or an SSE stream of response events', content: messagingAnswers.response }, ...messagingErrors },
      handler: (input) => generate(input, deps, responses),
    }),
    defineRoute({
      method: 'get', path: '/v3/models', access: 'quota', summary: "The model provider's model list (quota key)",
      description: `${quotaKeyAuth} Needs quota type \`chat\`, \`responses\` or \`any\`. The provider's \`GET /models\` answer as it sent it (\`{object: "list", data: [{id, object, created, owned_by}]}\`), kept by each API process for 60 s; the official SDK's \`models.list()\`. Costs no quota.`,
      responses: { 200: { description: 'The model list', schema: messagingAnswers.modelList }, ...messagingErrors },
      handler: (input) => relay(input, (signal) => listModels(deps, signal)),
    }),
    defineRoute<{ model: string }>({
      method: 'get', path: '/v3/models/{model}', access: 'quota', summary: 'One model of the provider (quota key)',
      description: `${quotaKeyAuth} Needs quota type \`chat\`, \`responses\` or \`any\`. The provider's \`GET /models/{model}\` answer; an unknown model is the provider's 404, with its OpenAI error in \`error\`. Costs no quota.`,
      params: modelParams,
      responses: { 200: { description: 'The model', schema: messagingAnswers.model }, ...messagingErrors },
      handler: (input) => relay(input, (signal) => readModel(deps, input.params.model, signal)),
    }),
    defineRoute<unknown, unknown, { input: LegacyInput }>({
      method: 'post', path: '/v2/completions', access: 'quota', deprecated: true, summary: 'Legacy completion (deprecated: use /v3)',
      description: `Deprecated: do not use for new projects; /v3 is the OpenAI-compatible interface. ${quotaKeyAuth} Needs quota type \`legacy\` or \`any\`. Answers \`{id: "/v2/completions/<id>", state: "in-progress"}\`; the completion runs as the workflow \`legacy-completion-<id>\`.`,
      body: { type: 'json', schema: legacyCompletionBody },
      responses: { 200: { description: '`{id, state}`', schema: messagingAnswers.legacyRequested }, ...messagingErrors, 501: { description: '`audio_files` are not supported: send the transcribed text as a user message' } },
      handler: async ({ body, res }) => ({ body: await requestLegacyCompletion(deps, res.locals.quotaKey, body.input) }),
    }),
    legacyPollRoute('/v2/completions/{id}', 'Poll a legacy completion (deprecated)'),
    legacyPollRoute('/v2/completions//v2/completions/{id}', 'Poll a legacy completion (deprecated; the id as returned, appended to the path)'),
  ];

  // The id is itself the path /v2/completions/<uuid> (spec 4): a client that appends it to the documented path gets the same answer.
  function legacyPollRoute(path: string, summary: string) {
    return defineRoute<{ id: string }>({
      method: 'get', path, access: 'quota', deprecated: true, summary,
      description: `Deprecated. ${quotaKeyAuth} \`{id, state, output, created_at, expires_at}\` (\`error\` too when failed). Finished results are kept for LEGACY_COMPLETION_RETENTION_SECONDS (20 minutes); afterwards, and for ids of other keys, 404.`,
      params: legacyIdParams,
      responses: { 200: { description: 'The completion', schema: messagingAnswers.legacyCompletion }, 404: { description: 'Unknown or expired' } },
      handler: async ({ params, res }) => ({ body: await readLegacyCompletion(deps, res.locals.quotaKey, params.id) }),
    });
  }
}
