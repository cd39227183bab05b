/**
 * The one error type of the service. Code that rejects a request throws an AppError; each
 * interface maps it to its own body shape in api/http/errors.ts.
 */
export type ErrorCode =
  | 'bad_request'
  /** A well-formed, valid request the service will not carry out as asked (an unknown voice, a provider refusing the input): 400 in every interface, never the 422 of invalid input. */
  | 'request_refused'
  | 'invalid_api_key'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'quota_exceeded'
  | 'rate_limited'
  | 'upstream_error'
  | 'unavailable'
  | 'internal_error';

const statusOf: Record<ErrorCode, number> = {
  bad_request: 400,
  request_refused: 400,
  invalid_api_key: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  quota_exceeded: 403,
  rate_limited: 429,
  upstream_error: 502,
  unavailable: 503,
  internal_error: 500,
};

export class AppError extends Error {
  override name = 'AppError';
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    /**
     * Logged, not shown; except `fieldErrors` (validation), `code` (speech), `retryAfterSeconds`
     * (Retry-After) and `responseFields` (added to a `{detail}` body), which api/http/errors.ts maps.
     */
    readonly details?: Record<string, unknown>,
    status?: number,
  ) {
    super(message);
    this.status = status ?? statusOf[code];
  }
}

export const badRequest = (message: string, details?: Record<string, unknown>) => new AppError('bad_request', message, details);
export const notFound = (message: string) => new AppError('not_found', message);
export const forbidden = (message: string) => new AppError('forbidden', message);
export const conflict = (message: string, details?: Record<string, unknown>) => new AppError('conflict', message, details);
