import fc from 'fast-check';

/**
 * A small JSON-Schema sampler over fast-check, for the schemas this service publishes in
 * /openapi.json (types, enum/const, anyOf/oneOf, string length/pattern/format, number bounds,
 * array items and bounds, object properties/required/additionalProperties). Three kinds of value:
 * - `valid`: what the schema accepts;
 * - `boundary`: values at and just past each bound (lengths, numbers, item counts), empty and odd
 *   strings (NUL, lone surrogates, right-to-left marks, emoji, path traversal), huge strings;
 * - `malformed`: the wrong type anywhere, required members missing, unknown members, deep nesting.
 * Nothing here knows the service: the values come from the document alone.
 */
export type Schema = Record<string, any>;
export type Mode = 'valid' | 'boundary' | 'malformed';

const oddStrings = [
  '', ' ', '\u0000', 'a\u0000b', '\ud800', '\udfff', '\u202eevil', '😀'.repeat(3), '../../../../etc/passwd', '..%2F..%2Fetc', '%00', '%', '%ZZ',
  '<script>alert(1)</script>', "' OR 1=1 --", '${jndi:ldap://x}', '{{7*7}}', 'null', 'true', '-1', '1e309', 'NaN', '0x10', ' 42 ', 'A'.repeat(257), '\r\n\r\n',
];

const anyJson: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.string({ maxLength: 20 }),
    fc.constantFrom(...oddStrings),
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(fc.string({ maxLength: 8 }), tie('value'), { maxKeys: 3 }),
  ),
})).value;

/** A value nested `depth` levels deep (arrays in arrays). */
export const deeplyNested = (depth: number): unknown => JSON.parse(`${'['.repeat(depth)}1${']'.repeat(depth)}`);

const typesOf = (s: Schema): string[] => (s.type === undefined ? [] : [s.type].flat());

function patternString(pattern: string, maxLength?: number): fc.Arbitrary<string> {
  try {
    return fc.stringMatching(new RegExp(pattern)).filter((v) => maxLength === undefined || v.length <= maxLength);
  } catch {
    return fc.string();
  }
}

function validString(s: Schema): fc.Arbitrary<string> {
  const min = s.minLength ?? 0;
  const max = Math.min(s.maxLength ?? 64, min + 64);
  switch (s.format) {
    case 'uri':
      return fc.webUrl().filter((u) => u.length <= (s.maxLength ?? Infinity));
    case 'email':
      return fc.emailAddress();
    case 'uuid':
      return fc.uuid();
    case 'date-time':
      return fc.date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true }).map((d) => d.toISOString());
  }
  if (typeof s.pattern === 'string') return patternString(s.pattern, s.maxLength);
  // Readable words most of the time, any text some of the time.
  return fc.oneof(
    fc.stringMatching(/^[a-z][a-z0-9-]{0,30}$/).filter((v) => v.length >= min && v.length <= max),
    fc.string({ minLength: min, maxLength: max }),
  );
}

function boundaryString(s: Schema): fc.Arbitrary<string> {
  const lengths = [s.minLength, s.maxLength, s.maxLength !== undefined ? s.maxLength + 1 : undefined, s.minLength ? s.minLength - 1 : undefined].filter((n): n is number => typeof n === 'number' && n >= 0);
  return fc.oneof(
    fc.constantFrom(...oddStrings),
    ...(lengths.length ? [fc.constantFrom(...lengths).map((n) => 'x'.repeat(Math.min(n, 300_000)))] : []),
    fc.constant('y'.repeat(100_000)),
    fc.string({ unit: 'binary', maxLength: 40 }),
  );
}

function numberFor(s: Schema, integer: boolean, mode: Mode): fc.Arbitrary<number> {
  const min = s.minimum ?? (s.exclusiveMinimum !== undefined ? s.exclusiveMinimum + (integer ? 1 : 1e-6) : undefined);
  const max = s.maximum ?? (s.exclusiveMaximum !== undefined ? s.exclusiveMaximum - (integer ? 1 : 1e-6) : undefined);
  if (mode === 'boundary') {
    const edges = [min, max, min !== undefined ? min - 1 : undefined, max !== undefined ? max + 1 : undefined, 0, -1, Number.MAX_SAFE_INTEGER, 2 ** 53 + 2, 1e308, 0.5].filter((n): n is number => typeof n === 'number' && Number.isFinite(n));
    return fc.constantFrom(...edges);
  }
  const lo = min ?? -1000;
  const hi = max ?? Math.max(lo + 1000, 1000);
  return integer ? fc.integer({ min: Math.ceil(Math.max(lo, -(2 ** 31))), max: Math.floor(Math.min(hi, 2 ** 31)) }) : fc.double({ min: lo, max: hi, noNaN: true });
}

/** A value of `schema` of the given kind; `depth` stops recursion. */
export function sample(schema: Schema | undefined, mode: Mode, depth = 0): fc.Arbitrary<unknown> {
  const s = schema ?? {};
  if (mode === 'malformed') {
    return fc.oneof(anyJson, sample(s, 'valid', depth).chain((v) => (v && typeof v === 'object' && !Array.isArray(v) ? malformedObject(s, v as Record<string, unknown>) : fc.constant(v))));
  }
  if ('const' in s) return fc.constant(s.const);
  if (Array.isArray(s.enum)) return mode === 'boundary' ? fc.oneof(fc.constantFrom(...s.enum), fc.constantFrom(...oddStrings)) : fc.constantFrom(...s.enum);
  const alternatives = (s.anyOf ?? s.oneOf) as Schema[] | undefined;
  if (alternatives?.length) return fc.oneof(...alternatives.map((a) => sample({ ...s, anyOf: undefined, oneOf: undefined, ...a }, mode, depth)));
  const types = typesOf(s);
  const type = types.length ? types : s.properties ? ['object'] : ['string'];
  return fc.oneof(...type.map((t) => sampleType(s, t, mode, depth)));
}

function sampleType(s: Schema, type: string, mode: Mode, depth: number): fc.Arbitrary<unknown> {
  switch (type) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return mode === 'boundary' ? fc.constantFrom(true, false, 'true', 'false', 'yes', 1, 0) : fc.boolean();
    case 'integer':
      return numberFor(s, true, mode);
    case 'number':
      return numberFor(s, false, mode);
    case 'string':
      return mode === 'boundary' ? boundaryString(s) : validString(s);
    case 'array': {
      if (depth > 4) return fc.constant([]);
      const min = s.minItems ?? 0;
      const max = Math.min(s.maxItems ?? 4, min + 4);
      if (mode === 'boundary') {
        const counts = [min, s.maxItems, s.maxItems !== undefined ? s.maxItems + 1 : undefined, min - 1].filter((n): n is number => typeof n === 'number' && n >= 0);
        return fc.constantFrom(...counts).chain((n) => fc.array(sample(s.items, 'valid', depth + 1), { minLength: Math.min(n, 2000), maxLength: Math.min(n, 2000) }));
      }
      return fc.array(sample(s.items, 'valid', depth + 1), { minLength: min, maxLength: max });
    }
    case 'object': {
      if (depth > 4) return fc.constant({});
      const properties = (s.properties ?? {}) as Record<string, Schema>;
      const required = new Set<string>(s.required ?? []);
      const shape: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [name, p] of Object.entries(properties)) {
        shape[name] = mode === 'boundary' ? fc.oneof(sample(p, 'valid', depth + 1), sample(p, 'boundary', depth + 1)) : sample(p, 'valid', depth + 1);
      }
      const record = fc.record(shape, { requiredKeys: [...required].filter((k) => k in shape) });
      if (Object.keys(properties).length === 0 && s.additionalProperties !== false) return fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), anyJson, { maxKeys: 3 });
      return record;
    }
    default:
      return anyJson;
  }
}

function malformedObject(s: Schema, valid: Record<string, unknown>): fc.Arbitrary<unknown> {
  const names = Object.keys((s.properties ?? {}) as object);
  return fc.oneof(
    // a member of the wrong type
    names.length ? fc.tuple(fc.constantFrom(...names), anyJson).map(([k, v]) => ({ ...valid, [k]: v })) : fc.constant(valid),
    // a required member missing
    (s.required?.length ? fc.constantFrom(...(s.required as string[])) : fc.constant('')).map((k) => {
      const copy = { ...valid };
      delete copy[k];
      return copy;
    }),
    // an unknown member
    fc.tuple(fc.string({ minLength: 1, maxLength: 12 }), anyJson).map(([k, v]) => ({ ...valid, [`${k}_unknown`]: v })),
    // prototype keys
    fc.constant({ ...valid, __proto__: { polluted: true }, constructor: { prototype: { polluted: true } } }),
    // deep nesting inside a member
    names.length ? fc.constantFrom(...names).map((k) => ({ ...valid, [k]: deeplyNested(1_000) })) : fc.constant(deeplyNested(1_000)),
  );
}
