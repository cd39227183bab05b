import crypto from 'node:crypto';
import type { Logger } from '../../lib/platform/logger.js';
import type { AnsweredRequest, AnsweringResponse } from './errors.js';

const requestIdPattern = /^[\w.-]{8,128}$/;

/**
 * What every request gets first: its id (the client's X-Request-Id when it is a sensible one,
 * else a new one; answered in X-Request-Id), a logger that names it, where its time starts (the
 * /v3 Server-Timing header), and its log line once it is answered.
 */
export function beginRequest(log: Logger, req: AnsweredRequest, res: AnsweringResponse): void {
  const incoming = req.headers['x-request-id'];
  const requestId = typeof incoming === 'string' && requestIdPattern.test(incoming) ? incoming : crypto.randomUUID();
  const started = performance.now();
  res.locals.requestId = requestId;
  res.locals.log = log.child({ request_id: requestId });
  res.locals.receivedAt = started;
  res.setHeader('X-Request-Id', requestId);
  res.on('finish', () =>
    (res.locals.log as Logger).info('request', { method: req.method, path: req.originalUrl.split('?', 1)[0], status: res.statusCode, duration_ms: Math.round(performance.now() - started) }),
  );
}
