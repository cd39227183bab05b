import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import fc from 'fast-check';
import { startApi, client, type RunningApi } from '../support/system.js';
import { newKnowledgeBase, newPartner } from '../support/fixtures.js';
import { newQuotaKey } from '../messaging/support.js';
import { testStack } from '../support/stack.js';
import { startOpenAiUpstream, type OpenAiUpstream } from '../support/openai-upstream.js';
import { sample, type Schema } from '../support/schema-sampler.js';

/**
 * Every route of the served /openapi.json, driven from the document alone
 * (docs/abuse-resistance.md, "Fuzzing and the auth matrix from the served OpenAPI document"):
 * - the auth matrix: each operation under every key kind (none, a bad key, another partner's, the
 *   partner's own, the administrator's, a messaging quota key), its expected answer generated
 *   from the operation's `x-access`; a new route is covered the moment it is served, and a route
 *   whose access level the matrix does not know fails the test;
 * - fuzzing: valid, boundary and malformed JSON, urlencoded and multipart bodies (files
 *   included), path and query values, under random key kinds (fast-check, fixed seed, bounded runs).
 * For every answer: never a 5xx (except a 501 the operation declares), an error body in its
 * interface's shape (the document's `x-error-style` and `components.schemas`), and for every
 * refused request (4xx) the database and the upload directory unchanged.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20_261_125);
const RUNS_PER_OPERATION = Number(process.env.FUZZ_RUNS ?? 12);

type KeyKind = 'none' | 'bad key' | "another partner's key" | "the partner's own key" | 'the admin key' | 'a quota key';
const keyKinds: KeyKind[] = ['none', 'bad key', "another partner's key", "the partner's own key", 'the admin key', 'a quota key'];

interface Operation {
  method: string;
  path: string;
  style: string;
  access: string;
  op: any;
}

/** What the route answers a key kind: 401, 403, or `allowed` (anything but those two: 404, 409, 422, 2xx ...). */
function expectedAuth(access: string, kind: KeyKind): 401 | 403 | 'allowed' | 'not 401' {
  const noKey = kind === 'none' || kind === 'bad key';
  switch (access) {
    case 'none':
      return 'not 401';
    case 'quota':
      return kind === 'a quota key' ? 'allowed' : 401;
    case 'authenticated':
      // Some check the partner named in their body or query (403 for another partner's key).
      return noKey || kind === 'a quota key' ? 401 : 'not 401';
    case 'partner':
      return noKey || kind === 'a quota key' ? 401 : kind === "another partner's key" ? 403 : 'allowed';
    case 'admin':
      return noKey || kind === 'a quota key' ? 401 : kind === 'the admin key' ? 'allowed' : 403;
    default:
      throw new Error(`the auth matrix does not know the access level ${JSON.stringify(access)}: add its expectations`);
  }
}

interface Built {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: BodyInit;
  describe: string;
}

describe('fuzzing and the auth matrix from the served OpenAPI document', function () {
  this.timeout(1_800_000);
  let api: RunningApi;
  let upstream: OpenAiUpstream;
  let storage: string;
  let doc: any;
  let operations: Operation[];
  let owner: Awaited<ReturnType<typeof newKnowledgeBase>>;
  let other: { name: string; key: string };
  /** A partner the fuzz may delete or give a new key. */
  let sacrificial: { name: string; key: string };
  let quotaKey: string;
  // The rewrite prompts are the service's, not a partner's: valid requests under the admin key
  // replace them, so they are put back for the test files that run after this one.
  const promptTypes = ['article', 'video', 'book'];
  const prompts: Record<string, string> = {};
  const validators = new Map<string, ValidateFunction>();
  const ajv = new Ajv({ strict: false, allErrors: true });

  before(async () => {
    storage = await fs.mkdtemp(path.join(os.tmpdir(), 'fuzz-'));
    upstream = await startOpenAiUpstream();
    const unlimited = '1000000';
    api = await startApi({
      STORAGE_DIR: storage,
      OPENAI_BASE_URL: upstream.baseUrl,
      OPENAI_API_KEY: 'fuzz-upstream-key',
      MAX_UPLOAD_BYTES: String(2 * 1024 * 1024),
      JSON_BODY_MAX_BYTES: String(1024 * 1024),
      FORM_TEXT_FIELD_MAX_BYTES: String(1024 * 1024),
      REQUESTS_PER_MINUTE_KNOWLEDGE_BASE: unlimited,
      REQUESTS_PER_MINUTE_MESSAGING: unlimited,
      REQUESTS_PER_MINUTE_TRANSCRIPTION: unlimited,
      REQUESTS_PER_MINUTE_SPEECH: unlimited,
      REQUESTS_PER_MINUTE_DIALOG_ANALYSIS: unlimited,
      REQUESTS_PER_MINUTE_VOICES: unlimited,
      TRANSCRIPTION_RATE_LIMIT_PER_MINUTE: '0',
      TRANSCRIPTION_CONCURRENCY_LIMIT: '0',
      VOICE_RATE_LIMIT_PER_MINUTE: '0',
      DIALOG_ANALYSIS_RATE_LIMIT_PER_MINUTE: '0',
    });
    const http = client(api.url);
    owner = await newKnowledgeBase(http);
    other = await newPartner(http);
    sacrificial = await newPartner(http);
    // A small amount: generation and speech requests stay cheap (most are refused by the quota).
    quotaKey = (await newQuotaKey(http, { quota_type: 'any', token_amount: 200, partner: owner.partner.name })).key;
    doc = (await http('GET', '/openapi.json')).body;
    const admin = testStack().adminApiKey;
    for (const type of promptTypes) prompts[type] = (await http('GET', `/api/prompts/${type}`, { key: admin })).body.prompt;
    ajv.addSchema({ $id: 'components', components: doc.components } as Schema);
    const styles: Record<string, string> = Object.fromEntries((doc.tags as Array<{ name: string; 'x-error-style': string }>).map((t) => [t.name, t['x-error-style']]));
    operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([p, item]) =>
      Object.entries(item).map(([method, op]) => ({ method: method.toUpperCase(), path: p, style: styles[op.tags[0]]!, access: op['x-access'], op })),
    );
  });
  after(async () => {
    if (api) {
      const http = client(api.url);
      for (const [type, prompt] of Object.entries(prompts)) await http('PUT', `/api/prompts/${type}`, { key: testStack().adminApiKey, json: { prompt } });
    }
    await api?.close();
    await upstream?.close();
    if (storage) await fs.rm(storage, { recursive: true, force: true });
  });

  // ---- the state a refused request must not change ------------------------------------------

  const volatileColumns = new Set(['last_used_at', 'updated_at']);
  let digestQuery: string | null = null;
  async function stateDigest(): Promise<string> {
    if (!digestQuery) {
      const tables = await api.deps.db.$queryRawUnsafe<Array<{ table_name: string }>>(
        `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'
           AND table_name NOT IN ('_prisma_migrations', 'rate_limit_schedules', 'rate_limit_reservations', 'speech_requests') ORDER BY table_name`,
      );
      const columns = await api.deps.db.$queryRawUnsafe<Array<{ table_name: string; column_name: string }>>(
        `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position`,
      );
      digestQuery = tables
        .map(({ table_name: t }) => {
          const cols = columns.filter((c) => c.table_name === t && !volatileColumns.has(c.column_name)).map((c) => `"${c.column_name}"`);
          return `SELECT '${t}' AS t, count(*)::text || ':' || coalesce(md5(string_agg(md5(row(${cols.join(', ')})::text), ',' ORDER BY md5(row(${cols.join(', ')})::text))), '') AS d FROM "${t}"`;
        })
        .join(' UNION ALL ');
    }
    const rows = await api.deps.db.$queryRawUnsafe<Array<{ t: string; d: string }>>(digestQuery);
    const uploads = await fs.readdir(path.join(storage, 'uploads')).catch(() => []);
    return JSON.stringify({ rows: rows.map((r) => `${r.t}=${r.d}`), uploads });
  }

  // ---- requests ---------------------------------------------------------------------------------

  function keyHeaders(kind: KeyKind, own: { key: string }): Record<string, string> {
    switch (kind) {
      case 'none':
        return {};
      case 'bad key':
        return { 'x-api-key': `pk_${crypto.randomBytes(32).toString('base64url')}` };
      case "another partner's key":
        return { 'x-api-key': other.key };
      case "the partner's own key":
        return { 'x-api-key': own.key };
      case 'the admin key':
        return { 'x-api-key': testStack().adminApiKey };
      case 'a quota key':
        return { authorization: `Bearer ${quotaKey}` };
    }
  }

  const parametersOf = (op: any, where: 'path' | 'query') => ((op.parameters ?? []) as Array<{ name: string; in: string; required: boolean; schema: Schema }>).filter((p) => p.in === where);

  /** JSON, multipart or urlencoded: what a body of this operation may be sent as. */
  const mediaTypes = (op: any): string[] => Object.keys(op.requestBody?.content ?? {});

  function formBody(values: Record<string, unknown>, schema: Schema, files: Array<{ field: string; name: string; content: Buffer }>, multipart: boolean): { body: BodyInit; headers: Record<string, string> } {
    const text = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v) ?? '');
    if (!multipart) {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(values)) for (const item of Array.isArray(v) ? v : [v]) params.append(k, text(item));
      return { body: params.toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } };
    }
    const fd = new FormData();
    for (const [k, v] of Object.entries(values)) {
      if ((schema.properties?.[k] as Schema | undefined)?.format === 'binary') continue;
      for (const item of Array.isArray(v) ? v : [v]) fd.append(k, text(item));
    }
    for (const f of files) fd.append(f.field, new Blob([new Uint8Array(f.content)]), f.name);
    return { body: fd, headers: {} };
  }

  /** The files of a multipart body: every binary field of the schema gets small content. */
  const fileFields = (schema: Schema) =>
    Object.entries((schema.properties ?? {}) as Record<string, Schema>)
      .filter(([, s]) => s.format === 'binary' || s.items?.format === 'binary')
      .map(([name]) => name);

  function pathFor(o: Operation, values: Record<string, string>): string {
    // A lone surrogate cannot travel in a URL (UTF-8): it goes as U+FFFD, as a browser would send it.
    return o.path.replace(/\{([^{}]+)\}/g, (_, name: string) => encodeURIComponent(Buffer.from(values[name] ?? 'x', 'utf8').toString('utf8')));
  }

  /** A valid request of the operation: the auth matrix's. */
  function validRequest(o: Operation, kind: KeyKind, own: { name: string; key: string }, rng: number): Built {
    const params: Record<string, string> = {};
    for (const p of parametersOf(o.op, 'path')) params[p.name] = p.name === 'partner' ? own.name : p.name === 'kb' ? owner.kb : String(fc.sample(sample(p.schema, 'valid'), { seed: rng, numRuns: 1 })[0] ?? 'x');
    const query = new URLSearchParams();
    for (const p of parametersOf(o.op, 'query').filter((q) => q.required)) query.set(p.name, String(fc.sample(sample(p.schema, 'valid'), { seed: rng, numRuns: 1 })[0]));
    const headers = keyHeaders(kind, own);
    let body: BodyInit | undefined;
    const types = mediaTypes(o.op);
    if (types.includes('application/json')) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(fc.sample(sample(o.op.requestBody.content['application/json'].schema, 'valid'), { seed: rng, numRuns: 1 })[0]);
    } else if (types.includes('multipart/form-data')) {
      const schema = o.op.requestBody.content['multipart/form-data'].schema as Schema;
      const values = fc.sample(sample({ ...schema, properties: Object.fromEntries(Object.entries(schema.properties ?? {}).filter(([k]) => !fileFields(schema).includes(k))) }, 'valid'), { seed: rng, numRuns: 1 })[0] as Record<string, unknown>;
      const built = formBody(values ?? {}, schema, fileFields(schema).map((field) => ({ field, name: 'note.txt', content: Buffer.from('a short note') })), true);
      body = built.body;
      Object.assign(headers, built.headers);
    }
    const q = query.toString();
    return { method: o.method, url: `${pathFor(o, params)}${q ? `?${q}` : ''}`, headers, body, describe: `${o.method} ${o.path} with ${kind}` };
  }

  /** Any request of the operation: valid, boundary or malformed in every part, under any key kind. */
  function arbitraryRequest(o: Operation): fc.Arbitrary<Built> {
    const pathParams = parametersOf(o.op, 'path');
    const queryParams = parametersOf(o.op, 'query');
    // Every kind, but mostly those the route lets in: the requests are to reach its handler.
    const weightOf = (k: KeyKind) => (expectedAuth(o.access, k) === 401 || expectedAuth(o.access, k) === 403 ? 1 : 6);
    const kind = fc.oneof(...keyKinds.map((k) => ({ weight: weightOf(k), arbitrary: fc.constant(k) })));
    const pathValue = (p: { name: string; schema: Schema }) =>
      fc.oneof(
        { weight: 3, arbitrary: p.name === 'partner' ? fc.constantFrom(...partnerNames) : p.name === 'kb' ? fc.constant(owner.kb) : sample(p.schema, 'valid').map(String) },
        { weight: 2, arbitrary: sample(p.schema, 'boundary').map((v) => String(v).slice(0, 4000) || 'empty') },
      );
    // The partner endpoints that replace a key or delete a partner never name the owner: the fuzz keeps its key.
    const partnerNames = o.path.startsWith('/api/partners/{partner}') && o.method !== 'GET' ? [sacrificial.name, 'no-such-partner'] : [owner.partner.name, other.name, 'no-such-partner'];
    const params = fc.record(Object.fromEntries(pathParams.map((p) => [p.name, pathValue(p)])) as Record<string, fc.Arbitrary<string>>);
    const query = fc.record(
      Object.fromEntries(queryParams.map((p) => [p.name, fc.option(fc.oneof(sample(p.schema, 'valid'), sample(p.schema, 'boundary'), sample(p.schema, 'malformed')), { nil: undefined })])),
      { requiredKeys: [] },
    );
    const extraQuery = fc.option(fc.tuple(fc.string({ minLength: 1, maxLength: 10 }), fc.string({ maxLength: 30 })), { nil: undefined });
    const types = mediaTypes(o.op);
    const jsonSchema = o.op.requestBody?.content?.['application/json']?.schema as Schema | undefined;
    const formSchema = o.op.requestBody?.content?.['multipart/form-data']?.schema as Schema | undefined;
    type Body = { body?: BodyInit; headers: Record<string, string>; what: string };
    const bodies: Array<fc.Arbitrary<Body>> = [fc.constant({ headers: {}, what: 'no body' })];
    const asJson = (v: unknown): Body => ({ body: JSON.stringify(v) ?? 'null', headers: { 'content-type': 'application/json' }, what: 'JSON' });
    bodies.push(
      fc.constantFrom<Body>(
        { body: '{"unterminated": ', headers: { 'content-type': 'application/json' }, what: 'malformed JSON' },
        { body: 'not json at all', headers: { 'content-type': 'application/json' }, what: 'text as JSON' },
        { body: `${'['.repeat(100_000)}1${']'.repeat(100_000)}`, headers: { 'content-type': 'application/json' }, what: 'JSON 100,000 levels deep' },
        { body: 'a=1&b=2', headers: { 'content-type': 'text/plain' }, what: 'text/plain' },
        { body: '--x\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n', headers: { 'content-type': 'multipart/form-data; boundary=y' }, what: 'multipart with the wrong boundary' },
        { body: 'x'.repeat(2 * 1024 * 1024), headers: { 'content-type': 'application/json' }, what: 'JSON over the size limit' },
      ),
    );
    if (jsonSchema) bodies.push(fc.oneof(sample(jsonSchema, 'valid'), sample(jsonSchema, 'boundary'), sample(jsonSchema, 'malformed')).map(asJson));
    if (formSchema) {
      const files = fileFields(formSchema);
      const fields = { ...formSchema, properties: Object.fromEntries(Object.entries(formSchema.properties ?? {}).filter(([k]) => !files.includes(k))) };
      const fileArb = fc.array(
        fc.record({
          field: fc.oneof(fc.constantFrom(...(files.length ? files : ['file'])), fc.constantFrom('unknown', 'files[]', '')),
          name: fc.oneof(fc.constantFrom('note.txt', '../../etc/passwd', 'a\u0000b.pdf', 'x'.repeat(300) + '.txt', '.txt', 'voice.mp3', 'archive.zip', 'doc.docx'), fc.string({ maxLength: 20 })),
          content: fc.oneof(fc.uint8Array({ maxLength: 512 }).map((a) => Buffer.from(a)), fc.constantFrom(Buffer.from('%PDF-1.4\n%%EOF'), Buffer.from('PK\u0005\u0006' + '\u0000'.repeat(18)), Buffer.from('ID3\u0003\u0000'), Buffer.alloc(0))),
        }),
        { maxLength: 3 },
      );
      bodies.push(
        fc
          .tuple(fc.oneof(sample(fields, 'valid'), sample(fields, 'boundary'), sample(fields, 'malformed')), fileArb, fc.boolean())
          .map(([values, fs, multipart]) => {
            const v = values && typeof values === 'object' && !Array.isArray(values) ? (values as Record<string, unknown>) : { value: values };
            const built = formBody(v, formSchema, fs.filter((f) => f.field !== ''), multipart || fs.length > 0);
            return { ...built, what: multipart || fs.length > 0 ? `multipart (${fs.length} files)` : 'urlencoded' };
          }),
      );
    }
    if (!types.length) bodies.push(fc.constant({ body: '{"unexpected":"body"}', headers: { 'content-type': 'application/json' }, what: 'a body where none is taken' }));
    return fc.tuple(kind, params, query, extraQuery, fc.oneof(...bodies)).map(([k, p, q, extra, b]) => {
      const search = new URLSearchParams();
      for (const [name, value] of Object.entries(q)) if (value !== undefined) search.set(name, typeof value === 'string' ? value : JSON.stringify(value) ?? '');
      if (extra) search.set(extra[0], extra[1]);
      const s = search.toString();
      const headers = { ...keyHeaders(k, owner.partner), ...b.headers };
      const canHaveBody = o.method !== 'GET' && o.method !== 'HEAD';
      return { method: o.method, url: `${pathFor(o, p)}${s ? `?${s}` : ''}`, headers, body: canHaveBody ? b.body : undefined, describe: `${o.method} ${o.path} with ${k}, ${canHaveBody ? b.what : 'no body'}` };
    });
  }

  async function send(r: Built): Promise<{ status: number; body: unknown; contentType: string }> {
    const res = await fetch(api.url + r.url, { method: r.method, headers: r.headers, body: r.body, redirect: 'manual' });
    const contentType = res.headers.get('content-type') ?? '';
    const buf = Buffer.from(await res.arrayBuffer());
    let body: unknown = null;
    if (contentType.includes('json')) {
      try {
        body = JSON.parse(buf.toString('utf8'));
      } catch {
        body = buf.toString('utf8');
      }
    }
    return { status: res.status, body, contentType };
  }

  /** The schema an error answer of the operation must match: its own declaration for that status, else its interface's. */
  function errorValidator(o: Operation, status: number): ValidateFunction {
    const key = `${o.method} ${o.path} ${status}`;
    let v = validators.get(key);
    if (!v) {
      const declared = o.op.responses?.[String(status)]?.content?.['application/json']?.schema as Schema | undefined;
      const validation = status === 422 && ['transcription', 'speech', 'dialog'].includes(o.style);
      const style = validation ? 'validation' : o.style;
      const interfaceSchema = { $ref: `components#/components/schemas/Error_${style}` };
      const schema = declared && !declared.$ref ? { anyOf: [declared, interfaceSchema] } : interfaceSchema;
      v = ajv.compile(schema);
      validators.set(key, v);
    }
    return v;
  }

  /** Answers by status (FUZZ_STATS=1 prints them): how deep the generated requests reach. */
  const statuses = new Map<number, number>();
  after(() => {
    if (process.env.FUZZ_STATS) console.log('fuzz answers by status:', JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0]))));
  });

  async function check(o: Operation, r: Built, expectAuth?: 401 | 403 | 'allowed' | 'not 401') {
    const before = await stateDigest();
    const res = await send(r);
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    const where = `${r.describe} (${r.url.slice(0, 200)}) answered ${res.status} ${JSON.stringify(res.body)?.slice(0, 300)}`;
    const declares501 = res.status === 501 && o.op.responses?.['501'];
    assert.ok(res.status < 500 || declares501, `no 5xx: ${where}`);
    // 431: Node's HTTP parser refuses a request line or headers over 16 KiB before any interface sees it.
    if (res.status >= 400 && res.status < 500 && res.status !== 431) {
      assert.ok(res.contentType.includes('application/json'), `an error is JSON: ${where}`);
      const validate = errorValidator(o, res.status);
      assert.ok(validate(res.body), `the error has the ${o.style} shape: ${where}: ${ajv.errorsText(validate.errors)}`);
      assert.equal(await stateDigest(), before, `a refused request changed nothing: ${where}`);
    }
    if (expectAuth === 401 || expectAuth === 403) assert.equal(res.status, expectAuth, where);
    if (expectAuth === 'allowed') assert.ok(res.status !== 401 && res.status !== 403, where);
    if (expectAuth === 'not 401') assert.notEqual(res.status, 401, where);
    return res.status;
  }

  it('knows every operation of the document: its interface\'s error style and its access level', () => {
    assert.ok(operations.length > 60, `${operations.length} operations`);
    const knownStyles = new Set(['detail', 'messaging', 'transcription', 'speech', 'dialog']);
    for (const o of operations) {
      assert.ok(knownStyles.has(o.style), `${o.method} ${o.path}: error style ${o.style}`);
      for (const kind of keyKinds) expectedAuth(o.access, kind);
      assert.ok(o.op.responses, `${o.method} ${o.path} has responses`);
    }
  });

  it('the auth matrix: every operation under every key kind answers as its access level says, and a refusal changes nothing', async () => {
    let rows = 0;
    for (const [i, o] of operations.entries()) {
      // Allowed requests may change or delete what they name: they get a partner of their own.
      const fresh = await newPartner(client(api.url));
      for (const kind of keyKinds) {
        const expected = expectedAuth(o.access, kind);
        const own = expected === 'allowed' || expected === 'not 401' ? fresh : owner.partner;
        await check(o, validRequest(o, kind, own, SEED + i), expected);
        rows++;
      }
    }
    assert.equal(rows, operations.length * keyKinds.length, 'a row for every operation and key kind');
  });

  it(`fuzzes every operation (${RUNS_PER_OPERATION} runs each, seed ${SEED}): never a 5xx, always the interface's error shape, nothing changed by a refusal`, async () => {
    for (const [i, o] of operations.entries()) {
      await fc.assert(
        fc.asyncProperty(arbitraryRequest(o), async (r) => {
          await check(o, r);
        }),
        { seed: SEED + i, numRuns: RUNS_PER_OPERATION, endOnFailure: true },
      );
    }
  });
});
