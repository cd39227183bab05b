import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { extractArticle, extractPage, UnsupportedContentType } from '../../lib/digitization/article.js';
import { classifyAddress, fetchPage, FetchRefused, type FetchRefusedReason } from '../../lib/providers/web-fetch.js';

/**
 * URL documents (issue "URL documents"): safe fetching and article extraction. Every server here
 * listens on 127.0.0.1 and is reached only with allowLoopback; redirects to other addresses must be
 * refused before any connection, so no test ever sends traffic off this machine.
 */

const para1 = 'Quantum gardening is the practice of growing plants while observing them as little as possible. '.repeat(4);
const para2 = 'Practitioners report that tomatoes ripen faster when nobody checks on them, which is consistent with folklore. '.repeat(4);
const articleHtml = `<!doctype html>
<html><head><title>Quantum Gardening Explained</title><meta charset="utf-8"></head>
<body>
  <header class="site-header"><a href="/">ACME Blog</a>
    <nav><ul><li><a href="/">Home menu item</a></li><li><a href="/about">About us menu item</a></li><li><a href="/shop">Shop menu item</a></li></ul></nav>
  </header>
  <div id="layout">
    <main>
      <article>
        <h1>Quantum Gardening Explained</h1>
        <p>${para1}</p>
        <h2>Why it works</h2>
        <p>${para2} See <a href="/more">the longer guide</a> for details.</p>
        <ul><li>Water at night</li><li>Never look at the seedlings</li></ul>
      </article>
    </main>
    <aside><h3>Related posts</h3><ul><li><a href="/x">Sidebar related link</a></li></ul></aside>
  </div>
  <footer><p>Copyright 2024 ACME footer text. All rights reserved.</p><a href="/privacy">Privacy policy footer link</a></footer>
  <script>console.log('tracking script text')</script>
</body></html>`;

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

interface TestServer { base: string; port: number; hits: string[]; close(): Promise<void> }

async function startServer(routes: Record<string, Handler>): Promise<TestServer> {
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const handler = routes[path] ?? Object.entries(routes).find(([p]) => p.endsWith('*') && path.startsWith(p.slice(0, -1)))?.[1];
    if (!handler) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    base: `http://127.0.0.1:${port}`,
    port,
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const redirect = (location: string, status = 302): Handler => (_req, res) => {
  res.writeHead(status, { location }).end();
};

async function refused(promise: Promise<unknown>, reason: FetchRefusedReason): Promise<FetchRefused> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof FetchRefused, `expected FetchRefused, got ${String(err)}`);
    assert.equal(err.reason, reason, err.message);
    return err;
  }
  assert.fail(`expected FetchRefused(${reason}), but the fetch succeeded`);
}

describe('URL documents: safe fetching (web-fetch)', function () {
  let srv: TestServer;
  const loop = { allowLoopback: true } as const;

  before(async () => {
    srv = await startServer({
      '/article': (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(articleHtml);
      },
      '/plain': (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end('Line one.\r\nLine two, as is.\n');
      },
      '/pdf': (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/pdf' }).end('%PDF-1.7\n');
      },
      '/host': (req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' }).end(String(req.headers.host));
      },
      '/gzip': (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-encoding': 'gzip' }).end(zlib.gzipSync('compressed hello'));
      },
      '/gzip-bomb': (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-encoding': 'gzip' }).end(zlib.gzipSync(Buffer.alloc(4 * 1024 * 1024)));
      },
      '/big': (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(64 * 1024) }).end(Buffer.alloc(64 * 1024, 'a'));
      },
      '/big-chunked': (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        let sent = 0;
        const write = () => {
          while (sent < 256 * 1024) {
            sent += 8 * 1024;
            if (!res.write(Buffer.alloc(8 * 1024, 'b'))) {
              res.once('drain', write);
              return;
            }
          }
          res.end();
        };
        write();
      },
      '/hang': () => {
        // never answers
      },
      '/hang-body': (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('a first chunk, then nothing');
      },
      '/missing': (_req, res) => {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('no such page');
      },
      '/to-article': redirect('/article', 301),
      '/to-metadata': redirect('http://169.254.169.254/latest/meta-data/'),
      '/to-private': redirect('http://10.0.0.1/'),
      '/to-mapped': redirect('http://[::ffff:169.254.169.254]/'),
      '/to-file': redirect('file:///etc/passwd'),
      '/to-localhost': (_req, res) => redirect(`http://localhost:${srv.port}/host`)(_req, res),
      '/chain/*': (req, res) => {
        const n = Number((req.url ?? '').split('/')[2]);
        if (n <= 0) res.writeHead(200, { 'content-type': 'text/plain' }).end('end of chain');
        else res.writeHead(302, { location: `/chain/${n - 1}` }).end();
      },
    });
  });

  after(async () => {
    await srv.close();
  });

  it('fetches an article page and extracts the article without menus, sidebars and footers', async () => {
    const page = await fetchPage(`${srv.base}/to-article`, loop);
    assert.equal(page.status, 200);
    assert.equal(page.finalUrl, `${srv.base}/article`);
    assert.match(page.contentType, /^text\/html/);
    const { kind, title, text } = extractPage(page);
    assert.equal(kind, 'html');
    assert.equal(title, 'Quantum Gardening Explained');
    assert.ok(text.includes(para1.trim()), text);
    assert.ok(text.includes('the longer guide for details.'), text);
    assert.match(text, /^#+ Why it works$/m);
    assert.match(text, /^- Water at night$/m);
    assert.match(text, /^- Never look at the seedlings$/m);
    assert.ok(/\n\n/.test(text), 'paragraphs are separated by blank lines');
    for (const noise of ['menu item', 'Sidebar related link', 'Related posts', 'footer text', 'footer link', 'tracking script', 'ACME Blog']) {
      assert.ok(!text.includes(noise), `"${noise}" should not be in:\n${text}`);
    }
  });

  it('refuses loopback by default, before sending a request', async () => {
    const before = srv.hits.length;
    const err = await refused(fetchPage(`${srv.base}/article`), 'private_address');
    assert.ok(err.message.includes(`${srv.base}/article`), err.message);
    assert.equal(err.details.address, '127.0.0.1');
    assert.equal(srv.hits.length, before, 'no request reached the server');
    await refused(fetchPage(`http://[::1]:${srv.port}/article`), 'private_address');
    await refused(fetchPage(`http://[::ffff:127.0.0.1]:${srv.port}/article`), 'private_address');
    await refused(fetchPage(`http://2130706433:${srv.port}/article`), 'private_address'); // 127.0.0.1 as a number
    // The parser's spelling of the address is not a redirect, and the reason does not say so.
    for (const spelled of [`http://0x7f000001:${srv.port}/article`, `HTTP://LOCALHOST:${srv.port}`]) {
      const err = await refused(fetchPage(spelled), 'private_address');
      assert.ok(!err.message.includes('redirected'), err.message);
    }
  });

  it('refuses a host name that resolves to loopback (localhost) by default', async () => {
    const err = await refused(fetchPage(`http://localhost:${srv.port}/article`), 'private_address');
    assert.match(err.message, /localhost/);
  });

  it('with allowLoopback connects to the vetted address and keeps the host name in the Host header', async () => {
    const page = await fetchPage(`http://localhost:${srv.port}/host`, loop).catch((err: unknown) => {
      // localhost may resolve to ::1 only on some machines, where nothing listens for this test.
      if (err instanceof FetchRefused && err.reason === 'network') return null;
      throw err;
    });
    if (page) assert.equal(page.body.toString(), `localhost:${srv.port}`);
  });

  it('refuses redirects to private and link-local addresses without connecting to them', async () => {
    for (const [path, address] of [
      ['/to-metadata', '169.254.169.254'],
      ['/to-private', '10.0.0.1'],
      ['/to-mapped', '::ffff:a9fe:a9fe'],
    ] as const) {
      const started = Date.now();
      // allowPrivate does not open link-local (cloud metadata) addresses.
      const options = path === '/to-private' ? loop : { ...loop, allowPrivate: true };
      const err = await refused(fetchPage(`${srv.base}${path}`, { ...options, timeoutMs: 5000 }), 'private_address');
      assert.ok(Date.now() - started < 1000, 'refused at once, not after trying to connect');
      assert.equal(err.details.address, address);
      assert.ok(err.message.includes(`${srv.base}${path}`), err.message);
    }
  });

  it('re-checks redirect targets: a redirect to a host name is resolved and vetted too', async () => {
    // The target localhost resolves to loopback: followed only because allowLoopback is set; Host header kept.
    const page = await fetchPage(`${srv.base}/to-localhost`, loop);
    assert.equal(page.finalUrl, `http://localhost:${srv.port}/host`);
    assert.equal(page.body.toString(), `localhost:${srv.port}`);
  });

  it('follows redirects up to the limit and refuses longer chains', async () => {
    const ok = await fetchPage(`${srv.base}/chain/3`, { ...loop, maxRedirects: 3 });
    assert.equal(ok.body.toString(), 'end of chain');
    assert.equal(ok.finalUrl, `${srv.base}/chain/0`);
    await refused(fetchPage(`${srv.base}/chain/4`, { ...loop, maxRedirects: 3 }), 'too_many_redirects');
    await refused(fetchPage(`${srv.base}/chain/6`, loop), 'too_many_redirects'); // default 5
  });

  it('refuses bodies over maxBytes, declared, chunked or compressed', async () => {
    await refused(fetchPage(`${srv.base}/big`, { ...loop, maxBytes: 10 * 1024 }), 'too_large');
    await refused(fetchPage(`${srv.base}/big-chunked`, { ...loop, maxBytes: 10 * 1024 }), 'too_large');
    await refused(fetchPage(`${srv.base}/gzip-bomb`, { ...loop, maxBytes: 100 * 1024 }), 'too_large');
    const small = await fetchPage(`${srv.base}/big`, { ...loop, maxBytes: 64 * 1024 });
    assert.equal(small.body.length, 64 * 1024);
    const gz = await fetchPage(`${srv.base}/gzip`, loop);
    assert.equal(gz.body.toString(), 'compressed hello');
  });

  it('gives up on a server that never answers within timeoutMs', async () => {
    for (const path of ['/hang', '/hang-body']) {
      const started = Date.now();
      const err = await refused(fetchPage(`${srv.base}${path}`, { ...loop, timeoutMs: 300 }), 'timeout');
      const elapsed = Date.now() - started;
      assert.ok(elapsed >= 250 && elapsed < 1500, `timed out after ${elapsed} ms`);
      assert.ok(err.message.includes(`${srv.base}${path}`), err.message);
    }
  });

  it('refuses other schemes, also as redirect targets', async () => {
    await refused(fetchPage('ftp://127.0.0.1/file.txt', loop), 'scheme');
    await refused(fetchPage('file:///etc/passwd', loop), 'scheme');
    await refused(fetchPage('gopher://example.com/', loop), 'scheme');
    await refused(fetchPage(`${srv.base}/to-file`, loop), 'scheme');
    await refused(fetchPage('not a url', loop), 'invalid_url');
  });

  it('refuses a non-2xx final status', async () => {
    const err = await refused(fetchPage(`${srv.base}/missing`, loop), 'http_status');
    assert.equal(err.details.status, 404);
  });

  it('returns plain text as is and refuses other content types', async () => {
    const plain = extractPage(await fetchPage(`${srv.base}/plain`, loop));
    assert.deepEqual(plain, { kind: 'text', title: null, text: 'Line one.\nLine two, as is.' });
    const pdf = await fetchPage(`${srv.base}/pdf`, loop);
    assert.throws(() => extractPage(pdf), (err: unknown) => err instanceof UnsupportedContentType && /application\/pdf/.test(err.message));
  });
});

describe('URL documents: address classification', () => {
  const cases: Array<[string, string | null]> = [
    ['8.8.8.8', 'public'],
    ['93.184.216.34', 'public'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['172.32.0.1', 'public'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'private'],
    ['100.128.0.1', 'public'],
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['169.254.169.254', 'link_local'],
    ['0.0.0.0', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['fe80::1', 'link_local'],
    ['fe80::1%eth0', 'link_local'],
    ['fc00::1', 'private'],
    ['fd12:3456::1', 'private'],
    ['ff02::1', 'multicast'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:169.254.169.254', 'link_local'],
    ['::ffff:8.8.8.8', 'public'],
    ['64:ff9b::a9fe:a9fe', 'link_local'],
    ['2002:7f00:1::', 'loopback'],
    ['2606:4700:4700::1111', 'public'],
    ['2001:db8::1', 'reserved'],
    ['example.com', null],
  ];
  for (const [address, expected] of cases) {
    it(`${address} is ${expected}`, () => assert.equal(classifyAddress(address), expected));
  }
});

describe('URL documents: article extraction', () => {
  it('falls back to <title>, then the first <h1>, for the title', () => {
    const body = `<p>${para1}</p><p>${para2}</p>`;
    assert.equal(extractArticle(`<html><head><title>Head title</title></head><body>${body}</body></html>`, 'http://x.test/').title, 'Head title');
    assert.equal(extractArticle(`<html><body><h1>Only heading</h1>${body}</body></html>`, 'http://x.test/').title, 'Only heading');
    assert.equal(extractArticle(`<html><body>${body}</body></html>`, 'http://x.test/').title, null);
  });

  it('keeps short pages readable and still drops the chrome', () => {
    const { text } = extractArticle(
      '<html><body><nav>Menu A</nav><h1>Tiny</h1><p>Just one line.</p><footer>Foot</footer></body></html>',
      'http://x.test/',
    );
    assert.match(text, /Just one line\./);
    assert.doesNotMatch(text, /Menu A|Foot/);
  });

  it('writes headings, lists, quotes, line breaks and code as Markdown-ish text', () => {
    const html = `<html><body><article><h2>Section</h2><p>${para1}</p>
      <ul><li>one</li><li>two<ul><li>two a</li></ul></li></ul>
      <blockquote><p>Quoted words.</p></blockquote>
      <p>first line<br>second line</p>
      <pre>const x = 1;\n  indented();</pre><p>${para2}</p></article></body></html>`;
    const { text } = extractArticle(html, 'http://x.test/');
    assert.match(text, /^## Section$/m);
    assert.match(text, /^- one\n- two\n {2}- two a$/m);
    assert.match(text, /^> Quoted words\.$/m);
    assert.match(text, /^first line\nsecond line$/m);
    assert.match(text, /^```\nconst x = 1;\n {2}indented\(\);\n```$/m);
  });
});
