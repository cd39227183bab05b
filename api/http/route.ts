import express, { type Request, type Response } from 'express';
import { AppError, badRequest } from '../../lib/platform/errors.js';
import type { Logger } from '../../lib/platform/logger.js';
import type { Principal } from '../../lib/platform/api-keys.js';
import type { UploadedFile } from '../../lib/digitization/uploads.js';
import { validate, type JsonSchema } from './validation.js';
import { presentedKey } from './api-key.js';
import { binaryBodyParser, formBodyParsers, formLimits, removeWritten } from './request-limits.js';

/**
 * A route is declared once, as data: its schemas validate requests and also become the OpenAPI
 * document (api/http/openapi.ts). Handlers receive validated input and return a Reply.
 *
 * Access levels: `none` (no key), `authenticated` (any valid key), `partner` (the administrator key
 * or a key scoped to the {partner} path parameter; the spec's "any"), `admin`, and `quota` (a
 * messaging quota key, checked before the route by api/messaging/quota-gate.ts).
 */
export type Access = 'none' | 'authenticated' | 'partner' | 'admin' | 'quota';


export interface FormOptions {
  files?: { name: string; maxCount: number }[];
  /** Largest file of this route (default MAX_UPLOAD_BYTES). */
  maxFileBytes?: number;
  /** Largest sum of the files of one request (default: files × maxFileBytes); enforced while the body streams. */
  maxTotalBytes?: number;
  /** Fields that are arrays: a single value (`field=a`) becomes `[a]`; `field[]` repeated already is one. */
  arrayFields?: string[];
  /** Fields whose value is structured (an array of objects): in a form they are sent as JSON text. */
  jsonFields?: string[];
  /** A request without any body (no Content-Type, nothing sent) is an empty form: every field takes its default. */
  allowEmptyBody?: boolean;
}

export type RouteBody =
  | { type: 'json'; schema: JsonSchema }
  | ({ type: 'form'; schema: JsonSchema } & FormOptions)
  /** Either a JSON body (validated as sent) or a multipart/urlencoded form (coerced), the same schema. */
  | ({ type: 'json-or-form'; schema: JsonSchema } & FormOptions)
  /** The body is one file, whatever its Content-Type; the handler gets it as its only file, named `field`. */
  | { type: 'binary'; maxBytes: number; field: string };

export interface RouteResponse {
  description: string;
  schema?: JsonSchema;
  /** The media type(s) of the body (default application/json). */
  contentType?: string | string[];
  /** Bodies of different media types with schemas of their own (JSON, or an SSE stream of the same route); instead of schema and contentType. */
  content?: Record<string, JsonSchema>;
}

export interface HandlerInput<P = unknown, Q = unknown, B = unknown> {
  params: P;
  query: Q;
  body: B;
  files: UploadedFile[];
  principal: Principal | null;
  requestId: string;
  log: Logger;
  req: Request;
  res: Response;
}

/** What a handler returns; `undefined` means it wrote the response itself (streams, downloads). */
export type Reply = { status?: number; body: unknown; headers?: Record<string, string> } | undefined;

/**
 * One route. Its handler is declared with method syntax, so that routes with different input types
 * share the type `RouteDefinition` (their input types are fixed by defineRoute's type arguments).
 */
export interface RouteDefinition<P = unknown, Q = unknown, B = unknown> {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** OpenAPI-style path, e.g. /api/knowledgebases/{partner}. */
  path: string;
  summary: string;
  description?: string;
  access: Access;
  /**
   * A query parameter that may carry the key as well as the headers (the voice interface's
   * `api_key`). It is read before the route's query is validated and removed from it.
   */
  queryKey?: string;
  deprecated?: boolean;
  params?: JsonSchema;
  query?: JsonSchema;
  body?: RouteBody;
  /**
   * Runs after authentication and before the body is read (admission: rate and concurrency
   * limits), so a refused client cannot make the server read or store its upload.
   */
  /**
   * Served without Express when the request is a plain JSON POST (api/http/lean-lane.ts): only the
   * /v3 generation routes, whose cost per request the gateway's benchmarks count. JSON body, no
   * path or query parameters, quota-key access.
   */
  lean?: boolean;
  preflight?(input: { principal: Principal | null; req: Request; res: Response }): Promise<void>;
  responses: Record<number, RouteResponse>;
  handler(input: HandlerInput<P, Q, B>): Promise<Reply>;
}

export const defineRoute = <P = Record<string, string>, Q = Record<string, unknown>, B = unknown>(route: RouteDefinition<P, Q, B>): RouteDefinition => route;

export interface RouteEnvironment {
  /** Resolves an API key to whom it belongs; null when the key is unknown. */
  authenticate(key: string): Promise<Principal | null>;
  /** Where multipart uploads land before a handler moves them into storage. */
  uploadDir: string;
  maxUploadBytes: number;
  /** Largest JSON or urlencoded body (JSON_BODY_MAX_BYTES). */
  jsonBodyMaxBytes: number;
  /** Largest form field without a maxLength of its own (FORM_TEXT_FIELD_MAX_BYTES). */
  formTextFieldMaxBytes: number;
  /**
   * The interface's rate limit per key (api/http/rate-limits.ts): runs after the key is known and
   * before it is authorized or any body is read; throws a 429 AppError.
   */
  rateLimit?(input: { req: Request; res: Response; principal: Principal | null; route: RouteDefinition }): Promise<void>;
}

const toExpressPath = (path: string) => path.replace(/\{([^{}]+)\}/g, ':$1');

function authorize(route: RouteDefinition, principal: Principal | null, params: Record<string, string>): void {
  if (route.access === 'none' || route.access === 'quota') return;
  if (!principal) throw new AppError('invalid_api_key', 'missing or invalid API key (send it in the X-API-Key header)');
  if (route.access === 'admin' && !principal.isAdmin) throw new AppError('forbidden', 'this endpoint needs the administrator key');
  if (route.access === 'partner' && !principal.isAdmin && principal.partnerName !== params.partner) {
    throw new AppError('forbidden', 'this key has no access to that partner');
  }
}

function collectFiles(req: Request): UploadedFile[] {
  const raw = req.files as Record<string, Express.Multer.File[]> | Express.Multer.File[] | undefined;
  const list = !raw ? [] : Array.isArray(raw) ? raw : Object.values(raw).flat();
  return list.map((f) => ({ field: f.fieldname, originalName: f.originalname, path: f.path, size: f.size, mimeType: f.mimetype, ...(f.buffer ? { bytes: f.buffer } : {}) }));
}

function formParser(route: RouteDefinition, env: RouteEnvironment): express.RequestHandler[] {
  const body = route.body;
  if (!body || body.type === 'json') return [];
  if (body.type === 'binary') return [binaryBodyParser(body.maxBytes, env.uploadDir, body.field)];
  const limits = formLimits(body, { maxUploadBytes: env.maxUploadBytes, formTextFieldMaxBytes: env.formTextFieldMaxBytes });
  return formBodyParsers(body, limits, env.uploadDir);
}

/** Registers the routes on a new Express router. Errors go to next(): the interface maps their shape. */
export function buildRouter(routes: RouteDefinition[], env: RouteEnvironment): express.Router {
  const router = express.Router();
  for (const route of routes) {
    // Authentication comes before any body is read, so that an unauthenticated client cannot make
    // the server parse or store a large upload.
    // The rate limit comes between the two: it needs to know whose key it is, and requests that
    // will be refused (a bad key, another partner's data) count too.
    const authenticate: express.RequestHandler = async (req, res, next) => {
      try {
        const key = presentedKey(req, route.queryKey);
        const principal = route.access === 'none' || route.access === 'quota' || !key ? null : await env.authenticate(key);
        await env.rateLimit?.({ req, res, principal, route });
        authorize(route, principal, req.params as Record<string, string>);
        res.locals.principal = principal;
        next();
      } catch (err) {
        next(err);
      }
    };
    const handlers: express.RequestHandler[] = [authenticate];
    if (route.preflight) {
      const preflight = route.preflight.bind(route);
      handlers.push(async (req, res, next) => {
        try {
          await preflight({ principal: res.locals.principal as Principal | null, req, res });
          next();
        } catch (err) {
          next(err);
        }
      });
    }
    if (route.body?.type === 'json' || route.body?.type === 'json-or-form') handlers.push(express.json({ limit: env.jsonBodyMaxBytes }));
    handlers.push(...formParser(route, env));
    handlers.push(async (req, res, next) => {
      const files = collectFiles(req);
      // Every file multer wrote for the request is tracked there (a handler that kept one moved it away).
      res.once('close', () => void removeWritten(req));
      try {
        const params = route.params ? validate('path', route.params, { ...req.params }, true) : { ...req.params };
        const rawQuery: Record<string, unknown> = { ...(req.query as object) };
        if (route.queryKey) delete rawQuery[route.queryKey];
        const query = route.query ? validate('query', route.query, rawQuery, true) : {};
        let body: unknown = undefined;
        if (route.body?.type === 'json') {
          if (!req.is('application/json')) throw badRequest('the request body must be JSON (Content-Type: application/json)');
          body = validate('body', route.body.schema, req.body, false);
        } else if (route.body?.type === 'json-or-form' && req.is('application/json')) {
          body = validate('body', route.body.schema, req.body, false);
        } else if (route.body?.type === 'form' && route.body.allowEmptyBody && !req.headers['content-type'] && !Number(req.headers['content-length'] ?? 0) && !req.headers['transfer-encoding']) {
          body = validate('form', route.body.schema, {}, true);
        } else if (route.body && route.body.type !== 'binary') {
          if (!req.is('multipart/form-data') && !req.is('application/x-www-form-urlencoded')) {
            throw badRequest(route.body.type === 'form' ? 'the request body must be multipart/form-data' : 'the request body must be JSON or multipart/form-data');
          }
          const fields: Record<string, unknown> = { ...(req.body ?? {}) };
          for (const name of route.body.arrayFields ?? []) {
            if (typeof fields[name] === 'string') fields[name] = [fields[name]];
          }
          for (const name of route.body.jsonFields ?? []) {
            if (typeof fields[name] !== 'string') continue;
            try {
              fields[name] = JSON.parse(fields[name]);
            } catch {
              throw badRequest(`form.${name} must be JSON text`, { fieldErrors: { [name]: ['must be JSON text'] } });
            }
          }
          body = validate('form', route.body.schema, fields, true);
        }
        const reply = await route.handler({
          params,
          query,
          body,
          files,
          principal: res.locals.principal as Principal | null,
          requestId: res.locals.requestId,
          log: res.locals.log,
          req,
          res,
        });
        if (reply) {
          for (const [k, v] of Object.entries(reply.headers ?? {})) res.setHeader(k, v);
          res.status(reply.status ?? 200).json(reply.body);
        }
      } catch (err) {
        // A refused request keeps nothing: its uploads are gone before the refusal is answered.
        await removeWritten(req);
        next(err);
      }
    });
    router[route.method](toExpressPath(route.path), ...handlers);
  }
  return router;
}
