import type { ChatResponseFormat } from '../providers/llm.js';
import type { CallerSchema } from './caller-schema.js';

/**
 * The schema the model is given for structured outputs (`response_format: json_schema`, strict),
 * built from the caller's two schemas. Strict mode accepts a subset of JSON Schema (OpenAI's
 * documented rules, which vLLM and llama.cpp also accept): an object root, every property
 * required, `additionalProperties: false` everywhere, no unknown keywords. So this "skeleton"
 * keeps the structure only: types, properties, items, enums, anyOf and descriptions. An optional
 * property becomes a required one that may be null (and a null the caller's schema does not allow
 * is dropped from the answer again, see `dropOptionalNulls`); value constraints (pattern, format,
 * minimum, lengths, ...) are left out, which only loosens the skeleton: every answer is still
 * validated against the caller's complete schemas, which the prompt also states.
 *
 * A schema whose structure strict mode cannot express (free-form maps, tuples, recursion, schemas
 * without a type, ...) gets no skeleton: the model is then asked in JSON mode with the schemas in
 * the prompt, and ajv has the same final say.
 */
class Unrepresentable extends Error {}

/** A property made required-but-nullable: where it is (`*` for array items), and whether the caller allows null there. */
export interface OptionalSite {
  path: string[];
  key: string;
  acceptsNull: boolean;
}

export type StructuredOutput =
  | { representable: true; responseFormat: ChatResponseFormat; optional: OptionalSite[] }
  | { representable: false; reason: string };

const limits = { depth: 10, properties: 5000, enumValues: 1000 };
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

interface Context {
  root: Record<string, unknown>;
  optional: OptionalSite[];
  counts: { properties: number; enumValues: number };
}

function resolveLocal(root: unknown, ref: string): unknown {
  if (ref === '#') return root;
  if (!ref.startsWith('#/')) return undefined;
  let node: unknown = root;
  for (const raw of ref.slice(2).split('/')) {
    const segment = decodeURIComponent(raw.replaceAll('~1', '/').replaceAll('~0', '~'));
    node = isObject(node) ? node[segment] : Array.isArray(node) ? node[Number(segment)] : undefined;
    if (node === undefined) return undefined;
  }
  return node;
}

function skeleton(node: unknown, ctx: Context, path: string[], depth: number, refs: string[]): Record<string, unknown> {
  const where = path.join('.');
  if (depth > limits.depth) throw new Unrepresentable(`${where}: nested more than ${limits.depth} levels deep`);
  if (!isObject(node)) throw new Unrepresentable(`${where}: a boolean schema`);
  if (typeof node.$ref === 'string') {
    if (refs.includes(node.$ref)) throw new Unrepresentable(`${where}: a recursive $ref`);
    const target = resolveLocal(ctx.root, node.$ref);
    if (target === undefined) throw new Unrepresentable(`${where}: an unresolved $ref`);
    return skeleton(target, ctx, path, depth, [...refs, node.$ref]);
  }
  for (const k of ['patternProperties', 'prefixItems', 'unevaluatedProperties', 'unevaluatedItems', 'additionalItems']) {
    if (node[k] !== undefined) throw new Unrepresentable(`${where}: ${k}`);
  }
  const out: Record<string, unknown> = {};
  if (typeof node.description === 'string') out.description = node.description;
  if (Array.isArray(node.allOf)) {
    if (node.allOf.length === 1 && node.type === undefined && node.properties === undefined) return { ...out, ...skeleton(node.allOf[0], ctx, path, depth, refs) };
    throw new Unrepresentable(`${where}: allOf`);
  }
  const branches = Array.isArray(node.anyOf) ? node.anyOf : Array.isArray(node.oneOf) ? node.oneOf : null;
  if (branches) {
    // oneOf becomes anyOf: looser, and ajv still checks "exactly one".
    out.anyOf = branches.map((b) => skeleton(b, ctx, path, depth + 1, refs));
    return out;
  }
  const values = node.const !== undefined ? [node.const] : Array.isArray(node.enum) ? node.enum : null;
  if (values) {
    if (values.some((v) => typeof v === 'object' && v !== null)) throw new Unrepresentable(`${where}: an enum of objects or arrays`);
    ctx.counts.enumValues += values.length;
    if (ctx.counts.enumValues > limits.enumValues) throw new Unrepresentable(`more than ${limits.enumValues} enum values`);
    out.enum = values;
  }
  if (node.type === undefined) {
    if (values) return out;
    throw new Unrepresentable(`${where}: no type`);
  }
  const types = Array.isArray(node.type) ? node.type : [node.type];
  if (types.length > 1 && types.some((t) => t === 'object' || t === 'array')) throw new Unrepresentable(`${where}: a type list with object or array`);
  out.type = node.type;
  if (types[0] === 'object') {
    const properties = node.properties;
    if (!isObject(properties) || !Object.keys(properties).length) throw new Unrepresentable(`${where}: an object without properties`);
    if (node.additionalProperties !== undefined && node.additionalProperties !== false) throw new Unrepresentable(`${where}: additionalProperties`);
    const required = new Set(Array.isArray(node.required) ? (node.required as unknown[]) : []);
    for (const r of required) if (typeof r !== 'string' || !Object.hasOwn(properties, r)) throw new Unrepresentable(`${where}: required ${String(r)} has no schema`);
    const props: Record<string, unknown> = {};
    for (const [key, schema] of Object.entries(properties)) {
      if (++ctx.counts.properties > limits.properties) throw new Unrepresentable(`more than ${limits.properties} properties`);
      const s = skeleton(schema, ctx, [...path, key], depth + 1, refs);
      if (required.has(key)) props[key] = s;
      else {
        props[key] = { anyOf: [s, { type: 'null' }] };
        ctx.optional.push({ path, key, acceptsNull: acceptsNull(schema, ctx.root, 0) });
      }
    }
    out.properties = props;
    out.required = Object.keys(props);
    out.additionalProperties = false;
  } else if (types[0] === 'array') {
    if (!isObject(node.items)) throw new Unrepresentable(`${where}: an array without one items schema`);
    out.items = skeleton(node.items, ctx, [...path, '*'], depth + 1, refs);
  }
  return out;
}

/** Whether a caller's property schema allows null (then a null the model sends is kept). */
function acceptsNull(schema: unknown, root: unknown, depth: number): boolean {
  if (!isObject(schema) || depth > 20) return true;
  if (typeof schema.$ref === 'string') return acceptsNull(resolveLocal(root, schema.$ref), root, depth + 1);
  const branches = [schema.anyOf, schema.oneOf].find(Array.isArray) as unknown[] | undefined;
  if (branches) return branches.some((b) => acceptsNull(b, root, depth + 1));
  if (schema.const !== undefined) return schema.const === null;
  if (Array.isArray(schema.enum)) return schema.enum.includes(null);
  if (schema.type === undefined) return true;
  return Array.isArray(schema.type) ? schema.type.includes('null') : schema.type === 'null';
}

/** The `json_schema` response format for these two schemas, or why strict mode cannot express them. */
export function structuredOutput(profile: CallerSchema, feedback: CallerSchema): StructuredOutput {
  const optional: OptionalSite[] = [];
  try {
    const counts = { properties: 0, enumValues: 0 };
    const p = skeleton(profile.schema, { root: profile.schema, optional, counts }, ['profile'], 1, []);
    const f = skeleton(feedback.schema, { root: feedback.schema, optional, counts }, ['feedback'], 1, []);
    const schema = { type: 'object', additionalProperties: false, required: ['profile', 'feedback'], properties: { profile: p, feedback: f } };
    return { representable: true, optional, responseFormat: { type: 'json_schema', json_schema: { name: 'dialog_analysis', strict: true, schema } } };
  } catch (err) {
    if (err instanceof Unrepresentable) return { representable: false, reason: err.message };
    throw err;
  }
}

/**
 * Removes the nulls strict mode forced into optional properties, where the caller's schema does
 * not allow null (there, "absent" is what the model meant). Changes `answer` in place.
 */
export function dropOptionalNulls(answer: Record<string, unknown>, optional: OptionalSite[]): void {
  const visit = (value: unknown, path: string[], site: OptionalSite) => {
    if (!path.length) {
      if (isObject(value) && value[site.key] === null) delete value[site.key];
      return;
    }
    const [head, ...rest] = path as [string, ...string[]];
    if (head === '*') {
      if (Array.isArray(value)) for (const item of value) visit(item, rest, site);
    } else if (isObject(value)) visit(value[head], rest, site);
  };
  for (const site of optional) if (!site.acceptsNull) visit(answer, site.path, site);
}
