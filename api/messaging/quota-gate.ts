import express, { type Request } from 'express';
import type { ApiDeps } from '../deps.js';
import { errorHandler } from '../http/errors.js';
import { assertQuotaType, authenticateQuotaKey, type MessagingEndpoint } from '../../lib/messaging/quota-keys.js';

/**
 * Quota-key authentication of the generation endpoints, before any body is read: `Authorization:
 * Bearer <key>` (preferred) or `X-API-Key`. The key's owner lands in `res.locals.quotaKey`.
 */
function keyFrom(req: Request): string | null {
  const auth = req.get('authorization');
  if (auth && /^bearer\s+\S/i.test(auth)) return auth.replace(/^bearer\s+/i, '').trim();
  const header = req.get('x-api-key');
  return header ? header.trim() : null;
}

export const generationEndpoints: Array<{ method: 'get' | 'post'; path: string; endpoint: MessagingEndpoint }> = [
  { method: 'post', path: '/v3/chat/completions', endpoint: 'chat' },
  { method: 'post', path: '/v3/responses', endpoint: 'responses' },
  { method: 'post', path: '/v2/completions', endpoint: 'legacy' },
  { method: 'get', path: '/v2/completions/:id', endpoint: 'legacy' },
];

export function quotaKeyGate(deps: ApiDeps): express.Router {
  const router = express.Router();
  for (const { method, path, endpoint } of generationEndpoints) {
    router[method](path, async (req, res, next) => {
      try {
        const key = await authenticateQuotaKey(deps.db, keyFrom(req));
        assertQuotaType(key, endpoint);
        res.locals.quotaKey = key;
        next();
      } catch (err) {
        next(err);
      }
    });
  }
  router.use(errorHandler('messaging'));
  return router;
}
