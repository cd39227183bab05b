import type http from 'node:http';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

/**
 * Every answer the API gives in a test is checked against the OpenAPI document it serves, so the
 * document cannot drift from the behaviour (issue #50):
 * - a success answer must have a documented status and media type, and a JSON one must match its
 *   schema, with no member the schema does not declare (objects are closed for the check unless
 *   the document says `additionalProperties`);
 * - a JSON error must match the schema of its status, else its interface's error body (the same
 *   rule as test/abuse/fuzz.test.ts).
 * A mismatch fails the test during which it was answered (a root afterEach hook).
 */

type Schema = Record<string, unknown>;
interface Operation {
  tags?: string[];
  responses?: Record<string, { content?: Record<string, { schema?: Schema }> }>;
}
interface OpenApiDocument {
  tags: Array<{ name: string; 'x-error-style'?: string }>;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
}

/** Each mismatch, and an excerpt of the first body that showed it. */
const mismatches: Array<{ what: string; body?: string }> = [];

/** Mismatches found since the last call (and forgets them). */
export function takeAnswerMismatches(): string[] {
  // A test that polls repeats the same answer: each mismatch once, with how often it came.
  const seen = new Map<string, { body?: string; times: number }>();
  for (const m of mismatches.splice(0)) {
    const s = seen.get(m.what);
    if (s) s.times++;
    else seen.set(m.what, { body: m.body, times: 1 });
  }
  return [...seen].map(([what, s]) => `${what}${s.times > 1 ? ` (${s.times} times)` : ''}${s.body ? `\n    body: ${s.body}` : ''}`);
}

/** A copy in which every object that lists its members allows no other (its additionalProperties left as the document has them otherwise). */
export function closedObjects(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closedObjects);
  if (!schema || typeof schema !== 'object') return schema;
  const out: Schema = {};
  for (const [k, v] of Object.entries(schema)) {
    // allOf branches describe parts of one object: closing one would refuse the others' members.
    out[k] = k === 'allOf' || k === 'enum' || k === 'const' || k === 'examples' ? v : k === 'properties' ? Object.fromEntries(Object.entries(v as Schema).map(([p, s]) => [p, closedObjects(s)])) : closedObjects(v);
  }
  if (out.properties && !('additionalProperties' in out) && !('unevaluatedProperties' in out) && !('patternProperties' in out)) out.unevaluatedProperties = false;
  return out;
}

function mediaTypeOf(res: http.ServerResponse): string {
  // Headers given to writeHead alone (event streams) are only in the header block Node wrote.
  const header = res.getHeader('content-type') ?? /^content-type:[ \t]*(\S[^\r\n]*)$/im.exec((res as { _header?: string | null })._header ?? '')?.[1] ?? '';
  return String(header).split(';')[0]!.trim().toLowerCase();
}

/** The document's operations as matchers, most specific path first (fewer parameters win, as the routes are declared). */
function matchers(document: OpenApiDocument) {
  const out: Array<{ method: string; path: string; pattern: RegExp; params: number; op: Operation }> = [];
  for (const [path, methods] of Object.entries(document.paths)) {
    const source = path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^{}]+\}/g, '[^/]+');
    for (const [method, op] of Object.entries(methods)) out.push({ method: method.toUpperCase(), path, pattern: new RegExp(`^${source}$`), params: (path.match(/\{/g) ?? []).length, op });
  }
  return out.sort((a, b) => a.params - b.params);
}

/**
 * Wraps a request listener (the Express app): each answer it sends is checked when it finishes.
 * `document` is the one the app serves at /openapi.json.
 */
export function checkingAnswers(listener: http.RequestListener, document: OpenApiDocument): http.RequestListener {
  const ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: true });
  (addFormatsModule as unknown as (a: Ajv2020) => void)(ajv);
  ajv.addSchema({ $id: 'components', components: document.components });
  const operations = matchers(document);
  const styles = new Map(document.tags.map((t) => [t.name, t['x-error-style'] ?? 'detail']));
  const validators = new Map<string, ValidateFunction>();
  const validator = (key: string, schema: () => unknown) => {
    let v = validators.get(key);
    if (!v) validators.set(key, (v = ajv.compile(schema() as Schema)));
    return v;
  };
  // The document's own references (#/components/...) resolve against the registered components.
  const refsToComponents = (s: unknown): unknown => JSON.parse(JSON.stringify(s).replaceAll('"$ref":"#/components/', '"$ref":"components#/components/'));

  function check(method: string, url: string, res: http.ServerResponse, hasBody: boolean, body: Buffer) {
    const path = url.split('?')[0]!;
    const found = operations.find((o) => o.method === method && o.pattern.test(path));
    if (!found) return; // not a documented route: /metrics, /openapi.json, an unknown path's 404
    const status = res.statusCode;
    const mediaType = mediaTypeOf(res);
    const where = `${method} ${found.path} answered ${status} (${mediaType || 'no content type'})`;
    const declared = found.op.responses?.[String(status)];
    if (status >= 200 && status < 300) {
      if (!declared) return void mismatches.push({ what: `${where}: the document has no ${status} for this operation` });
      // A success answer that declares no body at all is reported by test/api/openapi-types.test.ts.
      if (!hasBody || !declared.content) return;
      const content = declared.content;
      // A declared media range (`*/*`, `text/*`) covers the types in it.
      const covered = (range: string) => range === mediaType || range === '*/*' || (range.endsWith('/*') && mediaType.startsWith(range.slice(0, -1)));
      if (!Object.keys(content).some(covered)) return void mismatches.push({ what: `${where}: the document declares ${Object.keys(content).join(', ') || 'no body'} for it` });
      if (mediaType !== 'application/json') return;
      const schema = content[mediaType]!.schema;
      if (!schema) return void mismatches.push({ what: `${where}: no schema for its JSON body` });
      const validate = validator(`${method} ${found.path} ${status}`, () => closedObjects(refsToComponents(schema)));
      validateBody(validate, where, body);
      return;
    }
    if (status >= 400 && mediaType === 'application/json') {
      const style = styles.get(found.op.tags?.[0] ?? '') ?? 'detail';
      const validation = status === 422 && ['transcription', 'speech', 'dialog'].includes(style);
      const validate = validator(`${method} ${found.path} ${status} error`, () => {
        const own = declared?.content?.['application/json']?.schema;
        const interfaceSchema = { $ref: `components#/components/schemas/Error_${validation ? 'validation' : style}` };
        return own && !own.$ref ? { anyOf: [refsToComponents(own), interfaceSchema] } : interfaceSchema;
      });
      validateBody(validate, `${where}, an error`, body);
    }
  }

  function validateBody(validate: ValidateFunction, where: string, body: Buffer) {
    let value: unknown;
    try {
      value = JSON.parse(body.toString('utf8'));
    } catch {
      return void mismatches.push({ what: `${where}: the body is not JSON` });
    }
    if (!validate(value)) {
      const errors = (validate.errors ?? []).slice(0, 5).map((e) => `${e.instancePath || '/'} ${e.message}${e.keyword === 'unevaluatedProperties' ? ` (${JSON.stringify(e.params)})` : ''}`);
      mismatches.push({ what: `${where}: does not match the document: ${errors.join('; ')}`, body: body.toString('utf8').slice(0, 300) });
    }
  }

  return (req, res) => {
    // As the client sent it: routers rewrite req.url while they handle the request.
    const url = req.url ?? '/';
    const chunks: Buffer[] = [];
    let hasBody = false;
    // Only JSON bodies are kept (audio, archives and event streams are checked by media type).
    const keep = (chunk: unknown, encoding?: unknown) => {
      if (chunk === undefined || chunk === null || typeof chunk === 'function' || (chunk as { length: number }).length === 0) return;
      hasBody = true;
      if (mediaTypeOf(res) !== 'application/json') return;
      chunks.push(typeof chunk === 'string' ? Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8') : Buffer.from(chunk as Uint8Array));
    };
    const write = res.write.bind(res) as (...args: unknown[]) => boolean;
    const end = res.end.bind(res) as (...args: unknown[]) => http.ServerResponse;
    res.write = ((...args: unknown[]) => (keep(args[0], args[1]), write(...args))) as typeof res.write;
    res.end = ((...args: unknown[]) => (keep(args[0], args[1]), end(...args))) as typeof res.end;
    res.once('finish', () => {
      if (req.method === 'HEAD' || req.method === 'OPTIONS') return;
      try {
        check(req.method ?? 'GET', url, res, hasBody, Buffer.concat(chunks));
      } catch (err) {
        mismatches.push({ what: `${req.method} ${url}: the answer could not be checked: ${(err as Error).message}` });
      }
    });
    listener(req, res);
  };
}

// A root hook: mocha's interface is global while the test files load, which is when this module
// is first imported (through test/support/system.ts). Scripts outside mocha have no afterEach.
// The error is the test's (Hook#error), so the test fails and the tests after it still run.
if (typeof afterEach === 'function') {
  afterEach(function answersMatchTheDocument(this: Mocha.Context) {
    const found = takeAnswerMismatches();
    if (!found.length) return;
    const err = new Error(`answers that do not match the OpenAPI document:\n${found.join('\n')}`);
    const hook = this.test as (Mocha.Runnable & { error?(err: Error): void }) | undefined;
    if (hook?.error) hook.error(err);
    else throw err;
  });
}
