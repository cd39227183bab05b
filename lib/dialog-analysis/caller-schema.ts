import { formatNames } from 'ajv-formats/dist/formats.js';
import type { AjvError, Dialect, SchemaSandbox } from './schema-sandbox.js';

/**
 * The caller's `profile_schema` and `feedback_schema`, in one of two forms:
 *
 * - map form (the spec's; its error path `input.profile_schema.<name>.type` implies it):
 *   `{"<field>": <JSON Schema of that field>, ...}`. Each entry is an object whose `type` is a
 *   string naming a JSON type. The profile then has exactly these fields, all required.
 * - full form: a JSON Schema whose root `type` is the string "object", e.g. `{type: "object",
 *   properties: {...}, required: [...]}`, so that fields can be optional. Told apart by the root
 *   `type` being a string, which a map entry never is (entries are objects).
 *
 * Dialect: draft-07, or 2020-12 when the full form's root says so in `$schema`.
 */
export interface CallerSchema {
  form: 'map' | 'full';
  dialect: Dialect;
  /** The schema answers are validated against (the map form composed into an object schema). */
  schema: Record<string, unknown>;
}

export interface FieldError {
  field: string;
  message: string;
}

export const jsonTypes = ['string', 'number', 'integer', 'boolean', 'object', 'array', 'null'] as const;
const dialects: Record<string, Dialect> = {
  'http://json-schema.org/draft-07/schema#': 'draft-07',
  'http://json-schema.org/draft-07/schema': 'draft-07',
  'https://json-schema.org/draft-07/schema#': 'draft-07',
  'https://json-schema.org/draft-07/schema': 'draft-07',
  'https://json-schema.org/draft/2020-12/schema': '2020-12',
  'https://json-schema.org/draft/2020-12/schema#': '2020-12',
};
/** Keywords whose values are data, not schemas: nothing inside them is checked as a schema. */
const dataKeywords = new Set(['enum', 'const', 'default', 'examples']);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The form, dialect and validation schema of one caller schema, or what is wrong with its shape. */
export function normalizeCallerSchema(where: string, raw: Record<string, unknown>): { schema: CallerSchema } | { errors: FieldError[] } {
  if (typeof raw.type === 'string') {
    const errors: FieldError[] = [];
    if (raw.type !== 'object') errors.push({ field: `${where}.type`, message: 'must be "object" (or give a map of field names to the JSON Schema of each field)' });
    let dialect: Dialect = 'draft-07';
    if (raw.$schema !== undefined) {
      const named = typeof raw.$schema === 'string' ? dialects[raw.$schema] : undefined;
      if (named) dialect = named;
      else errors.push({ field: `${where}.$schema`, message: 'names an unsupported dialect; use draft-07 or 2020-12, or omit it' });
    }
    return errors.length ? { errors } : { schema: { form: 'full', dialect, schema: raw } };
  }
  const errors: FieldError[] = [];
  for (const [name, entry] of Object.entries(raw)) {
    const field = `${where}.${name}`;
    if (!isObject(entry)) errors.push({ field, message: `must be an object (the JSON Schema of field "${name}")` });
    else if (entry.type === undefined) errors.push({ field: `${field}.type`, message: 'is required' });
    else if (typeof entry.type !== 'string') errors.push({ field: `${field}.type`, message: 'must be a string' });
    else if (!(jsonTypes as readonly string[]).includes(entry.type)) errors.push({ field: `${field}.type`, message: `must be one of: ${jsonTypes.join(', ')}` });
  }
  if (errors.length) return { errors };
  return { schema: { form: 'map', dialect: 'draft-07', schema: { type: 'object', properties: raw, required: Object.keys(raw), additionalProperties: false } } };
}

/**
 * The request path of a place in the validation schema, given as JSON-pointer segments: in the map
 * form `/properties/<name>/...` is the caller's `<where>.<name>....`.
 */
export function schemaField(where: string, form: CallerSchema['form'], segments: string[]): string {
  const rest = form === 'map' && segments[0] === 'properties' ? segments.slice(1) : segments;
  return [where, ...rest].join('.');
}

const pointerSegments = (pointer: string) =>
  pointer
    .split('/')
    .slice(1)
    .map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'));

/** The value a local `$ref` (`#`, `#/a/b`) points at, or undefined. */
function resolvePointer(root: unknown, ref: string): unknown {
  if (ref === '#') return root;
  if (!ref.startsWith('#/')) return undefined;
  let node: unknown = root;
  for (const raw of pointerSegments(ref.slice(1))) {
    let segment: string;
    try {
      segment = decodeURIComponent(raw);
    } catch {
      return undefined;
    }
    if (Array.isArray(node) && /^\d+$/.test(segment)) node = node[Number(segment)];
    else if (isObject(node) && Object.hasOwn(node, segment)) node = node[segment];
    else return undefined;
  }
  return node;
}

/**
 * Checks ajv does not make (or makes only by throwing, without saying where), done on the event
 * loop because each is linear in the schema's size: patterns that are not regular expressions,
 * formats ajv does not know, and `$ref`s that do not resolve inside the schema (nothing is ever
 * fetched). The request's nesting depth is already bounded (request.ts), so recursion is safe.
 */
export function preWalk(where: string, caller: CallerSchema): FieldError[] {
  const errors: FieldError[] = [];
  const root = caller.schema;
  const visit = (node: unknown, segments: string[]) => {
    if (typeof node !== 'object' || node === null) return;
    if (Array.isArray(node)) {
      node.forEach((item, i) => visit(item, [...segments, String(i)]));
      return;
    }
    for (const [key, value] of Object.entries(node)) {
      const at = () => schemaField(where, caller.form, [...segments, key]);
      if (key === 'pattern' && typeof value === 'string') {
        const problem = regexProblem(value);
        if (problem) errors.push({ field: at(), message: `is not a valid regular expression: ${problem}` });
      } else if (key === 'patternProperties' && isObject(value)) {
        for (const p of Object.keys(value)) {
          const problem = regexProblem(p);
          if (problem) errors.push({ field: `${at()}.${p}`, message: `is not a valid regular expression: ${problem}` });
        }
      } else if (key === 'format' && typeof value === 'string') {
        if (!(formatNames as string[]).includes(value)) errors.push({ field: at(), message: `names an unknown format ${JSON.stringify(value)} (known: ${formatNames.join(', ')})` });
      } else if (key === '$ref' && typeof value === 'string') {
        if (resolvePointer(root, value) === undefined) {
          errors.push({ field: at(), message: `cannot be resolved: ${JSON.stringify(value)} (only references inside the schema, such as "#/definitions/name", are allowed)` });
        }
      }
      if (!dataKeywords.has(key)) visit(value, [...segments, key]);
    }
  };
  visit(root, []);
  return errors;
}

function regexProblem(pattern: string): string | null {
  try {
    // Building a RegExp parses it; it never backtracks.
    new RegExp(pattern, 'u');
    return null;
  } catch (err) {
    // "Invalid regular expression: /(/u: Unterminated group": the reason is after the last colon.
    const message = (err as Error).message;
    return message.slice(message.lastIndexOf(': ') + 2);
  }
}

/**
 * ajv's meta-schema errors as request fields. ajv reports one mistake several times at one place
 * (for `type: 5`: not one of the type names, not an array, and neither of the two), so errors are
 * grouped by place and the group's combinator error is dropped.
 */
export function metaSchemaErrors(where: string, caller: CallerSchema, errors: AjvError[]): FieldError[] {
  const byPath = new Map<string, AjvError[]>();
  for (const e of errors) {
    const list = byPath.get(e.instancePath) ?? [];
    list.push(e);
    byPath.set(e.instancePath, list);
  }
  const out: FieldError[] = [];
  for (const [path, group] of byPath) {
    const segments = pointerSegments(path);
    const field = schemaField(where, caller.form, segments);
    if (segments.at(-1) === 'type' && group.some((e) => e.keyword === 'anyOf' || e.keyword === 'enum')) {
      out.push({ field, message: `must be a JSON type name (${jsonTypes.join(', ')}) or an array of them` });
      continue;
    }
    const messages = [...new Set(group.filter((e) => e.keyword !== 'anyOf' && e.keyword !== 'oneOf').map((e) => e.message ?? e.keyword))];
    out.push({ field, message: `is not valid JSON Schema: ${(messages.length ? messages : ['must match the JSON Schema meta-schema']).join('; ')}` });
  }
  return out;
}

/**
 * The full check of one caller schema: its shape, the pre-walk, then (in the sandbox) ajv's
 * meta-schema validation and a compile. Answers the errors, empty when the schema is usable.
 */
export async function checkCallerSchema(sandbox: SchemaSandbox, where: string, raw: Record<string, unknown>, timeoutMs: number): Promise<{ schema: CallerSchema | null; errors: FieldError[] }> {
  const normalized = normalizeCallerSchema(where, raw);
  if ('errors' in normalized) return { schema: null, errors: normalized.errors };
  const caller = normalized.schema;
  const walked = preWalk(where, caller);
  if (walked.length) return { schema: null, errors: walked };
  const result = await sandbox.run({ op: 'check', dialect: caller.dialect, schema: caller.schema });
  if ('schemaErrors' in result) return { schema: null, errors: metaSchemaErrors(where, caller, result.schemaErrors) };
  if ('compileError' in result) {
    const e = result.compileError;
    const message = e.missingRef
      ? `could not be compiled: the reference ${JSON.stringify(e.missingRef)} cannot be resolved (only references inside the schema are allowed)`
      : `could not be compiled: ${e.message}`;
    return { schema: null, errors: [{ field: where, message }] };
  }
  if ('timedOut' in result) return { schema: null, errors: [{ field: where, message: `could not be compiled within ${seconds(timeoutMs)}` }] };
  if ('crashed' in result) return { schema: null, errors: [{ field: where, message: `could not be compiled: ${result.crashed}` }] };
  return { schema: caller, errors: [] };
}

export const seconds = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000} second${ms === 1000 ? '' : 's'}` : `${ms} ms`);
