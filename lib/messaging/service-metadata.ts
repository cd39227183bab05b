import { Ajv, type ErrorObject } from 'ajv';
import type { Db } from '../platform/db.js';
import { AppError, badRequest } from '../platform/errors.js';
import { partnerNamePattern } from '../partners/partners.js';
import { schemaErrorField, schemaErrorMessage, withoutRejectedAlternatives } from '../platform/schema-errors.js';
import type { QuotaKeyPrincipal } from './quota-keys.js';

/**
 * `metadata.service`: the character a request speaks as. Validated here, applied by the service
 * (prompt into the instructions, knowledge retrieval) and stripped before the model call.
 *
 *   { character: { name, prompt?, knowledge_base?: { partner, kb, max_results? } } }
 *
 * A character with `knowledge_base` is knowledge-enabled. The quota key's partner scope must be
 * that partner (a key without a partner may use no knowledge base).
 */
export const serviceMetadataSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['character'],
  properties: {
    character: {
      type: 'object',
      additionalProperties: false,
      required: ['name'],
      properties: {
        name: { type: 'string', minLength: 1, maxLength: 100, description: 'Display name of the character' },
        prompt: { type: 'string', maxLength: 50_000, description: 'The character prompt, added to the system instructions' },
        knowledge_base: {
          type: 'object',
          additionalProperties: false,
          required: ['partner', 'kb'],
          description: 'Knowledge base searched for context (knowledge-enabled character)',
          properties: {
            partner: { type: 'string', pattern: partnerNamePattern },
            kb: { type: 'string', minLength: 1, maxLength: 200 },
            max_results: { type: 'integer', minimum: 1, maximum: 12, default: 5, description: 'Sources injected into the instructions' },
          },
        },
      },
    },
  },
} as const;

export interface ServiceMetadata {
  character: {
    name: string;
    prompt?: string;
    knowledge_base?: { partner: string; kb: string; max_results?: number };
  };
}

export interface Character {
  name: string;
  prompt: string | null;
  knowledge: { partner: string; kb: string; knowledgeBaseId: string; maxResults: number } | null;
}

const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: false });
const validateMetadata = ajv.compile(serviceMetadataSchema);

const describe = (errors: ErrorObject[]) =>
  withoutRejectedAlternatives(errors)
    .map((e) => `${['metadata.service', ...schemaErrorField(e)].join('.')} ${schemaErrorMessage(e)}`)
    .join('; ');

/**
 * Splits a request's metadata into the service's part and the rest (forwarded to the model only
 * when something is left). Throws 400 for an invalid service object.
 */
export function takeServiceMetadata(metadata: unknown): { service: ServiceMetadata | null; rest: Record<string, unknown> | undefined } {
  if (metadata === undefined || metadata === null) return { service: null, rest: undefined };
  if (typeof metadata !== 'object' || Array.isArray(metadata)) throw badRequest('metadata must be an object');
  const { service, ...rest } = metadata as Record<string, unknown>;
  const remaining = Object.keys(rest).length ? rest : undefined;
  if (service === undefined) return { service: null, rest: remaining };
  const copy = structuredClone(service);
  if (!validateMetadata(copy)) throw badRequest(`invalid metadata.service: ${describe(validateMetadata.errors ?? [])}`);
  return { service: copy as ServiceMetadata, rest: remaining };
}

/** Resolves the character: its knowledge base must exist and lie in the key's partner scope. */
export async function resolveCharacter(db: Db, key: QuotaKeyPrincipal, service: ServiceMetadata | null): Promise<Character | null> {
  if (!service) return null;
  const { name, prompt, knowledge_base: kbRef } = service.character;
  if (!kbRef) return { name, prompt: prompt ?? null, knowledge: null };
  if (!key.partnerId || key.partnerName !== kbRef.partner) {
    throw new AppError('forbidden', `this key may not use knowledge bases of partner ${JSON.stringify(kbRef.partner)}`);
  }
  const kb = await db.knowledgeBase.findUnique({ where: { partnerId_name: { partnerId: key.partnerId, name: kbRef.kb } } });
  if (!kb || kb.deletionRequestedAt) {
    throw badRequest(`character validation failed: knowledge base ${JSON.stringify(kbRef.kb)} does not exist for partner ${JSON.stringify(kbRef.partner)}`);
  }
  return { name, prompt: prompt ?? null, knowledge: { partner: kbRef.partner, kb: kbRef.kb, knowledgeBaseId: kb.id, maxResults: kbRef.max_results ?? 5 } };
}
