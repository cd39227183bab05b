import type { Transcript } from '../../generated/prisma/client.js';
import type { Services } from '../services.js';
import { FetchRefused, fetchPage, isTransientFetchFailure } from '../providers/web-fetch.js';
import { invalid, requireHttpUrl } from './audio-checks.js';
import { transcriptPath } from '../contracts/transcript.js';

/**
 * AssemblyAI's webhook: a transcript submitted with `webhook_url` is announced there once it is
 * `completed` or `error`, by a POST of `{transcript_id, status}` (JSON; transcript_id in the form the
 * API answers, `/v2/transcript/<uuid>`), with the partner's own auth header when one was given. As
 * with AssemblyAI: a 2xx within 10 s is a delivery; a 4xx is final; anything else (5xx, 408, 429,
 * no answer) is tried again, 10 attempts in all (the transcript workflow's retry policy). Deliveries
 * are at least once: a receiver may see one twice. The URL goes through the safe fetcher (the SSRF
 * rules of audio_url), and is never followed to a redirect.
 *
 * The request fields are AssemblyAI's; null (as its clients may send) is the same as absent.
 */
export interface TranscriptWebhookRequest {
  webhook_url?: string | null;
  webhook_auth_header_name?: string | null;
  webhook_auth_header_value?: string | null;
}

// Headers of the delivery itself, which a partner's auth header may not replace.
const headersOfTheDelivery = new Set(['host', 'content-type', 'content-length', 'transfer-encoding', 'connection', 'user-agent', 'accept', 'accept-encoding']);

/** The webhook columns of a new transcript; a 422 on the field that cannot be used. */
export function webhookOf(body: TranscriptWebhookRequest) {
  const url = body.webhook_url ?? undefined;
  const name = body.webhook_auth_header_name ?? undefined;
  const value = body.webhook_auth_header_value ?? undefined;
  if (url !== undefined) requireHttpUrl('webhook_url', url);
  if ((name === undefined) !== (value === undefined)) {
    const missing = name === undefined ? 'webhook_auth_header_name' : 'webhook_auth_header_value';
    throw invalid(missing, 'is required with the other webhook_auth_header_ field');
  }
  if (name !== undefined && url === undefined) throw invalid('webhook_url', 'is required with webhook_auth_header_name');
  if (name !== undefined && headersOfTheDelivery.has(name.toLowerCase())) throw invalid('webhook_auth_header_name', `cannot be ${name}: the delivery sets that header itself`);
  return { webhookUrl: url ?? null, webhookAuthHeaderName: name ?? null, webhookAuthHeaderValue: value ?? null };
}

/** The webhook fields of a transcript's answers (AssemblyAI's), when it has one; the header's value is never shown. */
export function webhookView(row: Pick<Transcript, 'webhookUrl' | 'webhookAuthHeaderName' | 'webhookStatusCode'>) {
  if (!row.webhookUrl) return {};
  return {
    webhook_url: row.webhookUrl,
    webhook_auth: row.webhookAuthHeaderName !== null,
    webhook_auth_header_name: row.webhookAuthHeaderName,
    webhook_status_code: row.webhookStatusCode,
  };
}

/** `refused`: final (a 4xx or 3xx, or a URL that cannot be used: refused address, unknown host). */
export type WebhookDelivery = 'none' | 'delivered' | 'refused';

/** A delivery that may pass if tried again (5xx, 408, 429, no answer in time, no connection). */
export class WebhookNotDelivered extends Error {
  override name = 'WebhookNotDelivered';
}

const deliveryTimeoutMs = 10_000;

/** One delivery attempt for a finished transcript; throws WebhookNotDelivered when another attempt may pass. */
export async function deliverTranscriptWebhook(deps: Pick<Services, 'db' | 'config' | 'log'>, transcriptId: string): Promise<WebhookDelivery> {
  const row = await deps.db.transcript.findUnique({ where: { id: transcriptId } });
  if (!row?.webhookUrl || (row.status !== 'completed' && row.status !== 'error')) return 'none';
  const record = (status: number | null) => deps.db.transcript.updateMany({ where: { id: transcriptId }, data: { webhookStatusCode: status } });
  try {
    const answered = await fetchPage(row.webhookUrl, {
      post: { body: Buffer.from(JSON.stringify({ transcript_id: transcriptPath(row.id), status: row.status })), contentType: 'application/json' },
      headers: row.webhookAuthHeaderName && row.webhookAuthHeaderValue ? { [row.webhookAuthHeaderName]: row.webhookAuthHeaderValue } : {},
      accept: '*/*',
      allowPrivate: deps.config.urlFetchAllowPrivate,
      allowLoopback: deps.config.urlFetchAllowLoopback,
      maxRedirects: 0,
      // Only the receiver's status matters; an answer over this bound ends the delivery as refused (status unknown).
      maxBytes: 1024 * 1024,
      timeoutMs: deliveryTimeoutMs,
    });
    await record(answered.status);
    return 'delivered';
  } catch (err) {
    if (!(err instanceof FetchRefused)) throw err;
    const status = err.details.status ?? null;
    await record(status);
    // A redirect is not followed (the body would not be sent on): the receiver's answer, final as a 4xx is.
    const final = !isTransientFetchFailure(err);
    deps.log.warn('transcript webhook not delivered', { transcriptId, status, final, reason: err.reason });
    if (!final) throw new WebhookNotDelivered(err.message);
    return 'refused';
  }
}
