import assert from 'node:assert/strict';
import fs from 'node:fs';
import { client, startApi, type RunningApi } from '../support/system.js';
import { freePort } from '../../scripts/stack.js';
import { knowledgeBaseRoutes } from '../../api/knowledge-base/routes.js';
import { testStack } from '../support/stack.js';

describe('service endpoints: health and the OpenAPI document', () => {
  let api: RunningApi;
  let http: ReturnType<typeof client>;
  before(async () => {
    api = await startApi();
    http = client(api.url);
  });
  after(() => api?.close());

  it('GET /health answers without a key', async () => {
    const r = await http('GET', '/health');
    assert.equal(r.status, 200);
    assert.equal(r.body.status, 'ok');
    assert.equal(typeof r.body.uptime_seconds, 'number');
    // However the process was started (here: not through npm), the version is package.json's.
    assert.equal(r.body.version, JSON.parse(fs.readFileSync('package.json', 'utf8')).version);
  });

  it('a path no route answers is a 404 in the error shape of the interface that owns its prefix', async () => {
    const shapes: Array<[string, Record<string, unknown>]> = [
      ['/api/nothing-here', { detail: 'no route for GET /api/nothing-here' }],
      ['/v2/transcript/a/b/c', { error: 'no route for GET /v2/transcript/a/b/c' }],
      ['/v2/audio/nothing', { error: 'no route for GET /v2/audio/nothing' }],
      ['/v2/dialog_analyses/a/b', { message: 'no route for GET /v2/dialog_analyses/a/b' }],
    ];
    for (const [path, body] of shapes) {
      const r = await http('GET', path);
      assert.equal(r.status, 404, path);
      assert.deepEqual(r.body, body, path);
    }
    const v3 = await http('GET', '/v3/nothing');
    assert.equal(v3.body.detail.code, 'not_found');
  });

  it('GET /health/deep reports Postgres, Temporal, Weaviate and the file storage reachable', async () => {
    const r = await http('GET', '/health/deep');
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.status, 'ok');
    for (const dep of ['postgres', 'temporal', 'weaviate', 'storage']) assert.equal(r.body.checks[dep].ok, true, dep);
  });

  it('GET /health/deep answers 503 naming the dependency that is down (only ok / not ok without the administrator key)', async () => {
    const broken = await startApi({ WEAVIATE_URL: `http://127.0.0.1:${await freePort()}` });
    try {
      const r = await client(broken.url)('GET', '/health/deep');
      assert.equal(r.status, 503);
      assert.equal(r.body.status, 'degraded');
      assert.deepEqual(r.body.checks, { postgres: { ok: true }, temporal: { ok: true }, weaviate: { ok: false }, storage: { ok: true } });
      const admin = await client(broken.url)('GET', '/health/deep', { key: testStack().adminApiKey });
      assert.equal(admin.status, 503);
      assert.equal(admin.body.checks.weaviate.ok, false);
      assert.equal(typeof admin.body.checks.weaviate.error, 'string');
      assert.equal(typeof admin.body.checks.postgres.latency_ms, 'number');
    } finally {
      await broken.close();
    }
  });

  it('serves an OpenAPI 3.1 document with every route and its request schemas', async () => {
    const r = await http('GET', '/openapi.json');
    assert.equal(r.status, 200);
    assert.equal(r.body.openapi, '3.1.0');
    for (const route of knowledgeBaseRoutes(api.deps)) {
      const op = r.body.paths[route.path]?.[route.method];
      assert.ok(op, `${route.method.toUpperCase()} ${route.path} is documented`);
      assert.deepEqual(op.security, route.access === 'none' ? [] : [{ ApiKey: [] }]);
    }
    const upload = r.body.paths['/api/documents/{partner}/{kb}'].post.requestBody.content['multipart/form-data'].schema;
    assert.deepEqual(upload.required, ['type', 'folder']);
    assert.deepEqual(upload.properties.file, { type: 'string', format: 'binary' });
    const search = r.body.paths['/api/rag-test/search'].post.requestBody.content['application/json'].schema;
    assert.equal(search.properties.user_message.maxLength, 20000);
    for (const [path, method] of [['/v3/chat/completions', 'post'], ['/v3/responses', 'post'], ['/v2/completions', 'post'], ['/v2/completions/{id}', 'get']] as const) {
      assert.deepEqual(r.body.paths[path][method].security, [{ QuotaKeyBearer: [] }, { QuotaKeyHeader: [] }], `${path} asks for a quota key`);
    }
    assert.equal(r.body.paths['/v2/completions'].post.deprecated, true);
    assert.deepEqual(r.body.components.securitySchemes.QuotaKeyBearer, { type: 'http', scheme: 'bearer', description: 'Messaging quota key (preferred)' });
  });

  it('refuses an unauthenticated upload before storing any of it', async () => {
    const big = Buffer.alloc(2 * 1024 * 1024, 'a');
    const r = await http('POST', `/api/documents/nobody/kb`, { form: { type: 'file', folder: 'f', file: { name: 'x.txt', content: big } } }).catch((err) => ({ status: 0, body: String(err), headers: new Headers() }));
    assert.ok(r.status === 401 || r.status === 0, `got ${r.status}`);
    const uploads = `${api.deps.config.storageDir}/uploads`;
    assert.deepEqual(fs.existsSync(uploads) ? fs.readdirSync(uploads) : [], []);
  });
});
