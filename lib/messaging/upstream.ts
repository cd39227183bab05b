import { OpenAiHttp, ProviderAnswerError, ProviderHttpError, ProviderTimeoutError, type RawStreamEvent, type StreamEvent } from '../providers/openai-http.js';
import type { Config } from '../platform/config.js';
import { AppError } from '../platform/errors.js';

/**
 * The OpenAI-compatible model provider (OPENAI_BASE_URL / OPENAI_API_KEY), spoken through the lean
 * transport of lib/providers/openai-http.ts on a keep-alive pool of MESSAGING_UPSTREAM_MAX_SOCKETS
 * connections. No automatic retries: a failed model is answered by `fallback_model` (when the
 * request names one), which keeps latency bounded and the number of paid calls visible.
 */
const clients = new WeakMap<Config, OpenAiHttp>();

export function upstreamClient(config: Config): OpenAiHttp {
  if (!config.openaiBaseUrl && !config.openaiApiKey) {
    throw new AppError('unavailable', 'no model provider is configured (set OPENAI_BASE_URL and/or OPENAI_API_KEY)');
  }
  let client = clients.get(config);
  if (!client) {
    client = new OpenAiHttp({
      baseUrl: config.openaiBaseUrl ?? 'https://api.openai.com/v1',
      apiKey: config.openaiApiKey,
      timeoutMs: config.messaging.upstreamTimeoutSeconds * 1000,
      maxSockets: config.messaging.upstreamMaxSockets,
    });
    clients.set(config, client);
  }
  return client;
}

/**
 * Request bodies, chunks and events pass through as the client and the provider wrote them: the
 * SDK's parameter types describe OpenAI's own models, not every OpenAI-compatible provider's, so
 * these shapes name only the members the service reads or changes (the JSON Schemas of
 * api/messaging/schemas.ts validated the request).
 */
export interface ChatCompletionBody {
  model: string;
  messages: unknown[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean } & Record<string, unknown>;
  max_tokens?: number;
  max_completion_tokens?: number;
  n?: number;
  metadata?: Record<string, unknown>;
  [member: string]: unknown;
}

export interface ResponsesBody {
  model: string;
  input?: unknown;
  instructions?: string;
  stream?: boolean;
  max_output_tokens?: number;
  metadata?: Record<string, unknown>;
  [member: string]: unknown;
}

export interface ProviderUsage {
  total_tokens?: number;
  prompt_tokens?: number;
  completion_tokens?: number;
  input_tokens?: number;
  output_tokens?: number;
}

export interface ChatCompletionResult {
  usage?: ProviderUsage | null;
  choices?: unknown[];
  [member: string]: unknown;
}

export interface ResponseObject {
  usage?: ProviderUsage | null;
  output?: unknown[];
  [member: string]: unknown;
}

export interface ResponseEvent {
  type: string;
  sequence_number?: number;
  output_index?: number;
  response?: ResponseObject;
  [member: string]: unknown;
}

/**
 * The provider's failure when a stream event is an error event, else null: a chat stream's chunk
 * `{error: {...}}`, or a responses stream's `error` event, whose message, code and param are its
 * own fields.
 */
export function streamFailure(event: string | null, data: Record<string, unknown>): ProviderHttpError | null {
  const nested = data.error && typeof data.error === 'object' ? (data.error as ProviderHttpError['error']) : null;
  if (nested && !('choices' in data) && !('type' in data && data.type !== 'error')) return new ProviderHttpError(0, nested, nested?.message ?? 'the provider sent an error event');
  if (event === 'error' || data.type === 'error') {
    const own = { message: data.message as string | undefined, code: (data.code as string | null | undefined) ?? null, param: (data.param as string | null | undefined) ?? null };
    const error = nested ?? own;
    return new ProviderHttpError(0, error, error?.message ?? 'the provider sent an error event');
  }
  return null;
}

/**
 * Whether an unparsed event can be an error event; only such events need parsing to tell. Inside
 * a JSON string a quote is escaped, so `"error"` in the text is a key or a whole value, never
 * model output.
 */
export const mayBeFailure = (e: RawStreamEvent) => e.event === 'error' || e.data.includes('"error"');

/** A stream's chunks, parsed; an `error` event of the provider ends it as a provider failure. */
async function* dataOf<T>(events: AsyncIterable<StreamEvent>): AsyncGenerator<T> {
  for await (const { event, data } of events) {
    const failure = streamFailure(event, data);
    if (failure) throw failure;
    yield data as T;
  }
}

/**
 * The provider calls of the gateway: bodies go out as forwarded, answers come back as sent. The
 * streams that are relayed as they are come unparsed, in batches (one per network read); the
 * relay parses only the events it must read or change.
 */
export const providerCalls = {
  chat: (client: OpenAiHttp, body: ChatCompletionBody & { stream: false }, signal: AbortSignal) => client.json<ChatCompletionResult>('chat/completions', body, signal),
  chatStream: (client: OpenAiHttp, body: ChatCompletionBody & { stream: true }, signal: AbortSignal) => client.streamRaw('chat/completions', body, signal),
  response: (client: OpenAiHttp, body: ResponsesBody & { stream: false }, signal: AbortSignal) => client.json<ResponseObject>('responses', body, signal),
  responseStream: (client: OpenAiHttp, body: ResponsesBody & { stream: true }, signal: AbortSignal) => client.streamRaw('responses', body, signal),
  responseEvents: async (client: OpenAiHttp, body: ResponsesBody & { stream: true }, signal: AbortSignal) => dataOf<ResponseEvent>(await client.stream('responses', body, signal)),
  models: (client: OpenAiHttp, signal: AbortSignal) => client.get<ModelList>('models', signal),
  model: (client: OpenAiHttp, id: string, signal: AbortSignal) => client.get<Record<string, unknown>>(`models/${encodeURIComponent(id)}`, signal),
};

/** The provider's `GET /models` answer: `{object: "list", data: [{id, object: "model", created, owned_by}]}`. */
export interface ModelList {
  object: string;
  data: unknown[];
  [member: string]: unknown;
}

/** A model-provider failure, answered in the OpenAI error shape plus the service's `detail`. */
export class UpstreamError extends AppError {
  constructor(
    message: string,
    status: number,
    readonly openaiError: { message: string; type: string; code: string | null; param: string | null },
  ) {
    super('upstream_error', message, undefined, status);
  }
}

export const isClientAbort = (err: unknown) => (err as Error)?.name === 'AbortError';

/** Maps what the client threw to the answer our caller gets. */
export function toUpstreamError(err: unknown, model: string): UpstreamError {
  if (err instanceof UpstreamError) return err;
  if (err instanceof ProviderTimeoutError) {
    return new UpstreamError(`model ${model}: the provider did not answer in time`, 504, { message: 'upstream timeout', type: 'server_error', code: 'timeout', param: null });
  }
  if (err instanceof ProviderHttpError && err.status > 0) {
    const e = err.error ?? {};
    const message = e.message ?? err.message;
    // A request the model refuses (bad parameter, unknown model) is the caller's to fix: same status.
    // Provider credentials, provider rate limits and provider faults are ours: 502 / 503.
    const status = err.status === 401 || err.status === 403 ? 502 : err.status === 429 ? 503 : err.status >= 500 ? 502 : err.status;
    return new UpstreamError(`model ${model}: ${message}`, status, { message, type: e.type ?? 'upstream_error', code: e.code ?? null, param: e.param ?? null });
  }
  if (err instanceof ProviderHttpError) {
    // An error event inside a stream: the provider's own error object, as a provider fault.
    const message = err.error?.message ?? err.message;
    return new UpstreamError(`model ${model}: ${message}`, 502, { message, type: err.error?.type ?? 'server_error', code: err.error?.code ?? null, param: err.error?.param ?? null });
  }
  if (err instanceof ProviderAnswerError) {
    const message = `the provider's answer could not be used: ${err.message}`;
    return new UpstreamError(`model ${model}: ${message}`, 502, { message, type: 'server_error', code: 'upstream_invalid_response', param: null });
  }
  const message = (err as Error)?.message ?? String(err);
  return new UpstreamError(`model ${model}: the provider could not be reached (${message})`, 502, { message, type: 'server_error', code: 'upstream_unreachable', param: null });
}

/**
 * Runs `call` with the requested model, then once with the fallback model when the first fails
 * (any provider failure except the client going away). Returns which model answered.
 */
export async function withFallback<T>(
  models: { model: string; fallback?: string | null },
  call: (model: string) => Promise<T>,
  onFallback?: (err: UpstreamError) => void,
): Promise<{ result: T; model: string; fallbackUsed: boolean }> {
  try {
    return { result: await call(models.model), model: models.model, fallbackUsed: false };
  } catch (err) {
    if (isClientAbort(err)) throw err;
    const first = toUpstreamError(err, models.model);
    if (!models.fallback || models.fallback === models.model) throw first;
    onFallback?.(first);
    try {
      return { result: await call(models.fallback), model: models.fallback, fallbackUsed: true };
    } catch (err2) {
      if (isClientAbort(err2)) throw err2;
      throw toUpstreamError(err2, models.fallback);
    }
  }
}
