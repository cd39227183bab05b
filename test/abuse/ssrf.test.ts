import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Scraper, ScrapeFailed } from '../../lib/providers/scraper.js';
import { FetchRefused, readBoundedBody, vetUrl } from '../../lib/providers/web-fetch.js';
import { findChannel } from '../../lib/channels/resolve.js';
import { parseChannelAlias } from '../../lib/channels/aliases.js';
import { YouTubeDataApi, DataApiError } from '../../lib/providers/video-data-api.js';
import type { ChannelDeps } from '../../lib/channels/state.js';

/**
 * SSRF checks on every URL that leaves the service on a user's behalf, and bounded answers
 * (docs/abuse-resistance.md, "URLs that leave the service on a user's behalf"). The direct fetcher
 * (URL documents, `audio_url`) has its own tests (test/unit/web-fetch.test.ts,
 * test/transcription/audio-url.test.ts); here: the scraping provider, which used to receive any
 * URL, the channel pages, and answers larger than their bound.
 */
async function server(handler: http.RequestListener): Promise<{ url: string; close(): Promise<void>; hits: string[] }> {
  const hits: string[] = [];
  const s = http.createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    handler(req, res);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`,
    hits,
    close: () => new Promise<void>((r) => {
      s.closeAllConnections();
      s.close(() => r());
    }),
  };
}

const scrapeAnswer = JSON.stringify({ success: true, data: { markdown: '# A page\n\nText.', metadata: { title: 'A page', statusCode: 200 } }, creditsUsed: 1 });
const settings = (baseUrl: string) => ({ baseUrl, apiKey: 'scraper-key', name: 'firecrawl', costPerCreditUsd: 0.001, creditsPerPage: 5, timeoutMs: 10_000 });

describe('SSRF checks and bounded answers', function () {
  this.timeout(60_000);

  describe('the scraping provider is never handed an address of ours', () => {
    let provider: Awaited<ReturnType<typeof server>>;
    before(async () => {
      provider = await server((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(scrapeAnswer));
    });
    after(() => provider.close());

    for (const [url, why] of [
      ['http://127.0.0.1:8080/admin', /loopback address 127\.0\.0\.1/],
      ['http://localhost/', /loopback address/],
      ['http://[::1]:5432/', /loopback address ::1/],
      ['http://169.254.169.254/latest/meta-data/iam/security-credentials/', /link-local address 169\.254\.169\.254/],
      ['http://10.0.0.7/internal', /private address 10\.0\.0\.7/],
      ['http://[::ffff:192.168.1.1]/', /private address/],
      ['file:///etc/passwd', /only http and https/],
      ['gopher://127.0.0.1:6379/_FLUSHALL', /only http and https/],
    ] as const) {
      it(`refuses ${url} before calling the provider`, async () => {
        const before = provider.hits.length;
        await assert.rejects(new Scraper(settings(provider.url)).scrape(url), (err: ScrapeFailed) => {
          assert.ok(err instanceof ScrapeFailed, String(err));
          assert.equal(err.kind, 'refused');
          assert.match(err.message, why);
          return true;
        });
        assert.equal(provider.hits.length, before, 'the provider was not called');
      });
    }

    it('passes a loopback page when loopback is allowed (URL_FETCH_ALLOW_LOOPBACK), as a direct fetch would', async () => {
      const result = await new Scraper(settings(provider.url), { allowLoopback: true }).scrape('http://127.0.0.1:9/page');
      assert.equal(result.title, 'A page');
    });

    it('reads at most 16 MiB of the provider\'s answer; a larger one leaves the cost uncertain, not a page', async () => {
      const huge = await server((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        const chunk = Buffer.alloc(1024 * 1024, 0x20);
        let sent = 0;
        const pump = () => {
          while (sent < 64) {
            sent++;
            if (!res.write(chunk)) return void res.once('drain', pump);
          }
          res.end();
        };
        pump();
      });
      try {
        await assert.rejects(new Scraper(settings(huge.url), { allowLoopback: true }).scrape('http://127.0.0.1:9/page'), (err: ScrapeFailed) => {
          assert.equal(err.kind, 'ambiguous');
          assert.match(err.message, /larger than 16777216 bytes/);
          return true;
        });
      } finally {
        await huge.close();
      }
    });
  });

  describe('vetUrl, the checks of the direct fetch for URLs another service fetches', () => {
    it('refuses private, loopback, link-local and non-http URLs, and accepts public literals', async () => {
      for (const url of ['http://127.0.0.1/', 'https://169.254.169.254/', 'http://[fe80::1]/', 'http://0.0.0.0/', 'ftp://example.com/', 'not a url']) {
        await assert.rejects(vetUrl(url), FetchRefused, url);
      }
      await vetUrl('http://93.184.215.14/page');
      await vetUrl('http://10.1.2.3/', { allowPrivate: true });
    });
  });

  describe('channel pages', () => {
    it('a channel page that redirects to a link-local address is refused, never followed', async () => {
      const platform = await server((req, res) => {
        if (req.url?.startsWith('/c/')) return res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
        res.writeHead(404).end();
      });
      try {
        const deps = {
          config: { videoPlatformBaseUrl: platform.url, urlFetchAllowPrivate: false, urlFetchAllowLoopback: true, videoDataApi: { baseUrl: platform.url, apiKey: null, timeoutMs: 5_000, unitPriceUsd: null } },
        } as unknown as ChannelDeps;
        const api = new YouTubeDataApi({ baseUrl: platform.url, apiKey: null, timeoutMs: 5_000 } as never);
        await assert.rejects(findChannel(deps, api, parseChannelAlias('https://www.youtube.com/c/SomeChannel')!), (err: DataApiError) => {
          assert.ok(err instanceof DataApiError, String(err));
          assert.match(err.message, /Refused to fetch .*link-local address 169\.254\.169\.254/);
          return true;
        });
        assert.deepEqual(platform.hits, ['GET /c/SomeChannel'], 'only the platform was asked');
      } finally {
        await platform.close();
      }
    });
  });

  describe('bounded response bodies', () => {
    it('readBoundedBody stops a chunked answer at its bound, and refuses a declared length over it at once', async () => {
      const s = await server((req, res) => {
        if (req.url === '/declared') return res.writeHead(200, { 'content-length': String(1024 ** 3) }).end();
        res.writeHead(200);
        const chunk = Buffer.alloc(64 * 1024, 0x41);
        let n = 0;
        const pump = () => {
          while (n++ < 1024) if (!res.write(chunk)) return void res.once('drain', pump);
          res.end();
        };
        pump();
      });
      try {
        const tooLarge = () => new Error('too large');
        await assert.rejects(readBoundedBody(await fetch(`${s.url}/chunked`), 1024 * 1024, tooLarge), /too large/);
        await assert.rejects(readBoundedBody(await fetch(`${s.url}/declared`), 1024 * 1024, tooLarge), /too large/);
        assert.equal((await readBoundedBody(await fetch(`${s.url}/chunked`), 128 * 1024 * 1024, tooLarge)).length, 64 * 1024 * 1024);
      } finally {
        await s.close();
      }
    });
  });
});
