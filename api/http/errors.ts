import type { NextFunction, Request, Response } from 'express';
import { MulterError } from 'multer';
import { AppError } from '../../lib/errors.js';

/**
 * Each interface has its own error body; all of them are produced here from one AppError.
 * - `detail`: knowledge-base and voice APIs, `{detail: "<message>"}`.
 * - `messaging`: v3, `{detail: {code, message, context: {request_id, endpoint}}}`.
 */
export type ErrorStyle = 'detail' | 'messaging';

export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof MulterError) {
    if (err.code === 'LIMIT_FILE_SIZE') return new AppError('payload_too_large', `file ${err.field ?? ''} is larger than the upload limit`.replace('  ', ' '));
    // Multer reports both an unknown file field and too many files in a known one with this code.
    if (err.code === 'LIMIT_UNEXPECTED_FILE') {
      return new AppError('bad_request', `unexpected file in field ${JSON.stringify(err.field)}: not a file field of this endpoint, or more files than it accepts`);
    }
    return new AppError('bad_request', `malformed multipart body: ${err.message}`);
  }
  if (err instanceof URIError) return new AppError('bad_request', `malformed URL: ${err.message}`);
  const e = err as { type?: string; status?: number; message?: string };
  if (e && e.type === 'entity.parse.failed') return new AppError('bad_request', 'malformed JSON body');
  if (e && e.type === 'entity.too.large') return new AppError('payload_too_large', 'request body too large');
  if (e && typeof e.status === 'number' && e.status >= 400 && e.status < 500) {
    // busboy and body-parser report malformed input with a 4xx status of their own.
    return new AppError('bad_request', `malformed request body: ${e.message ?? 'unreadable'}`, undefined, e.status === 413 ? 413 : 400);
  }
  if (e && typeof e.message === 'string' && /Multipart|Unexpected end of form|Malformed part header|boundary/i.test(e.message)) {
    return new AppError('bad_request', `malformed multipart body: ${e.message}`);
  }
  return new AppError('internal_error', 'internal error');
}

export function errorBody(style: ErrorStyle, err: AppError, requestId: string, endpoint: string): unknown {
  if (style === 'messaging') {
    return { detail: { code: err.code, message: err.message, context: { request_id: requestId, endpoint } } };
  }
  return { detail: err.message };
}

export function errorHandler(style: ErrorStyle) {
  return (err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const appError = toAppError(err);
    const log = res.locals.log;
    // 501 is a deliberate answer (a feature this build does not have), not a server fault.
    if (appError.status >= 500 && appError.status !== 501) log?.error('request failed', { err });
    else log?.info('request rejected', { status: appError.status, detail: appError.message });
    if (res.headersSent) {
      res.destroy();
      return;
    }
    res.status(appError.status).json(errorBody(style, appError, res.locals.requestId, req.originalUrl.split('?')[0] ?? req.path));
  };
}
