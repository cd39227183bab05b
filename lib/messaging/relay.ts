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
 * client's ends. A failure inside a batch relays the events before it, then throws the failure.
 */
export async function relayBatches(out: EventStream, batches: EventBatches, render: (batch: RawStreamEvent[]) => string): Promise<void> {
  try {
    await batches.forEach((batch) => out.write(render(batch)), () => out.closed);
  } catch (caught) {
    if (!(caught instanceof RelayFailure)) throw caught;
    if (caught.relayed) await out.write(caught.relayed);
    throw caught.cause;
  }
}

const carriesUsage = /"usage"\s*:\s*\{/;
const namesFinishReason = /"finish_reason"\s*:\s*"/;

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
