/**
 * Reading ajv's errors back to a person (a client of the API) or to a model (a dialog analysis's
 * next attempt): which field, and what is wrong with it.
 */
export interface SchemaError {
  keyword: string;
  instancePath: string;
  schemaPath: string;
  params: object;
  message?: string | null;
}

/** The field an error concerns, as path segments (a missing or unknown member included). */
export function schemaErrorField(e: SchemaError): string[] {
  const path = e.instancePath.split('/').slice(1).map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'));
  const params = e.params as { missingProperty?: string; additionalProperty?: string };
  if (e.keyword === 'required') return [...path, String(params.missingProperty)];
  if (e.keyword === 'additionalProperties') return [...path, String(params.additionalProperty)];
  return path;
}

/** Our patterns and formats in words, keyed `pattern:<regex>` / `format:<name>`. */
const words = new Map<string, string>();

/**
 * A `pattern` whose failure is told in words ("must be a partner name: ...") rather than as the
 * regular expression, which tells a reader nothing. Declare a pattern through this once, use it
 * in every schema.
 */
export function describedPattern(pattern: string, message: string): string {
  words.set(`pattern:${pattern}`, message);
  return pattern;
}

/** The same for a custom `format` (ajv.addFormat), whose default message only names it. */
export function describedFormat(format: string, message: string): string {
  words.set(`format:${format}`, message);
  return format;
}

/**
 * What is wrong with the field. `spell` writes an allowed value of an enum; `ourSchema: false` for
 * someone else's schema (a dialog analysis's caller), whose patterns are not ours to describe.
 */
export function schemaErrorMessage(e: SchemaError, { spell = String, ourSchema = true }: { spell?: (value: unknown) => string; ourSchema?: boolean } = {}): string {
  const params = e.params as { pattern?: string; format?: string };
  const described = !ourSchema ? undefined : e.keyword === 'pattern' ? words.get(`pattern:${params.pattern}`) : e.keyword === 'format' ? words.get(`format:${params.format}`) : undefined;
  if (described) return described;
  if (e.keyword === 'required') return 'is required';
  if (e.keyword === 'additionalProperties') return 'is not allowed';
  const allowed = (e.params as { allowedValues?: unknown }).allowedValues;
  if (e.keyword === 'enum' && Array.isArray(allowed)) return `must be one of ${allowed.map(spell).join(', ')}`;
  return e.message ?? `fails ${e.keyword}`;
}

/** "a", "a or b", "a, b or c". */
function orList(items: string[]): string {
  return items.length < 2 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} or ${items.at(-1)}`;
}

/**
 * ajv reports a value that fits none of an `anyOf`/`oneOf`'s alternatives with every alternative's
 * errors and a summary ("must be >= 0; must be null; must match a schema in anyOf"), which reads as
 * if the value had to satisfy all of them. What the sender meant is the alternative of the value's
 * own type: only its errors are kept ("must be >= 0"); a value of a type no alternative takes gets
 * one error naming the types ("must be integer or null"). Innermost alternatives first, so nested
 * ones are already simplified when their parent is.
 */
export function withoutRejectedAlternatives<E extends SchemaError>(errors: E[]): E[] {
  let list = errors;
  const combinators = errors.filter((e) => e.keyword === 'anyOf' || e.keyword === 'oneOf').sort((a, b) => b.schemaPath.length - a.schemaPath.length);
  for (const c of combinators) {
    const prefix = `${c.schemaPath}/`;
    // The same schema applies to each item of an array: an alternative's errors are those at its value.
    const atValue = (e: E) => e.instancePath === c.instancePath || e.instancePath.startsWith(`${c.instancePath}/`);
    const branchOf = (e: E) => (e.schemaPath.startsWith(prefix) && atValue(e) ? e.schemaPath.slice(prefix.length).split('/')[0]! : null);
    // A oneOf that more than one alternative matched: its summary says it all.
    if ((c.params as { passingSchemas?: number[] | null }).passingSchemas) {
      list = list.filter((e) => branchOf(e) === null);
      continue;
    }
    const branches = new Set(list.map(branchOf).filter((b) => b !== null));
    // The alternative's own type (or its own alternatives' types, simplified already) is not the value's.
    const ofOtherType = new Map<string, E>();
    for (const e of list) {
      const branch = branchOf(e);
      const own = [`${prefix}${branch}/type`, `${prefix}${branch}/anyOf`, `${prefix}${branch}/oneOf`];
      if (branch !== null && e.keyword === 'type' && e.instancePath === c.instancePath && own.includes(e.schemaPath)) ofOtherType.set(branch, e);
    }
    if (ofOtherType.size < branches.size) {
      list = list.filter((e) => e !== c && !ofOtherType.has(branchOf(e) ?? ''));
    } else {
      const types = [...new Set([...ofOtherType.values()].flatMap((t) => String((t.params as { type: string | string[] }).type).split(',')))];
      const merged: E = { ...c, keyword: 'type', params: { type: types }, message: `must be ${orList(types)}` };
      list = list.flatMap((e) => (e === c ? [merged] : branchOf(e) === null ? [e] : []));
    }
  }
  return list;
}
