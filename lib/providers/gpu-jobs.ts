import { trimEndOf } from '../platform/text.js';
import { readBoundedBody } from './web-fetch.js';
import { isUnavailableStatus } from './service-unavailable.js';

/**
 * A GPU job service speaking the RunPod serverless queue protocol, and nothing else:
 * - `POST {base}/run` with `{"input": {...}}` → `{"id", "status": "IN_QUEUE"}`;
 * - `GET {base}/status/{id}` → `{"id", "status", "delayTime"?, "executionTime"?, "output"?, "error"?}`
 *   with status IN_QUEUE, IN_PROGRESS, COMPLETED, FAILED, CANCELLED or TIMED_OUT;
 * - `POST {base}/cancel/{id}`;
 * - `GET {base}/health`.
 * The key goes in the `authorization` header, as RunPod expects it. Failures are told apart for
 * the caller: `refused` (a 4xx other than 408/429: asking again cannot help), `unavailable` (5xx,
 * 408, 429, the network, an answer that is not the protocol's) and `timeout`.
 */
export type GpuJobStatus = 'IN_QUEUE' | 'IN_PROGRESS' | 'COMPLETED' | 'FAILED' | 'CANCELLED' | 'TIMED_OUT';

const knownStatuses: ReadonlySet<string> = new Set(['IN_QUEUE', 'IN_PROGRESS', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT']);

export interface GpuJobState {
  id: string;
  status: GpuJobStatus;
  /** The handler's output (COMPLETED), as the service sent it. */
  output?: unknown;
  /** The service's error (FAILED), as text. */
  error?: string;
  delayTime?: number;
  executionTime?: number;
}

export class GpuJobError extends Error {
  override name = 'GpuJobError';
  constructor(
    readonly kind: 'refused' | 'unavailable' | 'timeout',
    message: string,
    readonly httpStatus?: number,
  ) {
    super(message);
  }
}

export interface GpuJobServiceOptions {
  baseUrl: string;
  apiKey: string | null;
  /** Bound on one HTTP request (default 30 s). */
  requestTimeoutMs?: number;
}

export class GpuJobService {
  private readonly base: string;
  private readonly timeoutMs: number;

  constructor(private readonly options: GpuJobServiceOptions) {
    this.base = trimEndOf(options.baseUrl, '/');
    this.timeoutMs = options.requestTimeoutMs ?? 30_000;
  }

  private headers(json: boolean): Record<string, string> {
    return { accept: 'application/json', ...(json ? { 'content-type': 'application/json' } : {}), ...(this.options.apiKey ? { authorization: this.options.apiKey } : {}) };
  }

  private async call(method: 'GET' | 'POST', path: string, body?: unknown, signal?: AbortSignal): Promise<unknown> {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    let res: Response;
    try {
      res = await fetch(`${this.base}${path}`, {
        method,
        headers: this.headers(body !== undefined),
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    } catch (err) {
      if (signal?.aborted) throw err;
      if (timeout.aborted) throw new GpuJobError('timeout', `the GPU job service did not answer ${method} ${path} within ${Math.round(this.timeoutMs / 1000)} s`);
      throw new GpuJobError('unavailable', `the GPU job service could not be reached (${(err as Error).message})`);
    }
    // Bounded: a job's state is small (its artefacts are downloaded separately, also bounded).
    let text: string;
    try {
      text = (await readBoundedBody(res, 16 * 1024 * 1024, () => new GpuJobError('unavailable', `the GPU job service answered ${method} ${path} with more than 16 MiB`))).toString('utf8');
    } catch (err) {
      if (err instanceof GpuJobError || signal?.aborted) throw err;
      throw new GpuJobError('unavailable', `the GPU job service's answer to ${method} ${path} was cut off (${(err as Error).message})`);
    }
    if (!res.ok) {
      throw new GpuJobError(isUnavailableStatus(res.status) ? 'unavailable' : 'refused', `the GPU job service answered ${method} ${path} with HTTP ${res.status}: ${text.slice(0, 300)}`, res.status);
    }
    try {
      return text ? JSON.parse(text) : {};
    } catch {
      throw new GpuJobError('unavailable', `the GPU job service answered ${method} ${path} with something that is not JSON`);
    }
  }

  private state(value: unknown, what: string): GpuJobState {
    const v = value as Partial<Record<string, unknown>> | null;
    if (!v || typeof v !== 'object' || typeof v.id !== 'string' || typeof v.status !== 'string' || !knownStatuses.has(v.status)) {
      throw new GpuJobError('unavailable', `the GPU job service's answer to ${what} is not a job state: ${JSON.stringify(value).slice(0, 200)}`);
    }
    const error = v.error === undefined || v.error === null ? undefined : typeof v.error === 'string' ? v.error : JSON.stringify(v.error);
    return {
      id: v.id,
      status: v.status as GpuJobStatus,
      output: v.output,
      error,
      delayTime: typeof v.delayTime === 'number' ? v.delayTime : undefined,
      executionTime: typeof v.executionTime === 'number' ? v.executionTime : undefined,
    };
  }

  /** Queues a job; its input is sent as `{"input": input}`. */
  async run(input: Record<string, unknown>, signal?: AbortSignal): Promise<GpuJobState> {
    return this.state(await this.call('POST', '/run', { input }, signal), 'POST /run');
  }

  async status(id: string, signal?: AbortSignal): Promise<GpuJobState> {
    return this.state(await this.call('GET', `/status/${encodeURIComponent(id)}`, undefined, signal), 'GET /status');
  }

  /** Asks the service to stop a job; a job that is already finished or unknown is not an error. */
  async cancel(id: string, signal?: AbortSignal): Promise<void> {
    try {
      await this.call('POST', `/cancel/${encodeURIComponent(id)}`, undefined, signal);
    } catch (err) {
      if (err instanceof GpuJobError && err.kind === 'refused' && (err.httpStatus === 404 || err.httpStatus === 400)) return;
      throw err;
    }
  }

  async health(signal?: AbortSignal): Promise<unknown> {
    return this.call('GET', '/health', undefined, signal);
  }

  /**
   * Downloads a file a job's output points at (its artefacts), at most `maxBytes`. The key is sent
   * only to the service's own origin, never to a storage host the output names.
   */
  async download(url: string, maxBytes: number, signal?: AbortSignal): Promise<Buffer> {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new GpuJobError('refused', `the GPU job's output names an invalid URL: ${JSON.stringify(url).slice(0, 200)}`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new GpuJobError('refused', `the GPU job's output names a URL that is not http(s): ${parsed.protocol}`);
    const sameOrigin = parsed.origin === new URL(this.base).origin;
    const timeout = AbortSignal.timeout(Math.max(this.timeoutMs, 120_000));
    let res: Response;
    try {
      res = await fetch(parsed, { headers: sameOrigin && this.options.apiKey ? { authorization: this.options.apiKey } : {}, signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
    } catch (err) {
      if (signal?.aborted) throw err;
      throw new GpuJobError(timeout.aborted ? 'timeout' : 'unavailable', `the GPU job's file ${parsed.pathname} could not be downloaded (${(err as Error).message})`);
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw new GpuJobError(isUnavailableStatus(res.status) ? 'unavailable' : 'refused', `the GPU job's file ${parsed.pathname} answered HTTP ${res.status}`, res.status);
    }
    const parts: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body ?? []) {
      size += (chunk as Uint8Array).length;
      if (size > maxBytes) {
        await res.body?.cancel().catch(() => undefined);
        throw new GpuJobError('refused', `the GPU job's file ${parsed.pathname} is larger than ${maxBytes} bytes`);
      }
      parts.push(Buffer.from(chunk as Uint8Array));
    }
    return Buffer.concat(parts);
  }
}
