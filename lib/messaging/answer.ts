/**
 * How the messaging domain answers a request without knowing HTTP: api/messaging adapts an HTTP
 * response to these (api/messaging/http-answer.ts), a test can adapt anything else.
 */

/** The phases of a request's time before the provider's first byte (Server-Timing, when enabled). */
export type TimingPhase = 'handler' | 'admitted' | 'provider';

/** A server-sent-event stream to the client. */
export interface EventStream {
  /** True once the client has gone or the stream has ended. */
  readonly closed: boolean;
  /** Sets the stream up; its head goes out with the first write, or at once with `flush`. */
  start(flush?: boolean): void;
  /**
   * SSE text (or its UTF-8 bytes) as it is. Answers a promise only when the client must read first
   * (resolved once it has), nothing when the text is handed on: a relay pays no promise per chunk.
   */
  write(text: string | Buffer): Promise<void> | void;
  /** `event: <type>` + `data: <json>`: the responses stream format. */
  event(type: string, data: unknown): Promise<void>;
  /** `data: <json>` (or a string as it is): the chat-completions stream format. */
  data(data: unknown): Promise<void>;
  /** Ends the stream, with `last` (SSE text) as its last bytes when given: one write for both. */
  end(last?: string): void;
}

/** Where one request's answer goes. */
export interface AnswerChannel {
  /** Aborted when the client goes away before the answer is complete; the domain may abort it too (a refused hold ends the provider call). */
  readonly abort: AbortController;
  /** Records the end of a phase. */
  mark(phase: TimingPhase): void;
  /** The answer as an event stream (one per request). */
  stream(): EventStream;
}
