import { APIConnectionTimeoutError, APIError } from 'openai';

/**
 * A service the work needs is down or overloaded: it refused the connection, reset it, or answered
 * 5xx or 429. Nothing was done, so the same request may succeed later; a document pipeline waits
 * such an outage out (EMBEDDING_MAX_OUTAGE_SECONDS, DIGITIZATION_MAX_OUTAGE_SECONDS) instead of failing
 * the document.
 */
export class ServiceUnavailable extends Error {
  override name = 'ServiceUnavailable';
}

/** The provider refused a request as made (4xx other than 408/429): the same request will fail again. */
export class ServiceRejected extends Error {
  override name = 'ServiceRejected';
}

const CONNECTION_FAILURES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT']);

/** The error, or one of its causes, is a connection that could not be made or broke (fetch, node:http). */
export function connectionFailed(err: unknown): boolean {
  let cause: unknown = err;
  for (let depth = 0; depth < 5 && cause; depth++) {
    if (CONNECTION_FAILURES.has((cause as { code?: string }).code ?? '')) return true;
    cause = (cause as { cause?: unknown }).cause;
  }
  return false;
}

/** An SDK error's message without the status it opens with ("503 The server is overloaded"): the status is said once. */
export const providerMessage = (status: number, message: string) => message.replace(new RegExp(`^${status}\\b\\s*`), '') || 'no message';

/** An HTTP status that says "not now" rather than "not this request". */
export const isUnavailableStatus = (status: number) => status >= 500 || status === 408 || status === 429;

/**
 * An OpenAI-SDK API's failure (`what`: "the embeddings API"), after the client's own quick retries:
 * down or overloaded (refused or broken connections, 408, 429, 5xx) is ServiceUnavailable; another
 * 4xx (a bad key, an unknown model, an input too long) is ServiceRejected; anything else (a timeout,
 * an unreadable answer) is returned as it is.
 */
export function classifiedApiError(err: unknown, what: string): unknown {
  if (err instanceof APIConnectionTimeoutError) return err;
  if (err instanceof APIError && typeof err.status === 'number') {
    const detail = `${what} answered HTTP ${err.status}: ${providerMessage(err.status, err.message)}`;
    return isUnavailableStatus(err.status) ? new ServiceUnavailable(detail) : new ServiceRejected(detail);
  }
  if (connectionFailed(err)) return new ServiceUnavailable(`${what} could not be reached: ${(err as Error).message}`);
  return err;
}
