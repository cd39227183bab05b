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
