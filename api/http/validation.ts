import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { badRequest } from '../../lib/errors.js';

export type JsonSchema = Record<string, unknown>;

// JSON bodies are validated as sent; path, query and form fields arrive as strings, so those are
// coerced to the schema's types (a form's "character_limit=5" becomes 5).
const strict = new Ajv({ allErrors: true, useDefaults: true, strict: false });
const coercing = new Ajv({ allErrors: true, useDefaults: true, coerceTypes: true, strict: false });
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => void;
addFormats(strict);
addFormats(coercing);

const compiledStrict = new WeakMap<JsonSchema, ValidateFunction>();
const compiledCoercing = new WeakMap<JsonSchema, ValidateFunction>();

function validatorFor(schema: JsonSchema, coerce: boolean): ValidateFunction {
  const cache = coerce ? compiledCoercing : compiledStrict;
  let fn = cache.get(schema);
  if (!fn) {
    fn = (coerce ? coercing : strict).compile(schema);
    cache.set(schema, fn);
  }
  return fn;
}

function describe(where: string, errors: ErrorObject[]): string {
  return errors
    .map((e) => {
      const field = [where, ...e.instancePath.split('/').filter(Boolean)].join('.');
      if (e.keyword === 'required') return `${where}.${(e.params as { missingProperty: string }).missingProperty} is required`;
      if (e.keyword === 'additionalProperties') return `${field}.${(e.params as { additionalProperty: string }).additionalProperty} is not allowed`;
      if (e.keyword === 'enum') return `${field} must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.join(', ')}`;
      return `${field} ${e.message}`;
    })
    .join('; ');
}

/** Paths of strings that contain U+0000, which PostgreSQL text cannot hold and no field needs. */
function nulPaths(value: unknown, at: string, out: string[] = []): string[] {
  if (typeof value === 'string') {
    if (value.includes('\u0000')) out.push(at);
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => nulPaths(v, `${at}.${i}`, out));
  } else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) nulPaths(v, `${at}.${k}`, out);
  }
  return out;
}

/** Validates (and for coerced sources, converts in place) one part of a request; throws a 400 AppError. */
export function validate<T>(where: 'body' | 'query' | 'path' | 'form', schema: JsonSchema, value: unknown, coerce: boolean): T {
  const withNul = nulPaths(value, where);
  if (withNul.length) throw badRequest(withNul.map((f) => `${f} must not contain NUL characters`).join('; '));
  const fn = validatorFor(schema, coerce);
  if (!fn(value)) throw badRequest(describe(where, fn.errors ?? []), { errors: fn.errors?.map((e) => ({ path: e.instancePath, message: e.message })) });
  return value as T;
}
