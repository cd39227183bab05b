import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { badRequest } from '../../lib/platform/errors.js';
import { describedFormat, describedPattern, schemaErrorField, schemaErrorMessage, withoutRejectedAlternatives } from '../../lib/platform/schema-errors.js';
import { hasControlCharacters } from '../../lib/platform/text.js';

export type JsonSchema = Record<string, unknown>;

// JSON bodies are validated as sent; path, query and form fields arrive as strings, so those are
// coerced to the schema's types (a form's "character_limit=5" becomes 5).
const strict = new Ajv({ allErrors: true, useDefaults: true, strict: false });
const coercing = new Ajv({ allErrors: true, useDefaults: true, coerceTypes: true, strict: false });
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => void;
addFormats(strict);
addFormats(coercing);
const decimalAmountMessage = 'must be a decimal amount: at most 20 digits, and at most 8 after the point';
/** An exact decimal amount (USD, stored as DECIMAL(30,8)): up to 20 digits and 8 decimals. */
export const decimalAmountPattern = describedPattern('^\\d{1,20}(?:\\.\\d{1,8})?$', decimalAmountMessage);
// The same amount as a JSON number: written with 8 decimals it must still be the same number and fit,
// so 0.123456789 or 1e-9 are refused instead of being rounded when stored, and 1e25 instead of
// overflowing the column, while 0.00000005 (which JavaScript prints as 5e-8) is taken. The sign is
// the schema's `minimum`'s to judge.
const decimalAmount = new RegExp(decimalAmountPattern);
const isDecimalAmountNumber = (n: number) => {
  const fixed = Math.abs(n).toFixed(8);
  return Number(fixed) === Math.abs(n) && decimalAmount.test(fixed);
};
export const decimalAmountFormat = describedFormat('decimal-8', decimalAmountMessage);
for (const ajv of [strict, coercing]) ajv.addFormat(decimalAmountFormat, { type: 'number', validate: isDecimalAmountNumber });
/**
 * `x-no-control-characters: true` on a string: a name a person reads (a knowledge base, a folder, a
 * document) holds no C0 control character or DEL: a line break in a name breaks every listing,
 * log line and file name it appears in. An extension keyword, so the OpenAPI document may carry it.
 */
const noControlCharacters = function check(enabled: boolean, value: string): boolean {
  if (!enabled || !hasControlCharacters(value)) return true;
  (check as unknown as { errors: Partial<ErrorObject>[] }).errors = [{ keyword: 'x-no-control-characters', message: 'must not contain control characters', params: {} }];
  return false;
};
for (const ajv of [strict, coercing]) ajv.addKeyword({ keyword: 'x-no-control-characters', type: 'string', schemaType: 'boolean', errors: true, validate: noControlCharacters });

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

/**
 * Each failure as the field it concerns (its dotted path inside the part, e.g.
 * `input.profile_schema.age.type`; the part itself, e.g. `body`, for the whole) and a sentence.
 */
function failures(where: string, errors: ErrorObject[]): Array<{ field: string; message: string }> {
  return errors.map((e) => {
    const path = schemaErrorField(e);
    return { field: path.length ? path.join('.') : where, message: schemaErrorMessage(e) };
  });
}

/** The 400 of an invalid part: a sentence for `{detail}` interfaces, `fieldErrors` for the 422 ones. */
function invalid(where: string, reported: ErrorObject[]) {
  const errors = withoutRejectedAlternatives(reported);
  const list = failures(where, errors);
  // Null prototype: a field named `valueOf` or `__proto__` is a field like any other.
  const fieldErrors: Record<string, string[]> = Object.create(null);
  for (const f of list) (fieldErrors[f.field] ??= []).push(f.message);
  const sentence = list.map((f) => `${f.field === where ? where : `${where}.${f.field}`} ${f.message}`).join('; ');
  return badRequest(sentence, { errors: errors.map((e) => ({ path: e.instancePath, message: e.message })), fieldErrors });
}

/**
 * Paths of strings that contain U+0000, which PostgreSQL text cannot hold and no field needs.
 * Iterative (depth-first, in document order), and a path is spelled out only for a hit: a body
 * nested thousands of levels deep must neither overflow the stack nor build thousands of long paths.
 */
function nulPaths(value: unknown, at: string): string[] {
  type Place = { key: string; parent: Place | null };
  const spell = (p: Place): string => {
    const keys: string[] = [];
    for (let q: Place | null = p; q; q = q.parent) keys.push(q.key);
    return keys.reverse().join('.');
  };
  const out: string[] = [];
  const stack: Array<[unknown, Place]> = [[value, { key: at, parent: null }]];
  while (stack.length) {
    const [v, place] = stack.pop()!;
    if (typeof v === 'string') {
      if (v.includes('\u0000')) out.push(spell(place));
    } else if (v && typeof v === 'object') {
      const entries = Array.isArray(v) ? v.map((item, i) => [String(i), item] as const) : Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) stack.push([entries[i]![1], { key: entries[i]![0], parent: place }]);
    }
  }
  return out;
}

const trueWords = new Set(['true', '1', 'yes', 'on', 't', 'y']);
const falseWords = new Set(['false', '0', 'no', 'off', 'f', 'n']);

/**
 * A boolean form or query field is text: the words Python's and HTML's clients send for a flag
 * (`True`, `1`, `yes`, `on`; `False`, `0`, `no`, `off`, any case, as FastAPI reads them) become the
 * boolean, and an empty one counts as not sent (its default). Any other text is still a 400.
 */
function readTextBooleans(schema: JsonSchema, value: unknown): void {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return;
  const fields = value as Record<string, unknown>;
  for (const [name, field] of Object.entries((schema.properties ?? {}) as Record<string, JsonSchema>)) {
    const text = fields[name];
    const types = ([] as unknown[]).concat(field?.type);
    if (typeof text !== 'string' || !types.includes('boolean')) continue;
    const word = text.trim().toLowerCase();
    if (word === '') delete fields[name];
    else if (trueWords.has(word)) fields[name] = true;
    else if (falseWords.has(word)) fields[name] = false;
  }
}

/** Validates (and for coerced sources, converts in place) one part of a request; throws a 400 AppError. */
export function validate<T>(where: 'body' | 'query' | 'path' | 'form', schema: JsonSchema, value: unknown, coerce: boolean): T {
  const withNul = nulPaths(value, where);
  if (withNul.length) {
    const fieldErrors = Object.fromEntries(withNul.map((f) => [f.slice(where.length + 1) || where, ['must not contain NUL characters']]));
    throw badRequest(withNul.map((f) => `${f} must not contain NUL characters`).join('; '), { fieldErrors });
  }
  if (coerce) readTextBooleans(schema, value);
  const fn = validatorFor(schema, coerce);
  if (!fn(value)) throw invalid(where, fn.errors ?? []);
  return value as T;
}
