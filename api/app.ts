import crypto from 'node:crypto';
import path from 'node:path';
import express, { type NextFunction, type Request, type Response } from 'express';
import { AppError } from '../lib/errors.js';
import { adminPrincipal, hashKey, secretsEqual, type Principal } from '../lib/auth.js';
import { buildRouter, type RouteEnvironment } from './http/route.js';
import { errorHandler, type ErrorStyle } from './http/errors.js';
import { buildOpenApi, type ApiInterface } from './http/openapi.js';
import { knowledgeBaseRoutes } from './knowledge-base/routes.js';
import { messagingRoutes } from './messaging/routes.js';
import { quotaKeyRoutes } from './messaging/quota-key-routes.js';
import { quotaKeyGate } from './messaging/quota-gate.js';
import type { ApiDeps } from './deps.js';

/** The interfaces this process serves; each has its own routes and error style. */
export function apiInterfaces(deps: ApiDeps): Array<ApiInterface & { errorStyle: ErrorStyle }> {
  return [
    { name: 'knowledge-base', description: 'Partners, knowledge bases, folders, documents, retrieval diagnostics', routes: knowledgeBaseRoutes(deps), errorStyle: 'detail' },
    { name: 'messaging', description: 'Health checks; OpenAI-compatible v3 and legacy v2 completions', routes: messagingRoutes(deps), errorStyle: 'messaging' },
    { name: 'messaging-admin', description: 'Quota keys of the messaging interface (administrator key)', routes: quotaKeyRoutes(deps), errorStyle: 'detail' },
  ];
}

function authenticator(deps: ApiDeps) {
  return async (key: string): Promise<Principal | null> => {
    if (secretsEqual(key, deps.config.adminApiKey)) return adminPrincipal;
    // The lookup is by hash of a 256-bit random key: timing reveals nothing about the key itself.
    const partner = await deps.db.partner.findUnique({ where: { keyHash: hashKey(key) } });
    return partner ? { isAdmin: false, partnerId: partner.id, partnerName: partner.name } : null;
  };
}

const requestIdPattern = /^[A-Za-z0-9._-]{8,128}$/;

export function createApp(deps: ApiDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple');

  app.use((req: Request, res: Response, next: NextFunction) => {
    const incoming = req.get('x-request-id');
    const requestId = incoming && requestIdPattern.test(incoming) ? incoming : crypto.randomUUID();
    const started = performance.now();
    res.locals.requestId = requestId;
    res.locals.log = deps.log.child({ request_id: requestId });
    res.setHeader('X-Request-Id', requestId);
    res.on('finish', () =>
      res.locals.log.info('request', { method: req.method, path: req.path, status: res.statusCode, duration_ms: Math.round(performance.now() - started) }),
    );
    next();
  });

  const env: RouteEnvironment = {
    authenticate: authenticator(deps),
    uploadDir: path.join(deps.config.storageDir, 'uploads'),
    maxUploadBytes: deps.config.maxUploadBytes,
  };
  const interfaces = apiInterfaces(deps);
  const openapi = buildOpenApi(interfaces, process.env.npm_package_version ?? '0.1.0');
  app.get(['/openapi.json', '/api/openapi.json'], (_req, res) => void res.json(openapi));

  // Quota keys of the generation endpoints are checked before any body is read.
  app.use(quotaKeyGate(deps));
  for (const api of interfaces) {
    const router = buildRouter(api.routes, env);
    router.use(errorHandler(api.errorStyle));
    app.use(router);
  }

  // Anything no interface answered: a JSON 404 in the style of the path's interface.
  app.use((req: Request, _res: Response, next: NextFunction) => next(new AppError('not_found', `no route for ${req.method} ${req.path}`)));
  app.use((err: unknown, req: Request, res: Response, next: NextFunction) =>
    errorHandler(/^\/v3\//.test(req.path) ? 'messaging' : 'detail')(err, req, res, next),
  );
  return app;
}
