import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import { AppError } from '../lib/platform/errors.js';
import { adminPrincipal, secretsEqual, type Principal } from '../lib/platform/api-keys.js';
import { authenticatePartnerKey } from '../lib/partners/partners.js';
import { buildRouter, type RouteEnvironment } from './http/route.js';
import { errorHandler, type ErrorStyle } from './http/errors.js';
import { beginRequest } from './http/request-context.js';
import { uploadFolder } from './http/upload-folder.js';
import { buildOpenApi, type ApiInterface } from './http/openapi.js';
import { apiMetrics, metricsEndpoint, requestMetrics } from './http/metrics.js';
import { interfaceRateLimit, KeyPacer, KeySlots, localBlockGate, type PathLimit } from './http/rate-limits.js';
import { RequestRateLimiter } from '../lib/platform/rate-limit.js';
import { knowledgeBaseRoutes } from './knowledge-base/routes.js';
import { messagingRoutes } from './messaging/routes.js';
import { quotaKeyRoutes } from './messaging/quota-key-routes.js';
import { checkQuotaKey, quotaEndpointOf, quotaKeyGate } from './messaging/quota-gate.js';
import { leanLane } from './http/lean-lane.js';
import { dialogAnalysisRoutes } from './dialog-analysis/routes.js';
import { transcriptionRoutes } from './transcription/routes.js';
import { speechRequestIds, speechRoutes } from './speech/routes.js';
import { voiceRoutes } from './voices/routes.js';
import { partnerVoiceSource } from '../lib/voices/speech-voices.js';
import type { ApiDeps } from './deps.js';
import { serviceVersion } from '../lib/platform/version.js';

/** The interfaces this process serves; each has its own routes and error style. */
function apiInterfaces(deps: ApiDeps): Array<ApiInterface & { errorStyle: ErrorStyle }> {
  return [
    { name: 'knowledge-base', description: 'Partners, knowledge bases, folders, documents, retrieval diagnostics', routes: knowledgeBaseRoutes(deps), errorStyle: 'detail' },
    { name: 'messaging', description: 'Health checks; OpenAI-compatible v3 and legacy v2 completions', routes: messagingRoutes(deps), errorStyle: 'messaging' },
    { name: 'messaging-admin', description: 'Quota keys of the messaging interface (administrator key)', routes: quotaKeyRoutes(deps), errorStyle: 'detail' },
    { name: 'dialog-analysis', description: 'Dialog analysis: a profile and feedback from a dialog, conforming to the caller\'s JSON Schemas (v2)', routes: dialogAnalysisRoutes(deps), errorStyle: 'dialog' },
    { name: 'transcription', description: 'Asynchronous transcription: /v2/transcript, and /v2/upload for a local file (partner or administrator key in X-Api-Key)', routes: transcriptionRoutes(deps), errorStyle: 'transcription' },
    { name: 'voices', description: 'Voices: recordings split into samples, embeddings, test samples (partner or administrator key in X-Api-Key or the api_key query parameter)', routes: voiceRoutes(deps), errorStyle: 'detail' },
    // A partner's voices can be spoken too: the voice interface's lookup of them (lib/voices).
    { name: 'speech', description: 'Text to speech for the official openai client: /v2/audio/speech (quota key)', routes: speechRoutes(deps, partnerVoiceSource(deps.db)), errorStyle: 'speech' },
  ];
}

function authenticator(deps: ApiDeps) {
  return async (key: string): Promise<Principal | null> => {
    if (secretsEqual(key, deps.config.adminApiKey)) return adminPrincipal;
    // By hash of a 256-bit random key (timing reveals nothing about the key), reused for up to
    // PARTNER_KEY_CACHE_SECONDS; a partner being deleted has no key any more.
    return authenticatePartnerKey(deps.db, key, deps.config.partnerKeyCacheSeconds);
  };
}

/** The error style of a path that no route answered: the style of the interface that owns its prefix. */
const pathStyles: Array<[RegExp, ErrorStyle]> = [
  [/^\/v3\//, 'messaging'],
  [/^\/v2\/completions(?:\/|$)/, 'messaging'],
  [/^\/v2\/(?:transcript|upload)(?:\/|$)/, 'transcription'],
  [/^\/v2\/audio\//, 'speech'],
  [/^\/v2\/dialog_analyses(?:\/|$)/, 'dialog'],
];
const errorStyleOfPath = (path: string): ErrorStyle => pathStyles.find(([prefix]) => prefix.test(path))?.[1] ?? 'detail';

/** Which interface's rate limit a path counts against, by prefix (the gate that refuses blocked keys first of all). */
const pathLimits: PathLimit[] = [
  { prefix: /^\/v3\//, apiName: 'messaging', style: 'messaging' },
  { prefix: /^\/v2\/completions(?:\/|$)/, apiName: 'messaging', style: 'messaging' },
  { prefix: /^\/v2\/(?:transcript|upload)(?:\/|$)/, apiName: 'transcription', style: 'transcription' },
  { prefix: /^\/v2\/dialog_analyses(?:\/|$)/, apiName: 'dialog-analysis', style: 'dialog' },
  { prefix: /^\/api\/voices(?:\/|$)/, apiName: 'voices', style: 'detail', queryKey: 'api_key' },
  { prefix: /^\/api\//, apiName: 'knowledge-base', style: 'detail' },
];

/** The entry Express gives every request (untyped in @types/express). */
interface ExpressEntry {
  handle(req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void): void;
}

export function createApp(deps: ApiDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // No ETag: Express would hash every JSON answer (a 10,000-document listing is 12 MB) for a
  // conditional GET no client of these interfaces makes.
  app.disable('etag');
  app.set('query parser', 'simple');
  // req.ip, req.protocol and req.host then tell the client's side of the proxies named by TRUST_PROXY.
  app.set('trust proxy', deps.config.trustProxy);
  // Requests per key per minute on every interface, shared by all replicas (api/http/rate-limits.ts);
  // a key already over its limit is refused here, first of all, before its key is even looked up.
  const limiter = new RequestRateLimiter(deps.db, { onError: (err) => deps.log.warn('rate limit not checked', { error: (err as Error).message }) });
  const blockGate = localBlockGate(limiter, deps.config.limits, pathLimits);
  app.use(blockGate);

  app.use((req: Request, res: Response, next: NextFunction) => {
    beginRequest(deps.log, req, res);
    next();
  });

  const env: RouteEnvironment = {
    authenticate: authenticator(deps),
    uploadDir: uploadFolder(deps.config.storageDir),
    maxUploadBytes: deps.config.maxUploadBytes,
    jsonBodyMaxBytes: deps.config.limits.jsonBodyMaxBytes,
    formTextFieldMaxBytes: deps.config.limits.formTextFieldMaxBytes,
  };
  const interfaces = apiInterfaces(deps);
  // Requests of one key handled at once by this process (REQUESTS_IN_FLIGHT_PER_KEY); more wait their turn.
  const keySlots = deps.config.limits.inFlightPerKey > 0 ? new KeySlots(deps.config.limits.inFlightPerKey) : null;
  // A key's requests beyond its burst start at its rate (REQUESTS_BURST_PER_KEY).
  const keyPacer = deps.config.limits.burstPerKey > 0 ? new KeyPacer(deps.config.limits.burstPerKey) : null;
  // Prometheus metrics: every request counted under its route template; GET /metrics (admin key or METRICS_API_KEY).
  const metrics = apiMetrics(deps);
  const operational = ['/openapi.json', '/api/openapi.json', '/metrics'].map((path) => ({ method: 'get', path }));
  const countRequest = requestMetrics(metrics, [...operational, ...interfaces.flatMap((api) => api.routes)]);
  app.use(countRequest);
  app.get('/metrics', metricsEndpoint(deps, metrics));
  const openapi = buildOpenApi(interfaces, serviceVersion, { anonymousLimited: deps.config.limits.anonymousRequestsPerMinute > 0 });
  app.get(['/openapi.json', '/api/openapi.json'], (_req, res) => void res.json(openapi));
  // The served document, for the test suite's check of every answer against it (test/support/answer-check.ts).
  app.locals.openapi = openapi;

  // Every /v2/audio answer carries its speech request id, refusals of the quota gate included.
  app.use('/v2/audio', speechRequestIds(deps));
  // Speech refuses blocked keys after its request id is taken: every speech answer carries one.
  app.use('/v2/audio', localBlockGate(limiter, deps.config.limits, [{ prefix: /^\/v2\/audio\//, apiName: 'speech', style: 'speech' }]));
  // Quota keys of the generation and speech endpoints are checked before any body is read.
  app.use(quotaKeyGate(deps));
  // The messaging routes are matched first: no other interface shares their paths, and the /v3
  // hot path then skips the knowledge-base interface's hundred-odd route patterns.
  const mountOrder = [...interfaces.filter((api) => api.name === 'messaging'), ...interfaces.filter((api) => api.name !== 'messaging')];
  for (const api of mountOrder) {
    const router = buildRouter(api.routes, { ...env, rateLimit: interfaceRateLimit(limiter, deps.config.limits, api.name, { slots: keySlots, pacer: keyPacer }) });
    router.use(errorHandler(api.errorStyle));
    app.use(router);
  }

  // The /v3 generation routes skip Express when the request is plain (api/http/lean-lane.ts): the
  // same steps, with the same functions, as the middleware above.
  const messaging = interfaces.find((api) => api.name === 'messaging')!;
  const lane = leanLane(messaging.routes, {
    style: messaging.errorStyle,
    blockGate,
    begin: (req, res) => beginRequest(deps.log, req, res),
    metrics: countRequest,
    gate: (req, res, route) => checkQuotaKey(deps, req, res, quotaEndpointOf(route.method, route.path)!),
    rateLimit: interfaceRateLimit(limiter, deps.config.limits, messaging.name, { slots: keySlots, pacer: keyPacer }),
    trust: app.get('trust proxy fn') as (address: string, hop: number) => boolean,
    jsonBodyMaxBytes: deps.config.limits.jsonBodyMaxBytes,
  });
  // Express's app function calls app.handle for every request (and app.listen serves the app function).
  const viaExpress = (app as unknown as ExpressEntry).handle.bind(app);
  (app as unknown as ExpressEntry).handle = (req, res, next) => {
    if (!lane(req, res)) viaExpress(req, res, next);
  };

  // Anything no interface answered: a JSON 404 in the style of the path's interface.
  app.use((req: Request, _res: Response, next: NextFunction) => next(new AppError('not_found', `no route for ${req.method} ${req.path}`)));
  app.use((err: unknown, req: Request, res: Response, next: NextFunction) => errorHandler(errorStyleOfPath(req.path))(err, req, res, next));
  return app;
}
