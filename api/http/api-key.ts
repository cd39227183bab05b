import type { Request } from 'express';
import { AppError } from '../../lib/platform/errors.js';
import { secretsEqual } from '../../lib/platform/api-keys.js';

/**
 * The key a request presents, in `X-API-Key` or in `Authorization` (every interface accepts both),
 * and, for routes that name one (the voice interface's `api_key`), in a query parameter. In
 * `Authorization` it is `Bearer <key>` or the bare key, as AssemblyAI's clients send it; other
 * schemes (`Basic ...`) are not keys. A request that sends two different keys is refused rather
 * than have one silently win: which one was meant cannot be known.
 */
export function presentedKey(req: Pick<Request, 'headers' | 'query'>, queryParameter?: string): string | null {
  // Node's headers, not Express's req.get: the /v3 lane (api/http/lean-lane.ts) has no Express request.
  const header = headerText(req.headers['x-api-key'])?.trim() || null;
  const bearer = /^(?:bearer\s+)?(\S+)\s*$/i.exec(headerText(req.headers.authorization)?.trim() ?? '')?.[1] ?? null;
  if (header && bearer && header !== bearer) {
    throw new AppError('invalid_api_key', 'two different keys were sent (X-API-Key and Authorization); send one');
  }
  const query = queryParameter ? queryKey(req, queryParameter) : null;
  const sent = header ?? bearer;
  if (sent && query && sent !== query) {
    throw new AppError('invalid_api_key', `two different keys were sent (a header and the ${queryParameter} query parameter); send one`);
  }
  return sent ?? query;
}

const headerText = (value: string | string[] | undefined) => (Array.isArray(value) ? value.join(', ') : value);

/** The key in a query parameter; the parameter repeated with different values is refused. */
function queryKey(req: Pick<Request, 'query'>, name: string): string | null {
  const raw = (req.query as Record<string, unknown>)[name];
  const values = (Array.isArray(raw) ? raw : [raw]).filter((v): v is string => typeof v === 'string').map((v) => v.trim()).filter(Boolean);
  if (new Set(values).size > 1) throw new AppError('invalid_api_key', `two different keys were sent (the ${name} query parameter twice); send one`);
  return values[0] ?? null;
}

/** Whether a request presents the administrator key (a request sending two keys does not). */
export function presentsAdministratorKey(req: Pick<Request, 'headers' | 'query'>, adminApiKey: string): boolean {
  try {
    const key = presentedKey(req);
    return !!key && secretsEqual(key, adminApiKey);
  } catch {
    return false;
  }
}
