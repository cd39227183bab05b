import type { Services } from '../services.js';
import { providerCalls, toUpstreamError, upstreamClient, type ModelList } from './upstream.js';

/**
 * `GET /v3/models` and `/v3/models/{model}`: the provider's own model list, as it sends it. Clients
 * of OpenAI-compatible APIs read it to check a key and to offer models (the official SDK's
 * `models.list()`, chat front ends). Requests are forwarded with any model name, so the list hides
 * nothing the gateway would refuse. It costs no quota.
 */

/** How long a process answers the list it fetched last: front ends ask on every page load. */
const MODEL_LIST_CACHE_MS = 60_000;
const cached = new WeakMap<object, { at: number; list: ModelList }>();

export async function listModels(deps: Pick<Services, 'config'>, signal: AbortSignal): Promise<ModelList> {
  const client = upstreamClient(deps.config);
  const hit = cached.get(client);
  if (hit && Date.now() - hit.at < MODEL_LIST_CACHE_MS) return hit.list;
  try {
    const list = await providerCalls.models(client, signal);
    cached.set(client, { at: Date.now(), list });
    return list;
  } catch (err) {
    throw toUpstreamError(err, 'list');
  }
}

export async function readModel(deps: Pick<Services, 'config'>, id: string, signal: AbortSignal): Promise<Record<string, unknown>> {
  try {
    return await providerCalls.model(upstreamClient(deps.config), id, signal);
  } catch (err) {
    throw toUpstreamError(err, id);
  }
}
