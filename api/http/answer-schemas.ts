import type { JsonSchema } from './validation.js';

/**
 * Builders of the schemas of answers (the `responses` of a route, in the OpenAPI document). An
 * object lists every member it answers and requires all but the `optional` ones, so a generated
 * client sees each member's type, and the test suite's response check (test/support/answer-check.ts)
 * reports a member that is answered but not declared here.
 */
export const text: JsonSchema = { type: 'string' };
export const integer: JsonSchema = { type: 'integer' };
export const number: JsonSchema = { type: 'number' };
export const boolean: JsonSchema = { type: 'boolean' };
export const dateTime: JsonSchema = { type: 'string', format: 'date-time' };
export const uuid: JsonSchema = { type: 'string', format: 'uuid' };
export const texts: JsonSchema = { type: 'array', items: text };

/** The schema, or null. */
export function nullable(schema: JsonSchema): JsonSchema {
  const { type, enum: values, ...rest } = schema as { type?: string | string[]; enum?: unknown[] } & JsonSchema;
  if (typeof type === 'string') return { ...rest, type: [type, 'null'], ...(values ? { enum: [...values, null] } : {}) };
  return { anyOf: [schema, { type: 'null' }] };
}

export const arrayOf = (items: JsonSchema, description?: string): JsonSchema => ({ type: 'array', items, ...(description ? { description } : {}) });

/** An object with these members, all required but the `optional` ones. */
/**
 * An object with these members, all required but the `optional` ones. `open`: it may carry members
 * not listed here (an answer relayed from a provider, OpenAI's objects), and says so.
 */
export function object(properties: Record<string, JsonSchema>, options: { optional?: string[]; description?: string; open?: boolean } = {}): JsonSchema {
  const optional = new Set(options.optional ?? []);
  return {
    type: 'object',
    ...(options.description ? { description: options.description } : {}),
    required: Object.keys(properties).filter((k) => !optional.has(k)),
    properties,
    ...(options.open ? { additionalProperties: true } : {}),
  };
}

/** A map from names the data chooses (languages, statuses) to values of one schema. */
export const mapOf = (values: JsonSchema, description?: string): JsonSchema => ({ type: 'object', additionalProperties: values, ...(description ? { description } : {}) });
