import type { ScraperSettings } from '../platform/config.js';
import { FetchRefused, readBoundedBody, vetUrl } from './web-fetch.js';
import { isUnavailableStatus } from './service-unavailable.js';

/**
 * A web-scraping provider for URL documents (pages that need a browser, sites that refuse plain
 * fetches). The adapter speaks the Firecrawl v1 scrape protocol, which several providers share:
 *
 *   POST {base}/v1/scrape  {url, formats: ["markdown"], onlyMainContent: true}
 *   → {success: true, data: {markdown, metadata: {title, statusCode, creditsUsed?}}, creditsUsed?}
 *
 * Cost is the credits the provider reports times the configured price per credit. A provider that
 * reports no credits is charged its configured per-page credits, the documented list price.
 *
 * A URL is checked like a direct fetch before it is sent (lib/providers/web-fetch.ts `vetUrl`:
 * http(s) only, no private, loopback or link-local host unless allowed): a provider inside our
 * network must not become a way to reach it. The provider's answer is read up to
 * SCRAPE_MAX_RESPONSE_BYTES (16 MiB); a larger one is not read, and its cost is uncertain (the provider did the work).
 */
export const SCRAPE_MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

export interface ScrapeResult {
  markdown: string;
  title: string | null;
  credits: number;
  /** The provider reported its usage itself (not our per-page default). */
  reportedUsage: boolean;
}

export type ScrapeFailureKind = 'refused' | 'unavailable' | 'ambiguous';

export class ScrapeFailed extends Error {
  override name = 'ScrapeFailed';
  constructor(readonly kind: ScrapeFailureKind, message: string) {
    super(message);
  }
}


export class Scraper {
  constructor(
    readonly settings: ScraperSettings,
    private readonly addressPolicy: { allowPrivate?: boolean; allowLoopback?: boolean } = {},
    private readonly maxResponseBytes = SCRAPE_MAX_RESPONSE_BYTES,
  ) {}

  async scrape(url: string, signal?: AbortSignal): Promise<ScrapeResult> {
    try {
      await vetUrl(url, this.addressPolicy);
    } catch (err) {
      if (!(err instanceof FetchRefused)) throw err;
      // A name that does not resolve here cannot lead the provider to an address of ours, and the
      // provider resolves it in its own network: it goes on. Every other refusal is final, and
      // nothing was sent or charged.
      if (err.reason !== 'dns' && err.reason !== 'unknown_host') throw new ScrapeFailed('refused', err.message);
    }
    let res: Response;
    try {
      res = await fetch(`${this.settings.baseUrl}/v1/scrape`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(this.settings.apiKey ? { authorization: `Bearer ${this.settings.apiKey}` } : {}) },
        body: JSON.stringify({ url, formats: ['markdown'], onlyMainContent: true }),
        signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(this.settings.timeoutMs)]) : AbortSignal.timeout(this.settings.timeoutMs),
      });
    } catch (err) {
      const code = (err as { cause?: { code?: string } }).cause?.code;
      if (code === 'ECONNREFUSED') throw new ScrapeFailed('unavailable', 'the scraping provider refused the connection');
      throw new ScrapeFailed('ambiguous', `no answer from the scraping provider: ${(err as Error).message}`);
    }
    let text: string;
    try {
      // The provider did the work and billed it: an answer too large to read leaves its cost unknown.
      const raw = await readBoundedBody(res, this.maxResponseBytes, () => new ScrapeFailed('ambiguous', `the scraping provider's answer for ${url} is larger than ${this.maxResponseBytes} bytes`));
      text = raw.toString('utf8');
    } catch (err) {
      if (err instanceof ScrapeFailed) throw err;
      throw new ScrapeFailed('ambiguous', `the scraping provider's answer was cut off: ${(err as Error).message}`);
    }
    let body: { success?: boolean; error?: string; creditsUsed?: number; data?: { markdown?: string; metadata?: { title?: string; statusCode?: number; creditsUsed?: number } } };
    try {
      body = JSON.parse(text);
    } catch {
      throw new ScrapeFailed(res.ok ? 'ambiguous' : isUnavailableStatus(res.status) ? 'unavailable' : 'refused', `the scraping provider answered ${res.status} without JSON`);
    }
    if (isUnavailableStatus(res.status)) throw new ScrapeFailed('unavailable', `the scraping provider answered ${res.status}: ${body.error ?? ''}`.trim());
    if (!res.ok || body.success === false) throw new ScrapeFailed('refused', `the scraping provider could not scrape ${url}: ${body.error ?? `HTTP ${res.status}`}`);
    const markdown = body.data?.markdown;
    if (typeof markdown !== 'string') throw new ScrapeFailed('ambiguous', 'the scraping provider answered without content');
    const reported = body.creditsUsed ?? body.data?.metadata?.creditsUsed;
    const known = typeof reported === 'number' && Number.isFinite(reported) && reported >= 0;
    return { markdown, title: body.data?.metadata?.title?.trim() || null, credits: known ? reported : this.settings.creditsPerPage, reportedUsage: known };
  }
}
