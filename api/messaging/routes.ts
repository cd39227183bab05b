import { defineRoute, type RouteDefinition } from '../http/route.js';
import type { ApiDeps } from '../deps.js';
import { checkDependencies } from '../../lib/health.js';

const startedAt = Date.now();

/** The messaging interface (spec: messaging.md). Error bodies: `{detail: {code, message, context}}`. */
export function messagingRoutes(deps: ApiDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get', path: '/health', access: 'none', summary: 'Process is up',
      description: 'Answers without touching any dependency: `{status: "ok", uptime_seconds, version}`.',
      responses: { 200: { description: 'Up' } },
      handler: async () => ({ body: { status: 'ok', uptime_seconds: Math.round((Date.now() - startedAt) / 1000), version: process.env.npm_package_version ?? null } }),
    }),
    defineRoute({
      method: 'get', path: '/health/deep', access: 'none', summary: 'Postgres, Temporal and Weaviate reachable',
      description: '200 `{status: "ok", checks: {postgres, temporal, weaviate}}` when every check passes; 503 with the same body and `status: "degraded"` otherwise. Each check: `{ok, latency_ms, error?}`.',
      responses: { 200: { description: 'All dependencies reachable' }, 503: { description: 'At least one dependency unreachable' } },
      handler: async () => {
        const checks = await checkDependencies(deps);
        const ok = Object.values(checks).every((c) => c.ok);
        return { status: ok ? 200 : 503, body: { status: ok ? 'ok' : 'degraded', checks } };
      },
    }),
  ];
}
