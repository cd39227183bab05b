import type { Services } from '../services.js';
import type { Logger } from '../platform/logger.js';
import type { AnswerChannel } from './answer.js';
import type { QuotaKeyPrincipal } from './quota-keys.js';
import { takeServiceMetadata } from './service-metadata.js';
import type { ChatCompletionBody, ResponsesBody, UpstreamError } from './upstream.js';

/**
 * What POST /v3/chat/completions (chat-completions.ts) and POST /v3/responses (responses.ts)
 * share: the request's context, its outcome, and what the service takes out of a request before
 * the provider sees it. Fields the service owns (fallback_model, metadata.service) never reach the
 * provider; everything else in the request is forwarded as sent (reasoning included, untouched).
 */
export interface GenerationContext {
  deps: Services;
  key: QuotaKeyPrincipal;
  requestId: string;
  log: Logger;
  answer: AnswerChannel;
}

/** A JSON answer for the caller to send, or a stream already written to the answer channel. */
export type GenerationOutcome = { json: unknown } | { streamed: true };

/** The model asked for, and the one to try when it fails. */
export interface ModelChoice {
  model: string;
  fallback: string | null;
}

export function splitRequest<B extends ChatCompletionBody | ResponsesBody>(body: B) {
  const { fallback_model: fallback, metadata, ...rest } = body;
  const forwarded = rest as unknown as B;
  const { service, rest: otherMetadata } = takeServiceMetadata(metadata);
  if (otherMetadata) forwarded.metadata = otherMetadata;
  const models: ModelChoice = { model: forwarded.model as string, fallback: (fallback as string | undefined) ?? null };
  return { forwarded, models, service };
}

/** The last user message's text: what a knowledge search looks for. */
export function lastUserText(items: unknown): string {
  if (typeof items === 'string') return items;
  if (!Array.isArray(items)) return '';
  for (let i = items.length - 1; i >= 0; i--) {
    const m = items[i] as { role?: string; content?: unknown };
    if (m?.role !== 'user') continue;
    if (typeof m.content === 'string') return m.content;
    if (Array.isArray(m.content)) {
      return m.content.map((p: { text?: unknown }) => (typeof p?.text === 'string' ? p.text : '')).filter(Boolean).join('\n');
    }
  }
  return '';
}

export const logFallback = (ctx: GenerationContext) => (err: UpstreamError) => ctx.log.warn('model failed, trying fallback_model', { status: err.status, detail: err.message });
