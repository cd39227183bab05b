import type { ScraperSettings } from '../config.js';

/**
 * A web-scraping provider for URL documents (pages that need a browser, sites that refuse plain
 * fetches). The adapter speaks the Firecrawl v1 scrape protocol, which several providers share:
 *
 *   POST {base}/v1/scrape  {url, formats: ["markdown"], onlyMainContent: true}
 *   → {success: true, data: {markdown, metadata: {title, statusCode, creditsUsed?}}, creditsUsed?}
 *
 * Cost is the credits the provider reports times the configured price per credit. A provider that
 * reports no credits is charged its configured per-page credits, the documented list price.
 */
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
  constructor(readonly settings: ScraperSettings) {}

  async scrape(url: string, signal?: AbortSignal): Promise<ScrapeResult> {
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
    const text = await res.text();
    let body: { success?: boolean; error?: string; creditsUsed?: number; data?: { markdown?: string; metadata?: { title?: string; statusCode?: number; creditsUsed?: number } } };
    try {
      body = JSON.parse(text);
    } catch {
      throw new ScrapeFailed(res.ok ? 'ambiguous' : res.status === 429 || res.status >= 500 ? 'unavailable' : 'refused', `the scraping provider answered ${res.status} without JSON`);
    }
    if (res.status === 429 || res.status >= 500) throw new ScrapeFailed('unavailable', `the scraping provider answered ${res.status}: ${body.error ?? ''}`.trim());
    if (!res.ok || body.success === false) throw new ScrapeFailed('refused', `the scraping provider could not scrape ${url}: ${body.error ?? `HTTP ${res.status}`}`);
    const markdown = body.data?.markdown;
    if (typeof markdown !== 'string') throw new ScrapeFailed('ambiguous', 'the scraping provider answered without content');
    const reported = body.creditsUsed ?? body.data?.metadata?.creditsUsed;
    const known = typeof reported === 'number' && Number.isFinite(reported) && reported >= 0;
    return { markdown, title: body.data?.metadata?.title?.trim() || null, credits: known ? reported : this.settings.creditsPerPage, reportedUsage: known };
  }
}
