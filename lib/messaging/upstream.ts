import OpenAI, { APIError, APIUserAbortError, APIConnectionTimeoutError } from 'openai';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';

/**
 * The OpenAI-compatible model provider (OPENAI_BASE_URL / OPENAI_API_KEY), reached through the
 * official `openai` client. No automatic retries: a failed model is answered by `fallback_model`
 * (when the request names one), which keeps latency bounded and the number of paid calls visible.
 */
const clients = new WeakMap<Config, OpenAI>();

export function upstreamClient(config: Config): OpenAI {
  if (!config.openaiBaseUrl && !config.openaiApiKey) {
    throw new AppError('unavailable', 'no model provider is configured (set OPENAI_BASE_URL and/or OPENAI_API_KEY)');
  }
  let client = clients.get(config);
  if (!client) {
    client = new OpenAI({
      apiKey: config.openaiApiKey ?? 'unset',
      ...(config.openaiBaseUrl ? { baseURL: config.openaiBaseUrl } : {}),
      maxRetries: 0,
      timeout: config.messaging.upstreamTimeoutSeconds * 1000,
    });
    clients.set(config, client);
  }
  return client;
}

/** A model-provider failure, answered in the OpenAI error shape plus the service's `detail`. */
export class UpstreamError extends AppError {
  constructor(
    message: string,
    status: number,
    readonly openaiError: { message: string; type: string; code: string | null; param?: string | null },
  ) {
    super('upstream_error', message, undefined, status);
  }
}

export const isClientAbort = (err: unknown) => err instanceof APIUserAbortError || (err as Error)?.name === 'AbortError';

/** Maps what the client threw to the answer our caller gets. */
export function toUpstreamError(err: unknown, model: string): UpstreamError {
  if (err instanceof UpstreamError) return err;
  if (err instanceof APIConnectionTimeoutError) {
    return new UpstreamError(`model ${model}: the provider did not answer in time`, 504, { message: 'upstream timeout', type: 'server_error', code: 'timeout' });
  }
  if (err instanceof APIError && typeof err.status === 'number') {
    const e = (err.error ?? {}) as { message?: string; type?: string; code?: string | null; param?: string | null };
    const message = e.message ?? err.message;
    // A request the model refuses (bad parameter, unknown model) is the caller's to fix: same status.
    // Provider credentials, provider rate limits and provider faults are ours: 502 / 503.
    const status = err.status === 401 || err.status === 403 ? 502 : err.status === 429 ? 503 : err.status >= 500 ? 502 : err.status;
    return new UpstreamError(`model ${model}: ${message}`, status, { message, type: e.type ?? 'upstream_error', code: e.code ?? null, param: e.param ?? null });
  }
  const message = (err as Error)?.message ?? String(err);
  return new UpstreamError(`model ${model}: the provider could not be reached (${message})`, 502, { message, type: 'server_error', code: 'upstream_unreachable' });
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
