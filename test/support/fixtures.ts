import { testStack } from './stack.js';
import type { client } from './system.js';

type Http = ReturnType<typeof client>;
let counter = 0;

/** A unique name per call, so tests never collide on unique constraints. */
export const unique = (prefix: string) => `${prefix}-${process.pid}-${Date.now().toString(36)}-${++counter}`;

/** Creates a partner through the admin API and returns its name and key. */
export async function newPartner(http: Http, settings: Record<string, string> = {}) {
  const name = unique('partner');
  const res = await http('POST', `/api/partners/${name}`, { key: testStack().adminApiKey, form: settings });
  if (res.status !== 201) throw new Error(`creating partner failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { name, key: res.body.api_key as string };
}

/** A partner with one knowledge base and one regular folder. */
export async function newKnowledgeBase(http: Http) {
  const partner = await newPartner(http);
  const kb = unique('kb');
  const folder = 'notes';
  const k = await http('POST', `/api/knowledgebases/${partner.name}`, { key: partner.key, form: { name: kb } });
  if (k.status !== 201) throw new Error(`creating KB failed: ${k.status} ${JSON.stringify(k.body)}`);
  const f = await http('POST', `/api/folders/${partner.name}/${kb}`, { key: partner.key, form: { name: folder } });
  if (f.status !== 201) throw new Error(`creating folder failed: ${f.status} ${JSON.stringify(f.body)}`);
  return { partner, kb, folder };
}
