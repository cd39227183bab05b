import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { AppError } from '../../lib/platform/errors.js';
import { hashKey, secretsEqual } from '../../lib/platform/api-keys.js';
import { Metrics } from '../../lib/platform/metrics.js';
import { registerOperationalMetrics } from '../../lib/knowledge/operational-metrics.js';
import type { ApiDeps } from '../deps.js';
import { presentedKey } from './api-key.js';

/**
 * Prometheus metrics of the API process (docs/operations.md, "Metrics"): every request is
 * counted and timed under its route template, and GET /metrics answers the exposition to the
 * administrator key or METRICS_API_KEY.
 */
export function apiMetrics(deps: ApiDeps): Metrics {
  const metrics = new Metrics({
    cacheSeconds: deps.config.metrics.cacheSeconds,
    onSourceError: (source, err) => deps.log.warn('metrics source failed', { source, error: (err as Error).message }),
  });
  registerOperationalMetrics(metrics, { ...deps, closedWindowSeconds: deps.config.metrics.closedWindowSeconds });
  return metrics;
}

type Segment = { literal: string } | { param: string };

/** A route template (`/api/documents/{partner}/{kb}`) as path segments. */
const segmentsOf = (template: string): Segment[] =>
  template
    .split('/')
    .filter(Boolean)
    .map((s) => (s.startsWith('{') && s.endsWith('}') ? { param: s.slice(1, -1) } : { literal: s.toLowerCase() }));

const methods = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * The template of the route a request is for, matched as Express matches it (first registered
 * route of that method whose segments fit; case-insensitive; a trailing slash allowed), so that a
 * request refused before its route ran (a bad quota key, a body too large) still counts under it.
 * A path no route has is `unmatched`: a raw path never becomes a label.
 */
export function routeTemplates(routes: Array<{ method: string; path: string }>): (method: string, path: string) => string {
  const table = routes.map((r) => ({ method: r.method.toUpperCase(), template: r.path, segments: segmentsOf(r.path) }));
  return (method, path) => {
    const wanted = method === 'HEAD' ? 'GET' : method;
    const parts = path.split('/').filter((p, i, all) => p !== '' || (i > 0 && i < all.length - 1));
    const found = table.find(
      (r) => r.method === wanted && r.segments.length === parts.length && r.segments.every((s, i) => ('param' in s ? parts[i] !== '' : s.literal === parts[i]!.toLowerCase())),
    );
    return found?.template ?? 'unmatched';
  };
}

/** Counts and times every request once its answer is sent (or its client has gone: status `aborted`). */
export function requestMetrics(metrics: Metrics, routes: Array<{ method: string; path: string }>): RequestHandler {
  const templateOf = routeTemplates(routes);
  return (req: Request, res: Response, next: NextFunction) => {
    const started = performance.now();
    res.once('close', () => {
      const method = methods.has(req.method) ? req.method : 'OTHER';
      const status = res.writableFinished ? String(res.statusCode) : 'aborted';
      // originalUrl: a mounted middleware that answered itself leaves req.url without its mount path.
      const path = req.originalUrl.split('?', 1)[0]!;
      metrics.observeRequest({ method, route: templateOf(req.method, path), status }, (performance.now() - started) / 1000);
    });
    next();
  };
}

/**
 * GET /metrics. Who may read it: the administrator key, or METRICS_API_KEY when it is set (a key
 * for Prometheus that can do nothing else), sent as `Authorization: Bearer <key>` (Prometheus'
 * `authorization` scrape setting) or in X-API-Key. No key, or an unknown one: 401; a partner's key: 403.
 */
export function metricsEndpoint(deps: ApiDeps, metrics: Metrics): RequestHandler {
  const allowed = [deps.config.adminApiKey, deps.config.metrics.apiKey].filter((k): k is string => !!k);
  return async (req: Request, res: Response, next: NextFunction) => {
    try {
      const key = presentedKey(req);
      if (!key) throw new AppError('invalid_api_key', 'missing API key: send the administrator key or METRICS_API_KEY as Authorization: Bearer <key>');
      if (!allowed.some((k) => secretsEqual(key, k))) {
        const partner = await deps.db.partner.findUnique({ where: { keyHash: hashKey(key) }, select: { id: true } });
        if (partner) throw new AppError('forbidden', '/metrics needs the administrator key or METRICS_API_KEY');
        throw new AppError('invalid_api_key', 'invalid API key');
      }
      const { contentType, body } = await metrics.exposition();
      res.setHeader('Cache-Control', 'no-store');
      res.type(contentType).send(body);
    } catch (err) {
      next(err);
    }
  };
}
