import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, RequestHandler, Response } from 'express';
import proxyaddr from 'proxy-addr';
import { AppError, badRequest } from '../../lib/platform/errors.js';
import type { Logger } from '../../lib/platform/logger.js';
import { answerError, sendJson, type ErrorStyle } from './errors.js';
import type { RouteDefinition, RouteEnvironment } from './route.js';
import { validate, type JsonSchema } from './validation.js';

/**
 * Routes served without Express: the /v3 generation routes (`lean: true`), the gateway's hot path.
 * Express's own work per request (its request and response objects, router and body parser) cost
 * ~0.15-0.3 ms of CPU per stream, as much as a bare proxy's whole relay (bench:messaging, "Express
 * proxy (floor)"). The lane runs the same steps as api/app.ts, in the same order, with the same
 * functions: the local block gate, the request's id and log line, its metrics, the quota gate, the
 * rate limit, the JSON body (JSON_BODY_MAX_BYTES) validated by the route's schema, the handler, and
 * errors in the interface's style. It takes only a plain request (a lean route's method and exact
 * path, an `application/json` body in UTF-8, uncompressed, within the limit when its length is
 * given); Express answers everything else as before, from the same route definitions.
 */
export interface LeanSteps {
  style: ErrorStyle;
  /** api/http/rate-limits.ts' localBlockGate. */
  blockGate: RequestHandler;
  /** api/http/request-context.ts' beginRequest. */
  begin(req: LaneRequest, res: LaneResponse): void;
  /** api/http/metrics.ts' requestMetrics. */
  metrics: RequestHandler;
  /** The quota gate for the route (api/messaging/quota-gate.ts' checkQuotaKey). */
  gate(req: LaneRequest, res: LaneResponse, route: RouteDefinition): Promise<void>;
  rateLimit: NonNullable<RouteEnvironment['rateLimit']>;
  /** Express's compiled TRUST_PROXY (`app.get('trust proxy fn')`), for the client's address. */
  trust: (address: string, hop: number) => boolean;
  jsonBodyMaxBytes: number;
}

/** A plain request with the few members of Express's that the steps read. */
export type LaneRequest = IncomingMessage & { originalUrl: string; path: string; ip: string | undefined; query: Record<string, string>; params: Record<string, string> };
export type LaneResponse = ServerResponse & { locals: Record<string, unknown> };

const noNext = () => undefined;

/** Whether the lane takes a request with this head as it is: a JSON body Express would parse the same way. */
function plainJson(req: IncomingMessage, maxBytes: number): boolean {
  const type = req.headers['content-type'];
  if (!type) return false;
  const [media, ...parameters] = type.split(';');
  if (media!.trim().toLowerCase() !== 'application/json') return false;
  for (const parameter of parameters) {
    const [name, value] = parameter.split('=');
    if (name!.trim().toLowerCase() === 'charset' && value?.trim().replace(/^"|"$/g, '').toLowerCase() !== 'utf-8') return false;
  }
  const encoding = req.headers['content-encoding'];
  if (encoding && encoding.toLowerCase() !== 'identity') return false;
  const length = req.headers['content-length'];
  return length === undefined || Number(length) <= maxBytes;
}

/** The body's text, up to `maxBytes` (beyond: the 413 Express's parser answers). */
function readBody(req: IncomingMessage, maxBytes: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    let refused = false;
    req.on('data', (chunk: Buffer) => {
      if (refused) return; // read to its end, so the connection can serve the next request
      size += chunk.length;
      if (size <= maxBytes) return void parts.push(chunk);
      refused = true;
      parts.length = 0;
      reject(new AppError('payload_too_large', 'request body too large'));
    });
    req.once('end', () => resolve(parts.length === 1 ? parts[0]!.toString('utf8') : Buffer.concat(parts).toString('utf8')));
    req.once('error', reject);
    req.once('close', () => {
      if (!req.complete) reject(new AppError('bad_request', 'the request body was cut short'));
    });
  });
}

const firstCharacter = /^[ \t\n\r]*(.)/s;

/** JSON as Express's parser takes it (strict: an object or an array; an empty body is `{}`; a BOM is dropped). */
function parseJson(text: string): unknown {
  if (text.length === 0) return {};
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  const first = firstCharacter.exec(body)?.[1];
  if (first !== '{' && first !== '[') throw badRequest('malformed JSON body');
  try {
    return JSON.parse(body);
  } catch {
    throw badRequest('malformed JSON body');
  }
}

/** A request listener for the lean routes: true when it took the request, false to leave it to Express. */
export function leanLane(routes: RouteDefinition[], steps: LeanSteps): (req: IncomingMessage, res: ServerResponse) => boolean {
  const byPath = new Map(routes.filter((r) => r.lean && r.method === 'post' && r.body?.type === 'json').map((r) => [r.path, { route: r, schema: (r.body as { schema: JsonSchema }).schema }]));

  async function serve({ route, schema }: { route: RouteDefinition; schema: JsonSchema }, req: LaneRequest, res: LaneResponse) {
    steps.begin(req, res);
    steps.metrics(req as unknown as Request, res as unknown as Response, noNext);
    try {
      await steps.gate(req, res, route);
      await steps.rateLimit({ req: req as unknown as Request, res: res as unknown as Response, principal: null, route });
      const body = validate('body', schema, parseJson(await readBody(req, steps.jsonBodyMaxBytes)), false);
      const reply = await route.handler({
        params: {},
        query: {},
        body,
        files: [],
        principal: null,
        requestId: res.locals.requestId as string,
        log: res.locals.log as Logger,
        req: req as unknown as Request,
        res: res as unknown as Response,
      });
      if (reply) {
        for (const [k, v] of Object.entries(reply.headers ?? {})) res.setHeader(k, v);
        sendJson(res, reply.status ?? 200, reply.body);
      }
    } catch (err) {
      answerError(steps.style, err, req, res);
    }
  }

  return (req, res) => {
    if (req.method !== 'POST') return false;
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const path = query < 0 ? url : url.slice(0, query);
    const lean = byPath.get(path);
    if (!lean || !plainJson(req, steps.jsonBodyMaxBytes)) return false;
    const laneReq = Object.assign(req, { originalUrl: url, path, ip: proxyaddr(req, steps.trust), query: {}, params: {} });
    const laneRes = Object.assign(res, { locals: {} });
    steps.blockGate(laneReq as unknown as Request, laneRes as unknown as Response, () => void serve(lean, laneReq, laneRes));
    return true;
  };
}
