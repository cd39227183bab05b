import http from 'node:http';
import https from 'node:https';
import { StringDecoder } from 'node:string_decoder';

/**
 * The OpenAI-compatible HTTP API, spoken directly for pass-through calls (the messaging gateway):
 * one POST per call on a keep-alive connection pool, the JSON body sent as given, a JSON answer or a
 * server-sent-event stream read as it arrives. The official SDK builds requests, retries and reads
 * streams generically, which cost several milliseconds before the first byte; a gateway that
 * forwards bodies untouched needs none of that. Failures keep the provider's own error object.
 */
export interface OpenAiHttpOptions {
  /** e.g. https://api.openai.com/v1 (no trailing slash). */
  baseUrl: string;
  apiKey: string | null;
  /** Time until the answer's headers arrive; a stream may then run as long as it needs. */
  timeoutMs: number;
  /** Connections kept open to the provider (per process). */
  maxSockets: number;
}

/** The provider answered with an error status; `error` is its OpenAI error object when it sent one. */
export class ProviderHttpError extends Error {
  override name = 'ProviderHttpError';
  constructor(
    readonly status: number,
    readonly error: { message?: string; type?: string; code?: string | null; param?: string | null } | null,
    message: string,
  ) {
    super(message);
  }
}

/** No answer in time (ambiguous: the provider may have worked). */
export class ProviderTimeoutError extends Error {
  override name = 'ProviderTimeoutError';
}

/** The connection failed or broke before a complete answer. */
export class ProviderConnectionError extends Error {
  override name = 'ProviderConnectionError';
}

/**
 * The provider answered, but not as the protocol says: a body that is not JSON, a stream that
 * ended before its answer did. It may have done the work.
 */
export class ProviderAnswerError extends Error {
  override name = 'ProviderAnswerError';
}

/** An event of a stream: its data as JSON, and its `event:` name when it had one. */
export interface StreamEvent {
  event: string | null;
  data: Record<string, unknown>;
}

/** A stream's events in batches; once they are read, `sawDone` says whether `[DONE]` ended them (a chat stream's end). */
export interface EventBatches extends AsyncIterable<RawStreamEvent[]> {
  readonly sawDone: boolean;
  /**
   * The batches pushed to `onBatch` (a relay's way: no promise per read); see `forEachBatch`.
   * With `passable`, a piece of whole events that it accepts arrives as its bytes, unparsed.
   */
  forEach(onBatch: (batch: RawStreamEvent[] | Buffer) => Promise<void> | void, stop: () => boolean, passable?: (piece: Buffer) => boolean): Promise<void>;
}

/** An event of a stream as it arrived: its `event:` name (or null) and its data's text, not parsed. */
export interface RawStreamEvent {
  event: string | null;
  data: string;
}

export class OpenAiHttp {
  private readonly agent: http.Agent;
  private readonly base: URL;

  constructor(private readonly options: OpenAiHttpOptions) {
    this.base = new URL(options.baseUrl.endsWith('/') ? options.baseUrl : `${options.baseUrl}/`);
    const agentOptions = { keepAlive: true, maxSockets: options.maxSockets, maxFreeSockets: options.maxSockets, scheduling: 'lifo' as const };
    this.agent = this.base.protocol === 'https:' ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
  }

  /** POST a JSON body, answer the JSON the provider returns. */
  async json<T>(path: string, body: unknown, signal: AbortSignal): Promise<T> {
    return jsonOf<T>(await this.send(path, body, signal, 'application/json'));
  }

  /** GET a resource (the model list), answer its JSON. */
  async get<T>(path: string, signal: AbortSignal): Promise<T> {
    return jsonOf<T>(await this.send(path, null, signal, 'application/json'));
  }

  /** POST a JSON body that asks for a stream; the events as they arrive, parsed, until `[DONE]` or the end. */
  async stream(path: string, body: unknown, signal: AbortSignal): Promise<AsyncIterable<StreamEvent>> {
    return parsedEvents(await this.streamRaw(path, body, signal));
  }

  /**
   * POST a JSON body that asks for a stream; its events unparsed, in batches: the events completed
   * by each piece the connection delivered, until `[DONE]` or the end. What a relay needs: one
   * step per network read rather than per event, and no JSON work for events it passes on as they
   * are.
   */
  async streamRaw(path: string, body: unknown, signal: AbortSignal): Promise<EventBatches> {
    const res = await this.send(path, body, signal, 'text/event-stream');
    const end = { done: false };
    return {
      [Symbol.asyncIterator]: () => readEventBatches(res, end),
      forEach: (onBatch, stop, passable) => forEachBatch(res, end, onBatch, stop, passable),
      get sawDone() {
        return end.done;
      },
    };
  }

  /** A POST of `body` as JSON, or a GET when `body` is null; resolves with a 2xx answer's head. */
  private send(path: string, body: unknown, signal: AbortSignal, accept: string): Promise<http.IncomingMessage> {
    const url = new URL(path.replace(/^\//, ''), this.base);
    const payload = body === null ? null : Buffer.from(JSON.stringify(body));
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(abortError());
      const req = (url.protocol === 'https:' ? https : http).request(url, {
        method: payload ? 'POST' : 'GET',
        agent: this.agent,
        headers: {
          ...(payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {}),
          accept,
          ...(this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {}),
        },
      });
      const timer = setTimeout(() => req.destroy(new ProviderTimeoutError(`no answer within ${Math.round(this.options.timeoutMs / 1000)} s`)), this.options.timeoutMs);
      const onAbort = () => req.destroy(abortError());
      signal.addEventListener('abort', onAbort, { once: true });
      req.on('error', (err) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        reject(err instanceof ProviderTimeoutError || err.name === 'AbortError' ? err : new ProviderConnectionError(err.message));
      });
      req.on('response', (res) => {
        clearTimeout(timer);
        // The abort still ends a stream in progress (the client went away).
        res.once('close', () => signal.removeEventListener('abort', onAbort));
        const status = res.statusCode ?? 0;
        if (status >= 200 && status < 300) return resolve(res);
        readAll(res).then((text) => reject(httpError(status, text)), reject);
      });
      req.end(payload ?? undefined);
    });
  }
}

function abortError(): Error {
  const err = new Error('the request was aborted');
  err.name = 'AbortError';
  return err;
}

function httpError(status: number, text: string): ProviderHttpError {
  let error: ProviderHttpError['error'] = null;
  try {
    const parsed = JSON.parse(text) as { error?: ProviderHttpError['error'] };
    error = parsed.error && typeof parsed.error === 'object' ? parsed.error : null;
  } catch {
    // not JSON: the status says enough
  }
  return new ProviderHttpError(status, error, error?.message ?? `${status} ${text.slice(0, 200) || http.STATUS_CODES[status] || 'error'}`);
}

/** A whole answer as JSON; an answer that is not JSON is the provider's fault, said so. */
async function jsonOf<T>(res: http.IncomingMessage): Promise<T> {
  const text = await readAll(res);
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new ProviderAnswerError(`its answer is not JSON (${res.headers['content-type'] ?? 'no content type'}: ${JSON.stringify(text.slice(0, 80))})`);
  }
}

async function readAll(res: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of res) chunks.push(chunk as Buffer);
  } catch (err) {
    throw (err as Error).name === 'AbortError' ? err : new ProviderConnectionError((err as Error).message);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Server-sent events (text/event-stream): `event:` and `data:` lines, events separated by a blank
 * line. `push` answers the events each piece of text completed; `[DONE]` ends the events.
 */
class SseParser {
  private pending = '';
  private event: string | null = null;
  private data: string[] = [];
  done = false;

  push(chunk: string): RawStreamEvent[] {
    const batch: RawStreamEvent[] = [];
    if (this.done) return batch;
    const text = this.pending + chunk;
    let start = 0;
    for (let nl = text.indexOf('\n', start); nl >= 0; nl = text.indexOf('\n', start)) {
      const line = text.slice(start, nl > start && text.charCodeAt(nl - 1) === 13 ? nl - 1 : nl);
      start = nl + 1;
      if (line === '') {
        if (this.data.length) {
          const payload = this.data.length === 1 ? this.data[0]! : this.data.join('\n');
          if (payload === '[DONE]') {
            this.done = true;
            break;
          }
          batch.push({ event: this.event, data: payload });
        }
        this.event = null;
        this.data = [];
      } else if (line.startsWith('data:')) this.data.push(line.slice(line.charCodeAt(5) === 32 ? 6 : 5));
      else if (line.startsWith('event:')) this.event = line.slice(6).trim();
      // comments (`:`) and other fields are ignored
    }
    this.pending = this.done ? '' : text.slice(start);
    return batch;
  }
}

const connectionFailure = (err: unknown) => ((err as Error).name === 'AbortError' ? err : new ProviderConnectionError((err as Error).message));

/**
 * Yields, per piece read from the connection, the events it completed (never an empty batch);
 * after `[DONE]` the answer is still read to its end: a response left unread would close a
 * connection the pool keeps for the next call.
 */
async function* readEventBatches(res: http.IncomingMessage, end: { done: boolean }): AsyncGenerator<RawStreamEvent[]> {
  res.setEncoding('utf8');
  const parser = new SseParser();
  try {
    for await (const chunk of res) {
      const batch = parser.push(chunk as string);
      end.done = parser.done;
      if (batch.length) yield batch;
    }
  } catch (err) {
    throw connectionFailure(err);
  }
}

const DONE = Buffer.from('[DONE]');

/** Whether a piece read from the connection ends at an event's end (a blank line). */
const endsAtEvent = (piece: Buffer) => piece.length > 1 && piece[piece.length - 1] === 10 && piece[piece.length - 2] === 10;

/**
 * Whether a piece that ends at an event's end, after one that did too (so no text or half
 * character is pending), may pass as its bytes: no `[DONE]` (the stream's end, which the reader
 * must see), no carriage return (lines are then split differently), and nothing in it `passable`
 * says must be read.
 */
const passesWhole = (piece: Buffer, passable: (piece: Buffer) => boolean) => !piece.includes(13) && !piece.includes(DONE) && passable(piece);

/**
 * The same batches pushed to `onBatch` as the connection delivers them, with no promise per read:
 * the connection pauses while a promise `onBatch` answers is pending (the client reads slower than
 * the provider writes). A piece `passable` accepts is pushed as its bytes (no decoding, no parsing,
 * nothing new to write). Stops, closing the answer, once `stop()` says so after a batch; an error
 * `onBatch` throws ends the stream and is thrown as it is.
 */
function forEachBatch(
  res: http.IncomingMessage,
  end: { done: boolean },
  onBatch: (batch: RawStreamEvent[] | Buffer) => Promise<void> | void,
  stop: () => boolean,
  passable?: (piece: Buffer) => boolean,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const decoder = new StringDecoder('utf8');
    const parser = new SseParser();
    let afterBoundary = true;
    let settled = false;
    const finish = (err?: unknown) => {
      if (settled) return;
      settled = true;
      if (err === undefined) resolve();
      else reject(err);
    };
    const halt = (err?: unknown) => {
      finish(err);
      res.destroy();
    };
    const afterBatch = () => {
      if (stop()) halt();
      else if (res.isPaused()) res.resume();
    };
    res.on('data', (piece: Buffer) => {
      if (settled) return;
      const whole = endsAtEvent(piece);
      let batch: RawStreamEvent[] | Buffer;
      if (afterBoundary && whole && !parser.done && passable && passesWhole(piece, passable)) batch = piece;
      else {
        batch = parser.push(decoder.write(piece));
        end.done = parser.done;
      }
      afterBoundary = whole;
      if (batch.length === 0) return;
      let pending: Promise<void> | void;
      try {
        pending = onBatch(batch);
      } catch (err) {
        return halt(err);
      }
      if (!pending) return afterBatch();
      res.pause();
      pending.then(afterBatch, halt);
    });
    res.once('end', () => finish());
    res.once('error', (err) => finish(connectionFailure(err)));
    res.once('close', () => finish(res.complete ? undefined : new ProviderConnectionError('the connection closed before the stream ended')));
  });
}

async function* parsedEvents(batches: AsyncIterable<RawStreamEvent[]>): AsyncGenerator<StreamEvent> {
  for await (const batch of batches) for (const { event, data } of batch) yield { event, data: JSON.parse(data) as Record<string, unknown> };
}
