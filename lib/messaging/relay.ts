import type { Logger } from '../platform/logger.js';
import { AppError } from '../platform/errors.js';
import type { EventBatches, RawStreamEvent } from '../providers/openai-http.js';
import { ServiceUnavailable } from '../providers/service-unavailable.js';
import type { EventStream } from './answer.js';
import { mayBeFailure, streamFailure, toUpstreamError, type ChatCompletionResult, type ProviderUsage, type ResponseEvent, type UpstreamError } from './upstream.js';

/**
 * The provider's stream relayed to the client: events pass as the provider wrote them, parsed only
 * where the service must read them (an error, the usage it charges, the end of the answer).
 */

/** A provider failure inside a batch, with the text of the events before it (already relayable). */
class RelayFailure extends Error {
  constructor(
    override readonly cause: unknown,
    readonly relayed: string,
  ) {
    super('relay failed');
  }
}

/**
 * Writes each batch of provider events as `render` makes it, until the provider's stream or the
 * client's ends; a piece of whole events that `passable` accepts (nothing in it to read or change)
 * is written as the provider's bytes. A failure inside a batch relays the events before it, then
 * throws the failure.
 */
export async function relayBatches(out: EventStream, batches: EventBatches, render: (batch: RawStreamEvent[]) => string, passable?: (piece: Buffer) => boolean): Promise<void> {
  try {
    await batches.forEach((batch) => out.write(Buffer.isBuffer(batch) ? batch : render(batch)), () => out.closed, passable);
  } catch (caught) {
    if (!(caught instanceof RelayFailure)) throw caught;
    if (caught.relayed) await out.write(caught.relayed);
    throw caught.cause;
  }
}

const carriesUsage = /"usage"\s*:\s*\{/;
const namesFinishReason = /"finish_reason"\s*:\s*"/;

const ERROR_KEY = Buffer.from('"error"');
const EVENT_LINE = Buffer.from('event:');
const USAGE_KEY = Buffer.from('"usage"');
const FINISH_KEY = Buffer.from('"finish_reason"');
const isJsonSpace = (byte: number | undefined) => byte === 32 || byte === 10 || byte === 13 || byte === 9;

/** Where the value of the member whose key ends before `i` starts (past `:` and spaces), or -1 when no `:` follows. */
function valueAt(piece: Buffer, i: number): number {
  while (isJsonSpace(piece[i])) i++;
  if (piece[i] !== 58 /* : */) return -1;
  i++;
  while (isJsonSpace(piece[i])) i++;
  return i;
}

/** Whether `key` appears in `piece` with a value that starts with `opener` (`"usage": {`, not `"usage": null`). */
function opensValue(piece: Buffer, key: Buffer, opener: number): boolean {
  for (let at = piece.indexOf(key); at >= 0; at = piece.indexOf(key, at + 1)) {
    const value = valueAt(piece, at + key.length);
    if (value >= 0 && piece[value] === opener) return true;
  }
  return false;
}

/** What a chat stream's relay learnt: the usage to charge, and whether the answer finished. */
export interface ChatRelayState {
  usage: ProviderUsage | null;
  finished: boolean;
}

/**
 * The SSE text of a batch of chat-completion chunks, as the provider sent them: a chunk is parsed
 * only when it may be an error event or carries usage (recorded; taken out again when the client
 * did not ask for it, the usage-only chunk dropped altogether). Everything else passes unparsed.
 */
export function renderChatChunks(batch: RawStreamEvent[], clientWantsUsage: boolean, relay: ChatRelayState): string {
  let out = '';
  for (const e of batch) {
    if (!relay.finished && namesFinishReason.test(e.data)) relay.finished = true;
    if (mayBeFailure(e)) {
      const failure = streamFailure(e.event, JSON.parse(e.data) as Record<string, unknown>);
      if (failure) throw new RelayFailure(failure, out);
    }
    if (carriesUsage.test(e.data)) {
      const chunk = JSON.parse(e.data) as ChatCompletionResult;
      if (chunk.usage) relay.usage = chunk.usage;
      if (!clientWantsUsage && chunk.usage) {
        if (Array.isArray(chunk.choices) && chunk.choices.length === 0) continue;
        delete chunk.usage;
        out += `data: ${JSON.stringify(chunk)}\n\n`;
        continue;
      }
    }
    out += `data: ${e.data}\n\n`;
  }
  return out;
}

/**
 * Whether a piece of chat chunks may pass as the provider's bytes: none of them may be an error,
 * carry the usage, or (until the answer has finished) name a finish reason: the bytes are searched
 * for what `renderChatChunks` reads. A passed piece keeps the provider's spelling of its lines
 * (comments, `data:` without a space), which every SSE reader takes alike.
 */
export function chatPiecePasses(piece: Buffer, relay: ChatRelayState): boolean {
  return !piece.includes(ERROR_KEY) && !piece.includes(EVENT_LINE) && !opensValue(piece, USAGE_KEY, 123 /* { */) && (relay.finished || !opensValue(piece, FINISH_KEY, 34 /* " */));
}

const sequenceNumber = /"sequence_number"\s*:\s*(\d+)/;

/** The events that end a response stream; one that stops before any of them was cut short. */
export const FINAL_RESPONSE_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed']);
export const STREAM_CUT_SHORT = 'its stream ended before the response did (no response.completed, .incomplete or .failed)';

/** What a response stream's relay learnt: the usage to charge, the last sequence number, whether it ended. */
export interface ResponseRelayState {
  usage: ProviderUsage | null;
  last: number;
  ended: boolean;
}

/**
 * The SSE text of a batch of response events, as the provider sent them. An event is parsed only
 * when it may be an error event, names no type in its `event:` line, or ends the response (its
 * usage is recorded); its sequence number is read from the text.
 */
export function renderResponseEvents(batch: RawStreamEvent[], relay: ResponseRelayState): string {
  let out = '';
  for (const e of batch) {
    let parsed: ResponseEvent | null = null;
    if (mayBeFailure(e)) {
      parsed = JSON.parse(e.data) as ResponseEvent;
      const failure = streamFailure(e.event, parsed);
      if (failure) throw new RelayFailure(failure, out);
    }
    let type = e.event;
    if (!type) type = (parsed ??= JSON.parse(e.data) as ResponseEvent).type;
    // An answer cut off by max_output_tokens (.incomplete) or failed by the model carries its usage
    // too: it is charged what it used, as a completed one is, not its whole hold.
    if (FINAL_RESPONSE_EVENTS.has(type)) {
      relay.usage = (parsed ?? (JSON.parse(e.data) as ResponseEvent)).response?.usage ?? null;
      relay.ended = true;
    }
    const seq = sequenceNumber.exec(e.data);
    if (seq) relay.last = Number(seq[1]);
    out += `event: ${type}\ndata: ${e.data}\n\n`;
  }
  return out;
}

const ERROR_WORD = Buffer.from('error');
const EVENT_START = Buffer.from('\n\nevent:');
const SEQUENCE_KEY = Buffer.from('"sequence_number"');
const FINAL_EVENT_NAMES = [...FINAL_RESPONSE_EVENTS].map((name) => Buffer.from(name));

/**
 * Whether a piece of response events may pass as the provider's bytes: every event names its type
 * in an `event:` line, none is or may be an error or ends the response. Its last sequence number
 * is recorded, as `renderResponseEvents` would have.
 */
export function responsePiecePasses(piece: Buffer, relay: ResponseRelayState): boolean {
  if (!piece.subarray(0, 6).equals(EVENT_LINE) || piece.includes(ERROR_WORD) || FINAL_EVENT_NAMES.some((name) => piece.includes(name))) return false;
  let events = 1;
  for (let at = piece.indexOf(EVENT_START); at >= 0; at = piece.indexOf(EVENT_START, at + 2)) events++;
  // Every blank line but the last must be followed by an `event:` line (the piece ends in one).
  let blanks = 0;
  for (let at = piece.indexOf('\n\n'); at >= 0; at = piece.indexOf('\n\n', at + 2)) blanks++;
  if (events !== blanks) return false;
  const seq = lastNumberOf(piece, SEQUENCE_KEY);
  if (seq !== null) relay.last = seq;
  return true;
}

/** The number after the last `key:` in `piece`, or null. */
function lastNumberOf(piece: Buffer, key: Buffer): number | null {
  const at = piece.lastIndexOf(key);
  const start = at < 0 ? -1 : valueAt(piece, at + key.length);
  if (start < 0) return null;
  let value = 0;
  let i = start;
  for (; piece[i]! >= 48 && piece[i]! <= 57; i++) value = value * 10 + piece[i]! - 48;
  return i > start ? value : null;
}

/** The knowledge search of a streamed answer failed: no model was asked. */
export class KnowledgeSearchFailed extends Error {
  constructor(override readonly cause: unknown) {
    super('the knowledge search failed');
  }
}

/** A response stream's `error` event for a failure after the stream began. */
export function responseStreamError(err: unknown, model: string, sequence: number, log: Logger) {
  const e = err instanceof KnowledgeSearchFailed ? knowledgeSearchError(err.cause, log) : toUpstreamError(err, model).openaiError;
  return { type: 'error', code: e.code, message: e.message, param: e.param, sequence_number: sequence, error: e };
}

/** What a JSON answer would have said (503 for an unavailable index or encoder, else 500), in the stream's error event. */
function knowledgeSearchError(err: unknown, log: Logger): UpstreamError['openaiError'] {
  if (err instanceof ServiceUnavailable) return { message: `the knowledge search failed: ${err.message}; try again shortly`, type: 'server_error', code: 'unavailable', param: null };
  if (err instanceof AppError && err.status < 500) return { message: `the knowledge search failed: ${err.message}`, type: 'invalid_request_error', code: err.code, param: null };
  log.error('knowledge search failed in a stream', { err });
  return { message: 'the knowledge search failed: internal error', type: 'server_error', code: 'internal_error', param: null };
}
