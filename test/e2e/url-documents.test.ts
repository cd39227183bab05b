import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { client, eventually, useRunningSystem } from '../support/system.js';
import { newKnowledgeBase } from '../support/fixtures.js';

const page = (title: string, body: string) => `<!doctype html><html><head><title>${title}</title></head><body>
<nav><a href="/">Home</a> <a href="/shop">Shop the winter sale</a></nav>
<article><h1>${title}</h1>${body}</article>
<footer>Copyright Example Press. Subscribe to our newsletter.</footer></body></html>`;

describe('URL documents and batch URL import', function () {
  this.timeout(120_000);
  const system = useRunningSystem();
  const api: ReturnType<typeof client> = (...args) => system.http(...args);
  let server: http.Server;
  let base: string;
  /** The answer of /held-tides waits until this is called (a digitization in flight, deterministically). */
  let releaseHeld: () => void = () => {};
  let held = new Promise<void>((r) => (releaseHeld = r));

  before(async () => {
    server = http.createServer((req, res) => {
      if (req.url === '/tides') {
        res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
        res.end(page('Reading tide tables', '<p>Spring tides happen near full and new moon, when the tidal range is largest.</p><p>Neap tides follow the quarter moons.</p>'));
      } else if (req.url === '/held-tides') {
        void held.then(() => {
          res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
          res.end(page('Reading tide tables', '<p>Spring tides happen near full and new moon.</p>'));
        });
      } else if (req.url === '/knots') {
        res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
        res.end(page('Three sailing knots', '<ul><li>The bowline makes a fixed loop.</li><li>The cleat hitch secures a line.</li></ul>'));
      } else if (req.url === '/to-metadata') {
        res.writeHead(302, { Location: 'http://169.254.169.254/latest/meta-data/' });
        res.end();
      } else {
        res.writeHead(404);
        res.end();
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  const read = (f: { partner: { name: string; key: string }; kb: string }, id: string) => api('GET', `/api/document/${f.partner.name}/${f.kb}/${id}`, { key: f.partner.key });

  it('fetches the page, keeps the article (not menus or footers) and takes its title as the name', async () => {
    const f = await newKnowledgeBase(api);
    const created = await api('POST', `/api/documents/${f.partner.name}/${f.kb}`, { key: f.partner.key, form: { type: 'url', folder: f.folder, url: `${base}/tides`, use_original_as_rewritten: 'true' } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.type, 'url');
    const done = await eventually('embedding', async () => {
      const d = (await read(f, created.body.id)).body;
      return d.embedding_status === 'success' ? d : null;
    });
    assert.equal(done.name, 'Reading tide tables');
    assert.equal(done.url, `${base}/tides`);
    const digitized = await api('GET', `/api/documents/${f.partner.name}/${f.kb}/${created.body.id}/content/digitized`, { key: f.partner.key });
    assert.match(digitized.body.content, /Spring tides happen near full and new moon/);
    assert.doesNotMatch(digitized.body.content, /winter sale|newsletter/);
  });

  it('a URL document renamed while its page is being fetched keeps the given name, not the page title', async () => {
    const f = await newKnowledgeBase(api);
    held = new Promise<void>((r) => (releaseHeld = r));
    const created = await api('POST', `/api/documents/${f.partner.name}/${f.kb}`, { key: f.partner.key, form: { type: 'url', folder: f.folder, url: `${base}/held-tides`, use_original_as_rewritten: 'true' } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const renamed = await api('PUT', `/api/documents/${f.partner.name}/${f.kb}/${created.body.id}/name`, { key: f.partner.key, form: { name: 'My tide notes' } });
    assert.equal(renamed.body.name, 'My tide notes');
    releaseHeld();
    const done = await eventually('embedding', async () => {
      const d = (await read(f, created.body.id)).body;
      return d.embedding_status === 'success' ? d : null;
    });
    assert.equal(done.name, 'My tide notes');
  });

  it('a URL whose host name does not exist (.invalid never resolves, RFC 2606) fails at once with a readable error, not retried for hours', async () => {
    const f = await newKnowledgeBase(api);
    const created = await api('POST', `/api/documents/${f.partner.name}/${f.kb}`, {
      key: f.partner.key,
      form: { type: 'url', url: 'http://no-such-host.invalid/guide', folder: f.folder, use_original_as_rewritten: 'true' },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const failed = await eventually('the refusal', async () => {
      const d = (await read(f, created.body.id)).body;
      return d.processing_error ? d : null;
    }, 60_000);
    assert.equal(failed.processing_error, 'Refused to fetch http://no-such-host.invalid/guide: host no-such-host.invalid does not resolve (ENOTFOUND)');
    assert.equal(failed.file_digitized, null);
  });

  it('batch import: each URL on its own; a redirect to a link-local address is refused with a readable error', async () => {
    const f = await newKnowledgeBase(api);
    const res = await api('POST', `/api/documents/${f.partner.name}/${f.kb}/batch`, {
      key: f.partner.key,
      json: { folder: f.folder, use_original_as_rewritten: true, urls: [`${base}/knots`, 'ftp://example.org/file.txt', `${base}/to-metadata`] },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.summary, { total: 3, succeeded: 2, failed: 1 });
    assert.deepEqual(res.body.results.map((r: { status: string }) => r.status), ['success', 'failed', 'success']);
    const knots = await eventually('the knots page', async () => {
      const d = (await read(f, res.body.results[0].document_id)).body;
      return d.embedding_status === 'success' ? d : null;
    });
    assert.equal(knots.name, 'Three sailing knots');
    const refused = await eventually('the refusal', async () => {
      const d = (await read(f, res.body.results[2].document_id)).body;
      return d.processing_error ? d : null;
    });
    assert.match(refused.processing_error, /169\.254\.169\.254|private|link-local/i);
    assert.equal(refused.file_digitized, null);
    const tooMany = await api('POST', `/api/documents/${f.partner.name}/${f.kb}/batch`, { key: f.partner.key, json: { folder: f.folder, urls: Array.from({ length: 1001 }, (_, i) => `${base}/p${i}`) } });
    assert.equal(tooMany.status, 400);
    // An empty or over-long URL fails in its own result, as a malformed one does; the others are created.
    const mixed = await api('POST', `/api/documents/${f.partner.name}/${f.kb}/batch`, { key: f.partner.key, json: { folder: f.folder, urls: ['', `${base}/${'x'.repeat(9000)}`, `${base}/knots`] } });
    assert.equal(mixed.status, 200, JSON.stringify(mixed.body).slice(0, 500));
    assert.deepEqual(mixed.body.summary, { total: 3, succeeded: 1, failed: 2 });
    assert.match(mixed.body.results[0].error, /not an absolute http or https URL/);
    assert.match(mixed.body.results[1].error, /9\d{3} characters long; at most 8192 are taken/);
    const none = await api('POST', `/api/documents/${f.partner.name}/${f.kb}/batch`, { key: f.partner.key, json: { folder: f.folder, urls: [] } });
    assert.equal(none.status, 200);
    assert.deepEqual(none.body, { summary: { total: 0, succeeded: 0, failed: 0 }, results: [] });
  });
});
