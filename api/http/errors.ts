import type { IncomingMessage, ServerResponse } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '../../lib/platform/logger.js';
import { MulterError } from 'multer';
import { AppError } from '../../lib/platform/errors.js';
import { ServiceUnavailable } from '../../lib/providers/service-unavailable.js';
import { closeAfterAnswer } from './request-limits.js';

/**
 * Each interface has its own error body; all of them are produced here from one AppError.
 * - `detail`: knowledge-base and voice APIs, `{detail: "<message>"}`, plus the fields of
 *   `details.responseFields` when the error carries some (a 409 naming what already exists).
 * - `messaging`: v3 and legacy v2 completions, `{detail: {code, message, context: {request_id, endpoint}}}`,
 *   plus the same as OpenAI's `error` object (`{message, type, code, param}`) for the OpenAI clients.
 * - `transcription`, `speech`, `dialog`: the /v2 job and speech interfaces. An invalid request is
 *   422 `{message, errors: {<field>: [<message>]}}` in all three (transcription adds the message as
 *   `error`, which AssemblyAI's clients read); other errors are `{error}`
 *   (transcription), `{error, code?}` (speech: `code` when the error names one, e.g.
 *   QUOTA_EXHAUSTED) or `{message}` (dialog analysis).
 * A 429 or 503 carries `Retry-After` (seconds) in every style when the error knows when to come
 * back; an error with `details.retry === false` carries `x-should-retry: false` (OpenAI clients).
 */
export type ErrorStyle = 'detail' | 'messaging' | 'transcription' | 'speech' | 'dialog';

export const answersInvalidWith422: ReadonlySet<ErrorStyle> = new Set(['transcription', 'speech', 'dialog']);

/** Invalid input: a 400 `bad_request` (validation), or an upload over its size limit (named by field). */
const isInvalidInput = (err: AppError) => (err.status === 400 && err.code === 'bad_request') || (err.code === 'payload_too_large' && !!err.details?.fieldErrors);

/** The status an error answers with in an interface: the /v2 job interfaces say 422 for invalid input. */
export function statusIn(style: ErrorStyle, err: AppError): number {
  return answersInvalidWith422.has(style) && isInvalidInput(err) ? 422 : err.status;
}

/** `{field: [messages]}` of a validation error; other invalid requests name the part of the request. */
function fieldErrors(err: AppError): Record<string, string[]> {
  const fields = err.details?.fieldErrors as Record<string, string[]> | undefined;
  return fields && Object.keys(fields).length ? fields : { request: [err.message] };
}

function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof MulterError) {
    if (err.code === 'LIMIT_FILE_SIZE') {
      const message = `file ${err.field ?? ''} is larger than the upload limit`.replace('  ', ' ');
      return new AppError('payload_too_large', message, err.field ? { fieldErrors: { [err.field]: ['is larger than the upload limit of this endpoint'] } } : undefined);
    }
    // Multer reports both an unknown file field and too many files in a known one with this code.
    if (err.code === 'LIMIT_UNEXPECTED_FILE') {
      return new AppError('bad_request', `unexpected file in field ${JSON.stringify(err.field)}: not a file field of this endpoint, or more files than it accepts`);
    }
    return new AppError('bad_request', `malformed multipart body: ${err.message}`);
  }
  if (err instanceof URIError) return new AppError('bad_request', `malformed URL: ${err.message}`);
  // A service the request needs (the vector index, an embeddings API) is down: worth trying again shortly.
  if (err instanceof ServiceUnavailable) return new AppError('unavailable', `${err.message}; try again shortly`, { retryAfterSeconds: 5 });
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

/**
 * The same error as OpenAI's error object, next to the messaging interface's `detail`: the official
 * OpenAI clients read only `error` and would otherwise report "400 status code (no body)".
 */
function openAiError(err: AppError) {
  const param = Object.keys((err.details?.fieldErrors as Record<string, string[]> | undefined) ?? {})[0] ?? null;
  return { message: err.message, type: err.status >= 500 ? 'server_error' : 'invalid_request_error', code: err.code, param };
}

/** The error body of an interface's style (also the rate limiter's, which answers before any route). */
export function errorBody(style: ErrorStyle, err: AppError, requestId: string, endpoint: string): unknown {
  if (answersInvalidWith422.has(style) && statusIn(style, err) === 422) {
    const invalid = { message: err.message, errors: fieldErrors(err) };
    // AssemblyAI's clients show a failed request's `error`: the transcription interface repeats the message there.
    return style === 'transcription' ? { ...invalid, error: err.message } : invalid;
  }
  switch (style) {
    case 'messaging':
      return { error: openAiError(err), detail: { code: err.code, message: err.message, context: { request_id: requestId, endpoint } } };
    case 'transcription':
      return { error: err.message };
    case 'speech':
      return typeof err.details?.code === 'string' ? { error: err.message, code: err.details.code } : { error: err.message };
    case 'dialog':
      return { message: err.message };
    case 'detail': {
      const extra = err.details?.responseFields;
      return extra && typeof extra === 'object' ? { ...(extra as Record<string, unknown>), detail: err.message } : { detail: err.message };
    }
  }
}

/** A request as the error answer needs it: Express's, or the /v3 lane's plain one (api/http/lean-lane.ts). */
export type AnsweredRequest = IncomingMessage & { originalUrl: string };
/** A response with the request's `locals` (its `requestId` and `log`). */
export type AnsweringResponse = ServerResponse & { locals: Record<string, unknown> };

/** Answers `err` in an interface's style, with Node's own response methods. */
export function answerError(style: ErrorStyle, err: unknown, req: AnsweredRequest, res: AnsweringResponse): void {
  const appError = toAppError(err);
  const log = res.locals.log as Logger | undefined;
  // 501 is a deliberate answer (a feature this build does not have), not a server fault.
  if (appError.status >= 500 && appError.status !== 501) log?.error('request failed', { err });
  else log?.info('request rejected', { status: appError.status, detail: appError.message });
  if (res.headersSent) {
    res.destroy();
    return;
  }
  // A body refused for its size is not drained: the connection closes after the answer.
  if (appError.details?.closeConnection === true && !req.complete) closeAfterAnswer(req, res);
  const retryAfter = appError.details?.retryAfterSeconds;
  if ((appError.status === 429 || appError.status === 503) && typeof retryAfter === 'number') res.setHeader('Retry-After', String(Math.max(1, Math.ceil(retryAfter))));
  // The official OpenAI clients retry 429s unless told not to: a lifetime quota never refills.
  if (appError.details?.retry === false) res.setHeader('x-should-retry', 'false');
  sendJson(res, statusIn(style, appError), errorBody(style, appError, res.locals.requestId as string, req.originalUrl.split('?')[0]!));
}

/** A JSON answer as Express's res.json writes it (no ETag: api/app.ts turns them off). */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}

export function errorHandler(style: ErrorStyle) {
  return (err: unknown, req: Request, res: Response, _next: NextFunction) => answerError(style, err, req, res);
}
