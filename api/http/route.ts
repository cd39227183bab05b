import fs from 'node:fs';
import express, { type NextFunction, type Request, type Response } from 'express';
import multer from 'multer';
import { AppError, badRequest } from '../../lib/errors.js';
import type { Logger } from '../../lib/logger.js';
import type { Principal } from '../../lib/auth.js';
import type { UploadedFile } from '../../lib/kb/uploads.js';
import { validate, type JsonSchema } from './validation.js';

/**
 * A route is declared once, as data: its schemas validate requests and also become the OpenAPI
 * document (api/http/openapi.ts). Handlers receive validated input and return a Reply.
 *
 * Access levels: `none` (no key), `authenticated` (any valid key), `partner` (the administrator key
 * or a key scoped to the {partner} path parameter; the spec's "any"), `admin`, and `quota` (a
 * messaging quota key, checked before the route by api/messaging/quota-gate.ts).
 */
export type Access = 'none' | 'authenticated' | 'partner' | 'admin' | 'quota';


export type RouteBody =
  | { type: 'json'; schema: JsonSchema }
  | { type: 'form'; schema: JsonSchema; files?: { name: string; maxCount: number }[] };

export interface RouteResponse {
  description: string;
  schema?: JsonSchema;
  contentType?: string;
}

export interface HandlerInput<P = any, Q = any, B = any> {
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

export interface RouteDefinition<P = any, Q = any, B = any> {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** OpenAPI-style path, e.g. /api/knowledgebases/{partner}. */
  path: string;
  summary: string;
  description?: string;
  access: Access;
  deprecated?: boolean;
  params?: JsonSchema;
  query?: JsonSchema;
  body?: RouteBody;
  responses: Record<number, RouteResponse>;
  handler: (input: HandlerInput<P, Q, B>) => Promise<Reply>;
}

export const defineRoute = <P = any, Q = any, B = any>(route: RouteDefinition<P, Q, B>) => route;

export interface RouteEnvironment {
  /** Resolves an API key to whom it belongs; null when the key is unknown. */
  authenticate(key: string): Promise<Principal | null>;
  /** Where multipart uploads land before a handler moves them into storage. */
  uploadDir: string;
  maxUploadBytes: number;
}

const toExpressPath = (path: string) => path.replace(/\{([^}]+)\}/g, ':$1');

function authorize(route: RouteDefinition, principal: Principal | null, params: Record<string, string>): void {
  if (route.access === 'none' || route.access === 'quota') return;
  if (!principal) throw new AppError('invalid_api_key', 'missing or invalid API key (send it in the X-API-Key header)');
  if (route.access === 'admin' && !principal.isAdmin) throw new AppError('forbidden', 'this endpoint needs the administrator key');
  if (route.access === 'partner' && !principal.isAdmin && principal.partnerName !== params.partner) {
    throw new AppError('forbidden', 'this key has no access to that partner');
  }
}

function keyFrom(req: Request): string | null {
  const header = req.get('x-api-key');
  if (header) return header.trim();
  const auth = req.get('authorization');
  if (auth && /^bearer\s+/i.test(auth)) return auth.replace(/^bearer\s+/i, '').trim();
  return null;
}

function removeUploads(files: UploadedFile[]) {
  for (const f of files) fs.rm(f.path, { force: true }, () => undefined);
}

function collectFiles(req: Request): UploadedFile[] {
  const raw = req.files as Record<string, Express.Multer.File[]> | Express.Multer.File[] | undefined;
  const list = !raw ? [] : Array.isArray(raw) ? raw : Object.values(raw).flat();
  return list.map((f) => ({ field: f.fieldname, originalName: f.originalname, path: f.path, size: f.size, mimeType: f.mimetype }));
}

function formParser(route: RouteDefinition, env: RouteEnvironment) {
  const body = route.body;
  if (!body || body.type !== 'form') return [];
  const upload = multer({
    dest: env.uploadDir,
    limits: { fileSize: env.maxUploadBytes, fields: 2000, fieldSize: 16 * 1024 * 1024, files: 1000 },
  });
  const multipart = body.files?.length ? upload.fields(body.files.map((f) => ({ name: f.name, maxCount: f.maxCount }))) : upload.none();
  const urlencoded = express.urlencoded({ extended: false, limit: '16mb' });
  return [
    (req: Request, res: Response, next: NextFunction) => (req.is('multipart/form-data') ? multipart(req, res, next) : next()),
    urlencoded,
  ];
}

/** Registers the routes on a new Express router. Errors go to next(): the interface maps their shape. */
export function buildRouter(routes: RouteDefinition[], env: RouteEnvironment): express.Router {
  const router = express.Router();
  for (const route of routes) {
    // Authentication comes before any body is read, so that an unauthenticated client cannot make
    // the server parse or store a large upload.
    const authenticate: express.RequestHandler = async (req, res, next) => {
      try {
        const key = keyFrom(req);
        const principal = route.access === 'none' || route.access === 'quota' || !key ? null : await env.authenticate(key);
        authorize(route, principal, req.params as Record<string, string>);
        res.locals.principal = principal;
        next();
      } catch (err) {
        next(err);
      }
    };
    const handlers: express.RequestHandler[] = [authenticate];
    if (route.body?.type === 'json') handlers.push(express.json({ limit: '16mb' }));
    handlers.push(...formParser(route, env));
    handlers.push(async (req, res, next) => {
      const files = collectFiles(req);
      res.once('close', () => removeUploads(files));
      try {
        const params = route.params ? validate('path', route.params, { ...req.params }, true) : { ...req.params };
        const query = route.query ? validate('query', route.query, { ...(req.query as object) }, true) : {};
        let body: unknown = undefined;
        if (route.body?.type === 'json') {
          if (!req.is('application/json')) throw badRequest('the request body must be JSON (Content-Type: application/json)');
          body = validate('body', route.body.schema, req.body, false);
        } else if (route.body?.type === 'form') {
          if (!req.is('multipart/form-data') && !req.is('application/x-www-form-urlencoded')) {
            throw badRequest('the request body must be multipart/form-data');
          }
          body = validate('form', route.body.schema, { ...(req.body ?? {}) }, true);
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
        next(err);
      }
    });
    router[route.method](toExpressPath(route.path), ...handlers);
  }
  return router;
}
