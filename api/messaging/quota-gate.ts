import express, { type Request, type Response } from 'express';
import type { ApiDeps } from '../deps.js';
import { errorHandler, type ErrorStyle } from '../http/errors.js';
import { presentedKey } from '../http/api-key.js';
import { assertQuotaType, authenticateQuotaKey, type MessagingEndpoint } from '../../lib/messaging/quota-keys.js';
import { mark, startTiming } from './timing.js';

/**
 * Every endpoint a quota key opens, with the quota type it needs and the error style of its
 * interface; `admitted`: it serves nothing before an admission in the database (or from an escrow
 * slice of a verified key), so a key known lately may pass unverified (authenticateQuotaKey).
 */
interface QuotaEndpoint {
  method: 'get' | 'post';
  path: string;
  endpoint: MessagingEndpoint | MessagingEndpoint[];
  style: ErrorStyle;
  admitted?: true;
}
const quotaEndpoints: QuotaEndpoint[] = [
  { method: 'post', path: '/v3/chat/completions', endpoint: 'chat', style: 'messaging', admitted: true },
  { method: 'get', path: '/v3/models', endpoint: ['chat', 'responses'], style: 'messaging' },
  { method: 'get', path: '/v3/models/:model', endpoint: ['chat', 'responses'], style: 'messaging' },
  { method: 'post', path: '/v3/responses', endpoint: 'responses', style: 'messaging', admitted: true },
  { method: 'post', path: '/v2/completions', endpoint: 'legacy', style: 'messaging' },
  { method: 'get', path: '/v2/completions/:id', endpoint: 'legacy', style: 'messaging' },
  { method: 'get', path: '/v2/completions//v2/completions/:id', endpoint: 'legacy', style: 'messaging' },
  { method: 'post', path: '/v2/audio/speech', endpoint: 'speech', style: 'speech' },
  { method: 'get', path: '/v2/audio/voices', endpoint: 'speech', style: 'speech' },
];

/** A quota-key endpoint by its method and exact path (routes with parameters excluded); null for other paths. */
export function quotaEndpointOf(method: string, path: string): QuotaEndpoint | null {
  return quotaEndpoints.find((e) => e.method === method.toLowerCase() && e.path === path) ?? null;
}

/**
 * Authenticates the quota key a request presents for `endpoint` and puts its owner in
 * `res.locals.quotaKey`; throws the refusal (api/http/errors.ts answers it in the interface's style).
 */
export async function checkQuotaKey(deps: ApiDeps, req: Pick<Request, 'headers' | 'query'>, res: Pick<Response, 'locals'>, { endpoint, admitted }: Pick<QuotaEndpoint, 'endpoint' | 'admitted'>): Promise<void> {
  startTiming(res, deps.config.messaging.serverTiming);
  const key = await authenticateQuotaKey(deps.db, presentedKey(req), deps.config.messaging.keyCacheSeconds, admitted);
  mark(res, 'authed');
  assertQuotaType(key, endpoint);
  res.locals.quotaKey = key;
}

/**
 * Quota-key authentication of the endpoints quota keys open, before any body is read:
 * `Authorization: Bearer <key>` (preferred) or `X-API-Key`. The key's owner lands in
 * `res.locals.quotaKey`; a refusal answers in the style of the endpoint's interface.
 */
export function quotaKeyGate(deps: ApiDeps): express.Router {
  const router = express.Router();
  for (const quotaEndpoint of quotaEndpoints) {
    const refuse = errorHandler(quotaEndpoint.style);
    router[quotaEndpoint.method](quotaEndpoint.path, async (req, res, next) => {
      try {
        await checkQuotaKey(deps, req, res, quotaEndpoint);
        next();
      } catch (err) {
        refuse(err, req, res, next);
      }
    });
  }
  return router;
}
