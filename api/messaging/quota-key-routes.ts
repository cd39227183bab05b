import { defineRoute, type RouteDefinition } from '../http/route.js';
import type { ApiDeps } from '../deps.js';
import { createQuotaKey, listQuotaKeys, revokeQuotaKey, type CreateQuotaKeyRequest } from '../../lib/messaging/quota-keys.js';
import { createdQuotaKeyAnswer, createQuotaKeyBody, quotaKeyIdParams, quotaKeyObject } from './schemas.js';

/** Administration of messaging quota keys (administrator key; `{detail: "..."}` errors like /api). */
export function quotaKeyRoutes(deps: ApiDeps): RouteDefinition[] {
  return [
    defineRoute<unknown, unknown, CreateQuotaKeyRequest>({
      method: 'post', path: '/api/quota-keys', access: 'admin', summary: 'Create a messaging quota key',
      description: 'Answers 201 with the key object and `api_key`, the key itself, shown only here.',
      body: { type: 'json', schema: createQuotaKeyBody },
      responses: { 201: { description: 'Created', schema: createdQuotaKeyAnswer }, 400: { description: 'Invalid body or unknown partner' } },
      handler: async ({ body }) => ({ status: 201, body: await createQuotaKey(deps.db, body) }),
    }),
    defineRoute({
      method: 'get', path: '/api/quota-keys', access: 'admin', summary: 'List messaging quota keys (never the keys themselves)',
      responses: { 200: { description: 'Every key, oldest first, with usage', schema: { type: 'array', items: quotaKeyObject } } },
      handler: async () => ({ body: await listQuotaKeys(deps.db) }),
    }),
    defineRoute<{ id: string }>({
      method: 'delete', path: '/api/quota-keys/{id}', access: 'admin', summary: 'Revoke a messaging quota key',
      description: 'Immediate and final; the key then answers 401. The record stays (status `revoked`) for its usage history.',
      params: quotaKeyIdParams,
      responses: { 200: { description: 'The revoked key', schema: quotaKeyObject }, 404: { description: 'No such key' } },
      handler: async ({ params }) => ({ body: await revokeQuotaKey(deps.db, params.id) }),
    }),
  ];
}
