import type { RouteDefinition } from './route.js';
import type { JsonSchema } from './validation.js';
import { answersInvalidWith422, type ErrorStyle } from './errors.js';

export interface ApiInterface {
  name: string;
  description: string;
  routes: RouteDefinition[];
  /** The interface's error body (api/http/errors.ts); in the document as the tag's `x-error-style` and `components.schemas`. */
  errorStyle?: ErrorStyle;
}

const text = { type: 'string' } as const;

/** The error bodies of each style, as api/http/errors.ts writes them. */
export const errorSchemas: Record<ErrorStyle | 'validation', JsonSchema> = {
  detail: { type: 'object', required: ['detail'], properties: { detail: text } },
  messaging: {
    type: 'object',
    required: ['detail'],
    properties: {
      detail: {
        type: 'object',
        required: ['code', 'message', 'context'],
        properties: { code: text, message: text, context: { type: 'object', required: ['request_id', 'endpoint'], properties: { request_id: text, endpoint: text } } },
      },
      error: {
        type: 'object',
        description: "OpenAI's error object, which the official OpenAI clients read: the provider's own on model-provider failures, else the service's error (`code` as in `detail`, `type` `invalid_request_error` or `server_error`, `param` the first invalid field)",
        properties: { message: text, type: text, code: { type: ['string', 'null'] }, param: { type: ['string', 'null'] } },
      },
    },
  },
  transcription: { type: 'object', required: ['error'], properties: { error: text } },
  speech: { type: 'object', required: ['error'], properties: { error: text, code: text } },
  dialog: { type: 'object', required: ['message'], properties: { message: text } },
  validation: { type: 'object', required: ['message', 'errors'], properties: { message: text, errors: { type: 'object', additionalProperties: { type: 'array', items: text } } } },
};

const schemaName = (style: ErrorStyle | 'validation') => `Error_${style}`;
const errorRef = (style: ErrorStyle | 'validation') => ({ $ref: `#/components/schemas/${schemaName(style)}` });

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
  if (route.body.type === 'binary') return { required: true, content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } };
  const json = route.body.type === 'json-or-form' ? { 'application/json': { schema: route.body.schema } } : {};
  const schema = structuredClone(route.body.schema) as { properties?: Record<string, unknown> };
  schema.properties = { ...(schema.properties ?? {}) };
  for (const f of route.body.files ?? []) {
    schema.properties[f.name] =
      f.maxCount > 1 ? { type: 'array', items: { type: 'string', format: 'binary' } } : { type: 'string', format: 'binary' };
  }
  return { required: !(route.body.type === 'form' && route.body.allowEmptyBody), content: { ...json, 'multipart/form-data': { schema }, 'application/x-www-form-urlencoded': { schema } } };
}

/** The body of an error a route declares without one: its interface's, or the validation body of a 422 in the /v2 job interfaces. */
const errorStyleOf = (status: number, style: ErrorStyle): ErrorStyle | 'validation' => (status === 422 && answersInvalidWith422.has(style) ? 'validation' : style);

const securityOf = (route: RouteDefinition) =>
  route.access === 'none' ? [] : route.access === 'quota' ? [{ QuotaKeyBearer: [] }, { QuotaKeyHeader: [] }] : [{ ApiKey: [] }];

/**
 * The answers every route may give besides its own (docs/abuse-resistance.md): 429 when its
 * caller is over the rate limit (with Retry-After), and for a route with a body, 413 when the body
 * is over its size limit.
 */
function commonResponses(route: RouteDefinition, style: ErrorStyle, anonymousLimited: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const json = (s: ErrorStyle | 'validation') => ({ 'application/json': { schema: errorRef(s) } });
  if (route.access !== 'none' || anonymousLimited) {
    out['429'] = {
      description: 'Too many requests from this key (REQUESTS_PER_MINUTE_*; docs/abuse-resistance.md); `Retry-After` says when to come back',
      headers: { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer', minimum: 1 } } },
      content: json(style),
    };
  }
  if (route.body) out['413'] = { description: 'The request body (or a file or field of it) is larger than this endpoint accepts', content: json(style) };
  return out;
}

/** The OpenAPI 3.1 document, derived from the same route definitions that validate requests. */
export function buildOpenApi(interfaces: ApiInterface[], version: string, options: { anonymousLimited?: boolean } = {}) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const api of interfaces) {
    for (const route of api.routes) {
      const responses: Record<string, unknown> = commonResponses(route, api.errorStyle ?? 'detail', options.anonymousLimited ?? false);
      for (const [status, r] of Object.entries(route.responses)) {
        const types = [r.contentType ?? 'application/json'].flat();
        const content = r.content ?? (r.schema ? Object.fromEntries(types.map((t) => [t, r.schema!])) : null);
        responses[status] = content
          ? { description: r.description, content: Object.fromEntries(Object.entries(content).map(([t, schema]) => [t, { schema }])) }
          : Number(status) >= 400
            ? { description: r.description, content: { 'application/json': { schema: errorRef(errorStyleOf(Number(status), api.errorStyle ?? 'detail')) } } }
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
        // Who may call it (api/http/route.ts Access): the generated auth matrix of test/abuse/fuzz.test.ts reads it.
        'x-access': route.access,
        ...(route.queryKey ? { 'x-query-key': route.queryKey } : {}),
      };
    }
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Knowledge, messaging and voice backend', version },
    tags: interfaces.map((i) => ({ name: i.name, description: i.description, 'x-error-style': i.errorStyle ?? 'detail' })),
    components: {
      schemas: Object.fromEntries((Object.keys(errorSchemas) as Array<keyof typeof errorSchemas>).map((k) => [schemaName(k), errorSchemas[k]])),
      securitySchemes: {
        ApiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        QuotaKeyBearer: { type: 'http', scheme: 'bearer', description: 'Messaging quota key (preferred)' },
        QuotaKeyHeader: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'Messaging quota key' },
      },
    },
    paths,
  };
}
