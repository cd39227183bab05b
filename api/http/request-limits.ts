import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pipeline, Transform } from 'node:stream';
import type { Socket } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, RequestHandler } from 'express';
import express from 'express';
import multer, { MulterError } from 'multer';
import { AppError } from '../../lib/platform/errors.js';
import type { JsonSchema } from './validation.js';

/**
 * Limits of a request body, enforced while it streams (docs/abuse-resistance.md,
 * "Request bodies are limited while they stream"): nothing is read into memory or written to disk
 * beyond what the route can use.
 *
 * - A form's limits come from its JSON Schema: as many fields as it has properties (arrays count
 *   their `maxItems`) plus a few, so that an unknown field still meets the validation error that
 *   names it; fields at most 4 bytes per character of the longest `maxLength` (4 KiB for a string
 *   held to a pattern or format, 1 KiB for numbers and booleans, FORM_TEXT_FIELD_MAX_BYTES when a
 *   string field has no bound at all: a content version sent as text); as many files as its file fields
 *   take, each at most the route's file size; and a total: the files, or the route's own total
 *   (a batch upload's 1 GiB), plus the fields.
 * - A declared Content-Length over the total is refused before one byte is read; a body sent
 *   without one (chunked) is counted as it arrives and cut off at the total: the parts already
 *   written are closed and deleted before the 413 is answered, and the connection is closed rather
 *   than drained (after a short lingering close, so that a client still sending reads the 413).
 *   multer refuses the other limits (fields, field size, files, file size) as they are crossed; its
 *   error names the limit.
 * - Every file written for a request is tracked, and removed when the request ends unless its
 *   handler moved it into storage: a refused or aborted upload leaves nothing in the upload
 *   directory.
 */
export interface FormBody {
  schema: JsonSchema;
  files?: { name: string; maxCount: number }[];
  maxFileBytes?: number;
  maxTotalBytes?: number;
}

export interface FormLimits {
  fields: number;
  fieldSize: number;
  files: number;
  fileSize: number;
  parts: number;
  /** The whole body, multipart framing included. */
  totalBytes: number;
  /** An urlencoded body (fields only). */
  urlencodedBytes: number;
  /** The endpoint's only file field, if it has exactly one: a body over the total is that file's fault. */
  onlyFileField: string | null;
}

const KIB = 1024;
/** Fields beyond the schema's, so that an unknown field meets its validation error (additionalProperties). */
const EXTRA_FIELDS = 16;
/** Multipart framing (boundary, headers) allowed per part. */
const PART_OVERHEAD = 2 * KIB;

type Bound = { count: number; bytes: number };

/** How many values and how many bytes (the largest) one property may take. */
function bound(schema: JsonSchema | undefined, textFieldBytes: number): Bound {
  if (!schema) return { count: 1, bytes: textFieldBytes };
  const alternatives = (schema.anyOf ?? schema.oneOf) as JsonSchema[] | undefined;
  if (alternatives?.length) {
    const each = alternatives.map((a) => bound(a, textFieldBytes));
    return { count: Math.max(...each.map((b) => b.count)), bytes: Math.max(...each.map((b) => b.bytes)) };
  }
  const types = [schema.type].flat();
  if (types.includes('array')) {
    const item = bound(schema.items as JsonSchema | undefined, textFieldBytes);
    return { count: Math.max(1, Number(schema.maxItems ?? 100)), bytes: item.bytes };
  }
  if (Array.isArray(schema.enum)) return { count: 1, bytes: Math.max(KIB, ...(schema.enum as unknown[]).map((v) => String(v).length * 4 + 16)) };
  if (types.includes('string') || schema.type === undefined) {
    const max = schema.maxLength as number | undefined;
    if (max !== undefined) return { count: 1, bytes: Math.max(KIB, max * 4 + 16) };
    // A string held to a pattern or a format (an amount, a code list, a URI) is short.
    if (schema.pattern !== undefined || schema.format !== undefined) return { count: 1, bytes: 4 * KIB };
    return { count: 1, bytes: textFieldBytes };
  }
  return { count: 1, bytes: KIB };
}

export function formLimits(body: FormBody, defaults: { maxUploadBytes: number; formTextFieldMaxBytes: number }): FormLimits {
  const properties = (body.schema.properties ?? {}) as Record<string, JsonSchema>;
  const fileFields = new Set((body.files ?? []).map((f) => f.name));
  const bounds = Object.entries(properties)
    .filter(([name]) => !fileFields.has(name))
    .map(([, s]) => bound(s, defaults.formTextFieldMaxBytes));
  const fields = bounds.reduce((n, b) => n + b.count, 0) + EXTRA_FIELDS;
  const fieldSize = Math.max(KIB, ...bounds.map((b) => b.bytes));
  const files = (body.files ?? []).reduce((n, f) => n + f.maxCount, 0);
  const fileSize = body.maxFileBytes ?? defaults.maxUploadBytes;
  const fieldBytes = bounds.reduce((n, b) => n + b.count * b.bytes, 0) + EXTRA_FIELDS * KIB;
  const fileBytes = Math.min(body.maxTotalBytes ?? Infinity, files * fileSize);
  const parts = fields + files;
  const onlyFileField = body.files?.length === 1 ? body.files[0]!.name : null;
  return { fields, fieldSize, files, fileSize, parts, totalBytes: fileBytes + fieldBytes + parts * PART_OVERHEAD, urlencodedBytes: fieldBytes, onlyFileField };
}

const mib = (bytes: number) => (bytes >= 1024 * 1024 ? `${+(bytes / 1024 / 1024).toFixed(1)} MiB` : `${Math.ceil(bytes / 1024)} KiB`);
const overUploadLimit = (limits: Pick<FormLimits, 'fileSize'>) => `is larger than the upload limit of this endpoint (${mib(limits.fileSize)})`;

/**
 * The answer to a body over its total: 413, and the connection closed instead of drained. With a
 * single file field the file is named, as an upload over its own limit is (the /v2 interfaces
 * answer 422 on that field, however far past the limit the body is).
 */
export function bodyTooLarge(limits: Pick<FormLimits, 'totalBytes' | 'fileSize' | 'onlyFileField'>): AppError {
  const message = `the request body is larger than ${mib(limits.totalBytes)}, the most this endpoint accepts`;
  const fieldErrors = limits.onlyFileField ? { [limits.onlyFileField]: [overUploadLimit(limits)] } : undefined;
  return new AppError('payload_too_large', message, { closeConnection: true, ...(fieldErrors ? { fieldErrors } : {}) });
}

/** How long a connection refused for its body's size goes on reading, and discarding, after the answer. */
const LINGER_MS = 5_000;

/**
 * Answers with `Connection: close` without resetting the connection under a client still sending.
 * Closing a socket with unread body bytes makes the kernel send a reset, and a client that is
 * still writing then fails with EPIPE or ECONNRESET before it reads the 413 (most did, in a loop
 * on localhost). So, as nginx's lingering close does, the socket half-closes after the answer and
 * goes on discarding what arrives until the client closes its side or LINGER_MS passes.
 * Node's server ends a `Connection: close` answer with `socket.destroySoon()`; this socket's is
 * replaced (were that to change, the connection would simply close at once, as before).
 */
export function closeAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
  res.setHeader('Connection', 'close');
  const socket = req.socket as Socket & { destroySoon?: () => void };
  socket.destroySoon = function lingeringClose(this: Socket) {
    this.end();
    const timer = setTimeout(() => this.destroy(), LINGER_MS);
    timer.unref();
    this.once('end', () => this.destroy());
    this.once('close', () => clearTimeout(timer));
    req.resume();
    this.resume();
  };
}

/** multer's limit errors, in words that name the limit. */
export function limitError(err: MulterError, limits: FormLimits): AppError {
  switch (err.code) {
    case 'LIMIT_FILE_SIZE':
      return new AppError('payload_too_large', `file ${err.field ?? ''} ${overUploadLimit(limits)}`.replace('  ', ' '), {
        ...(err.field ? { fieldErrors: { [err.field]: [overUploadLimit(limits)] } } : {}),
      });
    case 'LIMIT_FIELD_VALUE':
      return new AppError('payload_too_large', `form field ${err.field ?? ''} is longer than ${mib(limits.fieldSize)}`.replace('  ', ' '), {
        ...(err.field ? { fieldErrors: { [err.field]: [`is longer than ${mib(limits.fieldSize)}`] } } : {}),
      });
    case 'LIMIT_FIELD_COUNT':
      return new AppError('bad_request', `the form has too many fields: this endpoint takes at most ${limits.fields}`);
    case 'LIMIT_FILE_COUNT':
      return new AppError('bad_request', `the form has too many files: this endpoint takes at most ${limits.files}`);
    case 'LIMIT_PART_COUNT':
      return new AppError('bad_request', `the form has too many parts: this endpoint takes at most ${limits.parts}`);
    case 'LIMIT_FIELD_KEY':
      return new AppError('bad_request', 'a form field name is too long');
    case 'LIMIT_UNEXPECTED_FILE':
      return new AppError('bad_request', `unexpected file in field ${JSON.stringify(err.field)}: not a file field of this endpoint, or more files than it accepts`);
    default:
      return new AppError('bad_request', `malformed multipart body: ${err.message}`);
  }
}

/** Files written for one request: their paths, the ones written at once (small), and open write streams. */
interface Written {
  paths: Set<string>;
  small: Set<string>;
  open: Set<fs.WriteStream>;
  /** Bytes of small files held in memory for the request's handler. */
  heldBytes: number;
  /** Set when removeWritten ran: a file whose last bytes arrive after that is not written. */
  removed: boolean;
}

const writtenFor = new WeakMap<Request, Written>();

function written(req: Request): Written {
  let w = writtenFor.get(req);
  if (!w) writtenFor.set(req, (w = { paths: new Set(), small: new Set(), open: new Set(), heldBytes: 0, removed: false }));
  return w;
}

/**
 * Closes every file still being written for the request and deletes every file written for it (moved ones are gone already).
 * Small files go synchronously: a missing one (moved into storage) costs one failed unlink instead
 * of a trip through libuv's thread pool.
 */
export async function removeWritten(req: Request): Promise<void> {
  const w = writtenFor.get(req);
  if (!w) return;
  w.removed = true;
  for (const p of w.small) {
    try {
      fs.unlinkSync(p);
    } catch {
      // moved into storage, or never written
    }
    w.paths.delete(p);
  }
  w.small.clear();
  await Promise.all(
    [...w.open].map(
      (stream) =>
        new Promise<void>((resolve) => {
          if (stream.closed) return resolve();
          stream.once('close', () => resolve());
          stream.destroy();
        }),
    ),
  );
  await Promise.all([...w.paths].map((p) => fs.promises.rm(p, { force: true })));
}

/**
 * Uploads up to this size are written to disk in one synchronous call when they have arrived whole:
 * each asynchronous file operation is a hand-off to libuv's thread pool and back, which on two busy
 * cores cost more of the event loop's time than the write itself (bench/RESULTS.md, creation).
 */
const SMALL_UPLOAD_BYTES = 64 * KIB;
/** Small uploads are also held in memory for the handler (signature check without reading the file back) up to this much per request. */
const HELD_BYTES_PER_REQUEST = 1024 * KIB;
/** A file whose bytes arrive after its request's files were removed is not written at all. */
const endedFirst = () => new Error('the request ended before the upload did');

/**
 * multer's storage engine: disk files in `dir`, each tracked from the moment it is created. A file
 * that stays within SMALL_UPLOAD_BYTES is gathered in memory and written at once; a larger one
 * streams to disk from its first byte past that.
 */
function trackedDiskStorage(dir: string): multer.StorageEngine {
  fs.mkdirSync(dir, { recursive: true });
  return {
    _handleFile(req, file, cb) {
      const filename = crypto.randomBytes(16).toString('hex');
      const target = path.join(dir, filename);
      const w = written(req);
      w.paths.add(target);
      const head: Buffer[] = [];
      let received = 0;
      const stream = file.stream;
      const onData = (chunk: Buffer) => {
        head.push(chunk);
        received += chunk.length;
        if (received > SMALL_UPLOAD_BYTES) toDisk();
      };
      const onError = (err: Error) => {
        stop();
        cb(err);
      };
      const onEnd = () => {
        stop();
        if (w.removed) return cb(endedFirst());
        const bytes = Buffer.concat(head, received);
        try {
          w.small.add(target);
          fs.writeFileSync(target, bytes);
        } catch (err) {
          return cb(err as Error);
        }
        const hold = w.heldBytes + received <= HELD_BYTES_PER_REQUEST;
        if (hold) w.heldBytes += received;
        cb(null, { destination: dir, filename, path: target, size: received, ...(hold ? { buffer: bytes } : {}) });
      };
      const stop = () => {
        stream.off('data', onData);
        stream.off('end', onEnd);
        stream.off('error', onError);
      };
      const toDisk = () => {
        stop();
        if (w.removed) return void cb(endedFirst());
        stream.pause();
        const out = fs.createWriteStream(target);
        w.open.add(out);
        out.once('close', () => w.open.delete(out));
        out.write(Buffer.concat(head, received));
        head.length = 0;
        pipeline(stream, out, (err) => {
          if (err) return cb(err);
          cb(null, { destination: dir, filename, path: target, size: out.bytesWritten });
        });
      };
      stream.on('data', onData);
      stream.once('end', onEnd);
      stream.once('error', onError);
    },
    _removeFile(_req, file, cb) {
      fs.rm(file.path, { force: true }, (err) => cb(err));
    },
  };
}

/**
 * The body parsers of a form route: the Content-Length check, multer (multipart) with the limits
 * and the counting stream, and the urlencoded parser with its own.
 */
export function formBodyParsers(body: FormBody, limits: FormLimits, uploadDir: string): RequestHandler[] {
  /** The callback that answers a request whose body went past the total (set per request below). */
  const onOverflow = new WeakMap<object, (err: AppError) => void>();
  const upload = multer({
    storage: trackedDiskStorage(uploadDir),
    // One file more than the fields take: a second file in a single-file field meets the error that names the field.
    limits: { fields: limits.fields, fieldSize: limits.fieldSize, files: limits.files + 1, fileSize: limits.fileSize, parts: limits.parts + 1, fieldNameSize: 200 },
    // Count the body between the request and busboy: past the total, stop reading, close and
    // delete what was written, and answer at once (multer would drain the rest of the body first).
    streamHandler: (req: NodeJS.ReadableStream, busboy: NodeJS.WritableStream & { destroy(err?: Error): void }) => {
      let seen = 0;
      const counter = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          seen += chunk.length;
          if (seen > limits.totalBytes) return done(bodyTooLarge(limits));
          done(null, chunk);
        },
      });
      counter.once('error', (err: AppError) => {
        req.unpipe(counter);
        busboy.destroy(err);
        onOverflow.get(req)?.(err);
      });
      req.pipe(counter).pipe(busboy);
    },
  } as multer.Options);
  const parse = body.files?.length ? upload.fields(body.files.map((f) => ({ name: f.name, maxCount: f.maxCount }))) : upload.none();
  const urlencoded = express.urlencoded({ extended: false, limit: limits.urlencodedBytes, parameterLimit: limits.fields });

  const declaredLength: RequestHandler = (req, _res, next) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limits.totalBytes) return next(bodyTooLarge(limits));
    next();
  };

  const multipart: RequestHandler = (req, res, next) => {
    if (!req.is('multipart/form-data')) return next();
    let finished = false;
    const finish = (err?: unknown) => {
      if (finished) return;
      finished = true;
      if (err) {
        const answer = err instanceof MulterError ? limitError(err, limits) : err;
        return void removeWritten(req).then(() => next(answer), () => next(answer));
      }
      next();
    };
    onOverflow.set(req, finish);
    parse(req, res, finish);
  };
  return [declaredLength, multipart, urlencoded];
}

/**
 * The parser of a route whose body is the file itself (POST /v2/upload: AssemblyAI's clients send
 * `application/octet-stream`, often chunked): streamed to a file in `uploadDir`, tracked like a
 * form's files (removed when the request ends unless the handler moved it), at most `maxBytes`.
 * The handler finds it as the one file of its request, in `field`, the name its errors give it (a
 * 413, or the 422 of the interfaces that answer invalid input so, names it as a form's file field).
 */
export function binaryBodyParser(maxBytes: number, uploadDir: string, field: string): RequestHandler {
  const limits = { totalBytes: maxBytes, fileSize: maxBytes, onlyFileField: field };
  fs.mkdirSync(uploadDir, { recursive: true });
  return (req, _res, next) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > maxBytes) return next(bodyTooLarge(limits));
    const target = path.join(uploadDir, crypto.randomBytes(16).toString('hex'));
    const w = written(req);
    w.paths.add(target);
    const out = fs.createWriteStream(target);
    w.open.add(out);
    out.once('close', () => w.open.delete(out));
    let size = 0;
    let finished = false;
    const finish = (err?: unknown) => {
      if (finished) return;
      finished = true;
      if (err) return void removeWritten(req).then(() => next(err), () => next(err));
      const file = { fieldname: field, originalname: '', path: target, size, mimetype: req.headers['content-type'] ?? 'application/octet-stream' };
      req.files = [file as Express.Multer.File];
      next();
    };
    const counter = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        size += chunk.length;
        if (size > maxBytes) return done(bodyTooLarge(limits));
        done(null, chunk);
      },
    });
    // Past the limit the request is not read further (unpiped, not destroyed): the refusal is answered and the connection closes after it.
    counter.once('error', (err) => {
      req.unpipe(counter);
      out.destroy();
      finish(err);
    });
    // Also a client gone mid-body (Node reports it as the request's error): the file is closed and removed at once.
    req.once('error', (err) => finish(err));
    out.once('error', (err) => finish(err));
    out.once('finish', () => finish());
    req.pipe(counter).pipe(out);
  };
}
