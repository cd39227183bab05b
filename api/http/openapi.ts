import type { RouteDefinition } from './route.js';
import type { JsonSchema } from './validation.js';

export interface ApiInterface {
  name: string;
  description: string;
  routes: RouteDefinition[];
}

function parametersOf(route: RouteDefinition) {
  const out: unknown[] = [];
  for (const [where, schema] of [['path', route.params], ['query', route.query]] as const) {
    const props = (schema?.properties ?? {}) as Record<string, JsonSchema>;
    const required = new Set((schema?.required as string[] | undefined) ?? []);
    for (const [name, s] of Object.entries(props)) {
      out.push({ name, in: where, required: where === 'path' || required.has(name), schema: s, description: s.description });
    }
  }
  return out;
}

function requestBodyOf(route: RouteDefinition) {
  if (!route.body) return undefined;
  if (route.body.type === 'json') return { required: true, content: { 'application/json': { schema: route.body.schema } } };
  const schema = structuredClone(route.body.schema) as { properties?: Record<string, unknown> };
  schema.properties = { ...(schema.properties ?? {}) };
  for (const f of route.body.files ?? []) {
    schema.properties[f.name] =
      f.maxCount > 1 ? { type: 'array', items: { type: 'string', format: 'binary' } } : { type: 'string', format: 'binary' };
  }
  return { required: true, content: { 'multipart/form-data': { schema }, 'application/x-www-form-urlencoded': { schema } } };
}

const securityOf = (route: RouteDefinition) =>
  route.access === 'none' ? [] : route.access === 'quota' ? [{ QuotaKeyBearer: [] }, { QuotaKeyHeader: [] }] : [{ ApiKey: [] }];

/** The OpenAPI 3.1 document, derived from the same route definitions that validate requests. */
export function buildOpenApi(interfaces: ApiInterface[], version: string) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const api of interfaces) {
    for (const route of api.routes) {
      const responses: Record<string, unknown> = {};
      for (const [status, r] of Object.entries(route.responses)) {
        responses[status] = r.schema
          ? { description: r.description, content: { [r.contentType ?? 'application/json']: { schema: r.schema } } }
          : { description: r.description };
      }
      (paths[route.path] ??= {})[route.method] = {
        tags: [api.name],
        summary: route.summary,
        description: [route.description, `Access: ${route.access}.`].filter(Boolean).join('\n\n'),
        deprecated: route.deprecated || undefined,
        parameters: parametersOf(route),
        requestBody: requestBodyOf(route),
        responses,
        security: securityOf(route),
      };
    }
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Knowledge, messaging and voice backend', version },
    tags: interfaces.map((i) => ({ name: i.name, description: i.description })),
    components: {
      securitySchemes: {
        ApiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        QuotaKeyBearer: { type: 'http', scheme: 'bearer', description: 'Messaging quota key (preferred)' },
        QuotaKeyHeader: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'Messaging quota key' },
      },
    },
    paths,
  };
}
