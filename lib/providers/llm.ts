import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError } from 'openai';

/**
 * The chat-completion adapter that rewriting and dialog analysis use: one call, no hidden retries
 * (the workflow decides about retries, budget and fallback), and every failure classified by what
 * it means for the budget: whether the provider may have done (and billed) the work.
 */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/**
 * OpenAI's `response_format`: structured outputs (`json_schema`, the answer is constrained to the
 * schema) or JSON mode (`json_object`, any JSON object). Omitted: free text.
 */
export type ChatResponseFormat =
  | { type: 'json_schema'; json_schema: { name: string; strict: boolean; schema: Record<string, unknown> } }
  | { type: 'json_object' };

export interface ChatCallRequest {
  model: string;
  messages: ChatMessage[];
  maxOutputTokens: number;
  timeoutMs: number;
  responseFormat?: ChatResponseFormat;
  signal?: AbortSignal;
}

export interface ChatCallResult {
  content: string;
  /** The model's refusal (structured outputs), when it declined to answer; content is then empty. */
  refusal?: string | null;
  /** `stop`, `length` (cut at the output limit), `content_filter`, ... as the provider says. */
  finishReason: string | null;
  /** Null when the provider reported no usage. */
  usage: { promptTokens: number; outputTokens: number } | null;
  /** The model that answered, as the provider names it. */
  model: string;
}

/**
 * - `rate_limited`: 429; nothing was generated.
 * - `unavailable`: 5xx or a refused connection; nothing was generated.
 * - `ambiguous`: a timeout, a dropped connection or an unreadable answer: the provider may have
 *   generated (and billed) the answer, so its usage is unknown.
 * - `permanent`: the request itself is wrong (4xx other than 429: unknown model, bad key, too long).
 */
export type LlmFailureKind = 'rate_limited' | 'unavailable' | 'ambiguous' | 'permanent';

export class LlmCallFailed extends Error {
  override name = 'LlmCallFailed';
  constructor(
    readonly kind: LlmFailureKind,
    message: string,
    readonly status: number | null = null,
    /** The provider's retry-after hint, if it sent one. */
    readonly retryAfterMs: number | null = null,
    /** The request parameter the provider blamed (OpenAI's `error.param`), if it named one. */
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

/**
 * Whether the provider refused the request because of its `response_format` (a model or server
 * without structured outputs or JSON mode): then the same request without it may work.
 */
export function isResponseFormatRejection(failure: LlmCallFailed): boolean {
  if (failure.kind !== 'permanent' || (failure.status !== 400 && failure.status !== 422)) return false;
  return failure.param === 'response_format' || /response_format|json_schema|json_object|structured output/i.test(failure.message);
}

export interface ChatModel {
  complete(request: ChatCallRequest): Promise<ChatCallResult>;
}

function retryAfterMs(headers: Headers | undefined): number | null {
  if (!headers) return null;
  const ms = Number(headers.get('retry-after-ms'));
  if (headers.get('retry-after-ms') && Number.isFinite(ms) && ms >= 0) return ms;
  const value = headers.get('retry-after');
  if (!value) return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, date - Date.now());
}

function refused(err: unknown): boolean {
  let cause: unknown = err;
  for (let i = 0; i < 5 && cause; i++) {
    if ((cause as { code?: string }).code === 'ECONNREFUSED') return true;
    cause = (cause as { cause?: unknown }).cause;
  }
  return false;
}

export function classifyLlmError(err: unknown): LlmCallFailed {
  if (err instanceof LlmCallFailed) return err;
  if (err instanceof APIConnectionTimeoutError) return new LlmCallFailed('ambiguous', 'the model did not answer in time');
  if (err instanceof APIConnectionError) {
    if (refused(err)) return new LlmCallFailed('unavailable', 'the model API refused the connection');
    return new LlmCallFailed('ambiguous', `the connection to the model API broke: ${err.message}`);
  }
  if (err instanceof APIError && typeof err.status === 'number') {
    const detail = err.message || `HTTP ${err.status}`;
    const hint = retryAfterMs(err.headers as Headers | undefined);
    if (err.status === 429) return new LlmCallFailed('rate_limited', `rate limited by the model API: ${detail}`, 429, hint);
    if (err.status >= 500 || err.status === 408) return new LlmCallFailed('unavailable', `the model API failed: ${detail}`, err.status, hint);
    return new LlmCallFailed('permanent', `the model API rejected the request: ${detail}`, err.status, null, typeof err.param === 'string' ? err.param : null);
  }
  // An answer the client could not read (not JSON, not a completion): generated or not, unknown.
  return new LlmCallFailed('ambiguous', `unreadable answer from the model API: ${(err as Error)?.message ?? String(err)}`);
}

export class OpenAiChatModel implements ChatModel {
  private readonly client: OpenAI;

  constructor(options: { baseURL: string; apiKey: string | null }) {
    // maxRetries 0: retries are the workflow's, each with its own budget admission.
    this.client = new OpenAI({ baseURL: options.baseURL, apiKey: options.apiKey || 'not-needed', maxRetries: 0 });
  }

  async complete(request: ChatCallRequest): Promise<ChatCallResult> {
    let completion;
    try {
      completion = await this.client.chat.completions.create(
        {
          model: request.model,
          messages: request.messages,
          max_completion_tokens: request.maxOutputTokens,
          ...(request.responseFormat ? { response_format: request.responseFormat } : {}),
        },
        { timeout: request.timeoutMs, signal: request.signal },
      );
    } catch (err) {
      throw classifyLlmError(err);
    }
    const choice = completion?.choices?.[0];
    if (!choice || !choice.message || (typeof choice.message.content !== 'string' && choice.message.content !== null)) {
      throw new LlmCallFailed('ambiguous', 'the model API answered without a completion');
    }
    const refusal = typeof choice.message.refusal === 'string' && choice.message.refusal ? choice.message.refusal : null;
    const usage = completion.usage;
    const known = usage && Number.isInteger(usage.prompt_tokens) && Number.isInteger(usage.completion_tokens);
    return {
      content: choice.message.content ?? '',
      refusal,
      finishReason: choice.finish_reason ?? null,
      usage: known ? { promptTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens } : null,
      model: completion.model || request.model,
    };
  }
}
