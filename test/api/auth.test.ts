import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { client, eventually, isolatedSystemEnv, startApi, type Call, type HttpResult, type RunningApi } from '../support/system.js';
import { newKnowledgeBase, newPartner, unique } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { stopChannelSources } from '../support/channels.js';

/**
 * Authentication and authorization of every knowledge-base endpoint (spec knowledge-base.md §5):
 * no key and an unknown key are 401, a valid key without access is 403, the partner's own key may
 * use `partner` endpoints but not admin ones, and the administrator key may use everything.
 * A rejected request changes nothing.
 */

type Http = ReturnType<typeof client>;
type Partner = { name: string; key: string };
type Credential = 'no key' | 'a bad key' | "another partner's key" | "the partner's own key" | 'the admin key';
type Access = 'none' | 'authenticated' | 'partner' | 'admin';

const credentials: Credential[] = ['no key', 'a bad key', "another partner's key", "the partner's own key", 'the admin key'];

/** What one request of the matrix needs: whose endpoint it is, the request and a no-change check. */
interface Prepared {
  owner: Partner;
  path: string;
  call?: Omit<Call, 'key'>;
  /** Run after a rejected request: the state the request would have changed is unchanged. */
  unchanged?: () => Promise<void>;
}

interface Endpoint {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  access: Access;
  /** Status of an allowed request. */
  ok: number;
  /** Rag search checks partner access in its body: other partners' keys get 403 there. */
  bodyScoped?: boolean;
  prepare: (credential: Credential) => Promise<Prepared>;
}

function expected(endpoint: Endpoint, credential: Credential): number {
  if (endpoint.access === 'none') return endpoint.ok;
  if (credential === 'no key' || credential === 'a bad key') return 401;
  if (credential === 'the admin key') return endpoint.ok;
  if (endpoint.access === 'admin') return 403;
  if (credential === "the partner's own key") return endpoint.ok;
  // another partner's key
  if (endpoint.access === 'partner' || endpoint.bodyScoped) return 403;
  return endpoint.ok;
}

const badKey = () => `pk_${crypto.randomBytes(32).toString('base64url')}`;

function assertDetail(res: HttpResult, status: number) {
  assert.equal(res.status, status, `expected ${status}, got ${res.status}: ${JSON.stringify(res.body)}`);
  assert.equal(typeof res.body, 'object', `error body is JSON: ${JSON.stringify(res.body)}`);
  assert.notEqual(res.body, null);
  assert.deepEqual(Object.keys(res.body), ['detail'], `error body is exactly {detail}: ${JSON.stringify(res.body)}`);
  assert.equal(typeof res.body.detail, 'string');
  assert.ok(res.body.detail.length > 0, 'detail is not empty');
}

describe('API authentication and authorization', function () {
  let api: RunningApi;
  let http: Http;
  let admin: string;
  // A partner with a knowledge base, a folder and one document; and a second, unrelated partner.
  let owner: Partner;
  let kb: string;
  let folder: string;
  let documentId: string;
  let other: Partner;
  // A database and task queue of its own: the admin's retry-failed and clear-orphans act on every
  // partner's documents, which in the lane's database would be other test files' documents.
  let isolated: Awaited<ReturnType<typeof isolatedSystemEnv>>;

  before(async () => {
    isolated = await isolatedSystemEnv('auth');
    api = await startApi(isolated.env);
    http = client(api.url);
    admin = testStack().adminApiKey;
    const fixture = await newKnowledgeBase(http);
    ({ partner: owner, kb, folder } = fixture);
    other = await newPartner(http);
    const doc = await http('POST', `/api/documents/${owner.name}/${kb}`, {
      key: owner.key,
      form: { type: 'file', folder, file: { name: 'seed.txt', content: 'The seed document of the auth tests.' } },
    });
    assert.equal(doc.status, 201, JSON.stringify(doc.body));
    documentId = doc.body.id;
  });
  after(async () => {
    // Allowed syncs started channel-source workflows; no later test wants them.
    if (api) await stopChannelSources(api.deps.temporal);
    await api?.close();
    await isolated?.drop();
  });

  const keyFor = (credential: Credential, p: Partner): string | null =>
    ({ 'no key': null, 'a bad key': badKey(), "another partner's key": other.key, "the partner's own key": p.key, 'the admin key': admin })[credential];

  const kbNames = async (partner: string) => {
    const res = await http('GET', `/api/knowledgebases/${partner}`, { key: admin });
    assert.equal(res.status, 200);
    return (res.body as Array<{ name: string }>).map((k) => k.name);
  };
  const folderNames = async (partner: string, kbName: string) => {
    const res = await http('GET', `/api/folders/${partner}/${kbName}`, { key: admin });
    assert.equal(res.status, 200);
    return res.body.folders as string[];
  };
  const partnerRecord = async (name: string) => http('GET', `/api/partners/${name}`, { key: admin });
  const documentCount = async () => {
    const row = await api.deps.db.knowledgeBase.findFirstOrThrow({ where: { name: kb, partner: { name: owner.name } } });
    return api.deps.db.document.count({ where: { knowledgeBaseId: row.id } });
  };
  /** A video-channel folder of the owner's KB, written as a synced source would be (no worker runs here). */
  const channelFolder = async () => {
    const row = await api.deps.db.knowledgeBase.findFirstOrThrow({ where: { name: kb, partner: { name: owner.name } } });
    const name = unique('channel');
    const f = await api.deps.db.folder.create({ data: { knowledgeBaseId: row.id, name, type: 'video_channel' } });
    const source = await api.deps.db.channelSource.create({
      data: { knowledgeBaseId: row.id, folderId: f.id, channelUrl: `@${name}`, aliasKind: 'handle', aliasKey: `handle:${name}`, status: 'synced', lastOutcome: 'synced', nextSyncAt: new Date(Date.now() + 86400_000) },
    });
    return { name, id: source.id };
  };
  /** A partner of its own, for endpoints that change or delete the partner. */
  const freshPartner = () => newPartner(http);

  const shared = (path: () => string, extra: Partial<Prepared> = {}) => async (): Promise<Prepared> => ({ owner, path: path(), ...extra });

  const endpoints: Endpoint[] = [
    { method: 'GET', path: '/api/content_types', access: 'none', ok: 200, prepare: shared(() => '/api/content_types') },
    { method: 'GET', path: '/api/auth/me', access: 'authenticated', ok: 200, prepare: shared(() => '/api/auth/me') },
    { method: 'GET', path: '/api/partners', access: 'authenticated', ok: 200, prepare: shared(() => '/api/partners') },
    { method: 'GET', path: '/api/partners/{partner}', access: 'admin', ok: 200, prepare: shared(() => `/api/partners/${owner.name}`) },
    {
      method: 'POST', path: '/api/partners/{partner}', access: 'admin', ok: 201,
      prepare: async (credential) => {
        // The allowed request creates a new partner. A rejected one names an existing partner (so
        // "its own key" exists) or a new name, and must neither create nor change any partner.
        if (credential === "the partner's own key") {
          const p = await freshPartner();
          return {
            owner: p,
            path: `/api/partners/${p.name}`,
            call: { form: { max_documents: '3' } },
            unchanged: async () => {
              const rec = await partnerRecord(p.name);
              assert.equal(rec.body.max_documents, 100000000);
              assert.equal((await http('GET', '/api/auth/me', { key: p.key })).status, 200, 'the existing key still works');
            },
          };
        }
        const name = unique('created');
        return {
          owner,
          path: `/api/partners/${name}`,
          call: { form: { max_documents: '3' } },
          unchanged: async () => assert.equal((await partnerRecord(name)).status, 404, 'no partner was created'),
        };
      },
    },
    {
      method: 'PUT', path: '/api/partners/{partner}', access: 'admin', ok: 200,
      prepare: async () => {
        const p = await freshPartner();
        return {
          owner: p,
          path: `/api/partners/${p.name}`,
          call: { form: { max_documents: '7', new_name: unique('renamed') } },
          unchanged: async () => {
            const rec = await partnerRecord(p.name);
            assert.equal(rec.status, 200, 'the partner keeps its name');
            assert.equal(rec.body.max_documents, 100000000);
          },
        };
      },
    },
    {
      method: 'DELETE', path: '/api/partners/{partner}', access: 'admin', ok: 200,
      prepare: async () => {
        const p = await freshPartner();
        return {
          owner: p,
          path: `/api/partners/${p.name}`,
          unchanged: async () => {
            assert.equal((await partnerRecord(p.name)).status, 200, 'the partner still exists');
            assert.equal((await http('GET', '/api/auth/me', { key: p.key })).status, 200, 'its key still works');
          },
        };
      },
    },
    {
      method: 'POST', path: '/api/partners/{partner}/regenerate-key', access: 'admin', ok: 200,
      prepare: async () => {
        const p = await freshPartner();
        return {
          owner: p,
          path: `/api/partners/${p.name}/regenerate-key`,
          unchanged: async () => assert.equal((await http('GET', '/api/auth/me', { key: p.key })).status, 200, 'the old key still works'),
        };
      },
    },
    { method: 'GET', path: '/api/knowledgebases/{partner}', access: 'partner', ok: 200, prepare: shared(() => `/api/knowledgebases/${owner.name}`) },
    {
      method: 'POST', path: '/api/knowledgebases/{partner}', access: 'partner', ok: 201,
      prepare: async () => {
        const name = unique('kb');
        return {
          owner,
          path: `/api/knowledgebases/${owner.name}`,
          call: { form: { name } },
          unchanged: async () => assert.ok(!(await kbNames(owner.name)).includes(name), 'no knowledge base was created'),
        };
      },
    },
    { method: 'GET', path: '/api/folders/{partner}/{kb}', access: 'partner', ok: 200, prepare: shared(() => `/api/folders/${owner.name}/${kb}`) },
    {
      method: 'POST', path: '/api/folders/{partner}/{kb}', access: 'partner', ok: 201,
      prepare: async () => {
        const name = unique('folder');
        return {
          owner,
          path: `/api/folders/${owner.name}/${kb}`,
          call: { form: { name } },
          unchanged: async () => assert.ok(!(await folderNames(owner.name, kb)).includes(name), 'no folder was created'),
        };
      },
    },
    {
      method: 'POST', path: '/api/documents/{partner}/{kb}', access: 'partner', ok: 201,
      prepare: async () => {
        const before = await documentCount();
        return {
          owner,
          path: `/api/documents/${owner.name}/${kb}`,
          call: { form: { type: 'file', folder, file: { name: 'note.txt', content: 'A short note about tide tables.' } } },
          unchanged: async () => assert.equal(await documentCount(), before, 'no document was created'),
        };
      },
    },
    { method: 'GET', path: '/api/document/{partner}/{kb}/{doc_id}', access: 'partner', ok: 200, prepare: shared(() => `/api/document/${owner.name}/${kb}/${documentId}`) },
    {
      method: 'POST', path: '/api/documents/{partner}/{kb}/batch', access: 'partner', ok: 200,
      prepare: async () => {
        const before = await documentCount();
        return { owner, path: `/api/documents/${owner.name}/${kb}/batch`, call: { json: { folder, urls: ['http://127.0.0.1:9/never-fetched-in-this-test'] } }, unchanged: async () => assert.equal(await documentCount(), before) };
      },
    },
    {
      method: 'POST', path: '/api/documents/{partner}/{kb}/files/batch', access: 'partner', ok: 200,
      prepare: async () => {
        const before = await documentCount();
        return { owner, path: `/api/documents/${owner.name}/${kb}/files/batch`, call: { form: { folder, files: { name: 'batch.txt', content: 'batch text' } } }, unchanged: async () => assert.equal(await documentCount(), before) };
      },
    },
    { method: 'GET', path: '/api/documents/{partner}/{kb}', access: 'partner', ok: 200, prepare: shared(() => `/api/documents/${owner.name}/${kb}`) },
    { method: 'GET', path: '/api/kb-data/{partner}/{kb}', access: 'partner', ok: 200, prepare: shared(() => `/api/kb-data/${owner.name}/${kb}`) },
    { method: 'GET', path: '/api/kb-stats/{partner}/{kb}', access: 'partner', ok: 200, prepare: shared(() => `/api/kb-stats/${owner.name}/${kb}`) },
    {
      method: 'POST', path: '/api/documents/{partner}/{kb}/empty', access: 'partner', ok: 201,
      prepare: async () => {
        const before = await documentCount();
        return { owner, path: `/api/documents/${owner.name}/${kb}/empty`, call: { form: { name: 'blank', folder, type: 'file' } }, unchanged: async () => assert.equal(await documentCount(), before) };
      },
    },
    ...(['name', 'type', 'url'] as const).map((field): Endpoint => ({
      method: 'PUT', path: `/api/documents/{partner}/{kb}/{doc_id}/${field}`, access: 'partner', ok: 200,
      prepare: async () => {
        const value = { name: unique('renamed'), type: 'url', url: `https://example.org/${unique('page')}` }[field];
        return {
          owner,
          path: `/api/documents/${owner.name}/${kb}/${documentId}/${field}`,
          call: { form: { [field]: value } },
          unchanged: async () => {
            const d = await http('GET', `/api/document/${owner.name}/${kb}/${documentId}`, { key: admin });
            if (field !== 'type') assert.notEqual(d.body[field], value, `${field} unchanged`);
          },
        };
      },
    })),
    {
      method: 'DELETE', path: '/api/documents/{partner}/{kb}/{doc_id}', access: 'partner', ok: 200,
      prepare: async () => {
        const d = await http('POST', `/api/documents/${owner.name}/${kb}/empty`, { key: admin, form: { name: 'to delete', folder, type: 'file' } });
        return {
          owner,
          path: `/api/documents/${owner.name}/${kb}/${d.body.id}`,
          unchanged: async () => assert.equal((await http('GET', `/api/document/${owner.name}/${kb}/${d.body.id}`, { key: admin })).body.deletion_requested_at, null),
        };
      },
    },
    {
      method: 'DELETE', path: '/api/folders/{partner}/{kb}/{folder}', access: 'partner', ok: 200,
      prepare: async () => {
        const name = unique('folder');
        await http('POST', `/api/folders/${owner.name}/${kb}`, { key: admin, form: { name } });
        return { owner, path: `/api/folders/${owner.name}/${kb}/${name}`, unchanged: async () => assert.ok((await folderNames(owner.name, kb)).includes(name)) };
      },
    },
    {
      method: 'PATCH', path: '/api/folders/{partner}/{kb}/{folder}/channel', access: 'partner', ok: 200,
      prepare: async () => {
        const source = await channelFolder();
        return {
          owner,
          path: `/api/folders/${owner.name}/${kb}/${source.name}/channel`,
          call: { json: { model_tier: 'economy' } },
          unchanged: async () => assert.equal((await api.deps.db.channelSource.findUniqueOrThrow({ where: { id: source.id } })).modelTier, 'standard'),
        };
      },
    },
    {
      method: 'POST', path: '/api/folders/{partner}/{kb}/{folder}/sync', access: 'partner', ok: 202,
      prepare: async () => {
        const source = await channelFolder();
        return {
          owner,
          path: `/api/folders/${owner.name}/${kb}/${source.name}/sync`,
          unchanged: async () => assert.equal((await api.deps.db.channelSource.findUniqueOrThrow({ where: { id: source.id } })).status, 'synced'),
        };
      },
    },
    {
      method: 'DELETE', path: '/api/knowledgebases/{partner}/{kb}', access: 'partner', ok: 200,
      prepare: async () => {
        const name = unique('kb');
        await http('POST', `/api/knowledgebases/${owner.name}`, { key: admin, form: { name } });
        return { owner, path: `/api/knowledgebases/${owner.name}/${name}`, unchanged: async () => assert.ok((await kbNames(owner.name)).includes(name)) };
      },
    },
    { method: 'GET', path: '/api/knowledgebases/{partner}/{kb}/limits', access: 'partner', ok: 200, prepare: shared(() => `/api/knowledgebases/${owner.name}/${kb}/limits`) },
    {
      method: 'PATCH', path: '/api/knowledgebases/{partner}/{kb}/limits', access: 'partner', ok: 200,
      prepare: async () => {
        const limit = 100_000 + Math.floor(Math.random() * 1_000_000);
        return {
          owner,
          path: `/api/knowledgebases/${owner.name}/${kb}/limits`,
          call: { json: { token_limit: limit } },
          unchanged: async () => {
            const res = await http('GET', `/api/knowledgebases/${owner.name}/${kb}/limits`, { key: admin });
            assert.notEqual(res.body.limits.token_limit, limit, 'the limit was not changed');
          },
        };
      },
    },
    { method: 'GET', path: '/api/knowledgebases/{partner}/{kb}/uncertain-operations', access: 'admin', ok: 200, prepare: shared(() => `/api/knowledgebases/${owner.name}/${kb}/uncertain-operations`) },
    {
      // Allowed callers reach the handler, which answers 409: there is no such uncertain operation.
      method: 'POST', path: '/api/knowledgebases/{partner}/{kb}/uncertain-operations/resolve', access: 'admin', ok: 409,
      prepare: async () => ({ owner, path: `/api/knowledgebases/${owner.name}/${kb}/uncertain-operations/resolve`, call: { json: { operation_key: 'no-such-operation', used: false } } }),
    },
    { method: 'GET', path: '/api/documents/{partner}/{kb}/{doc_id}/content/{type}', access: 'partner', ok: 200, prepare: shared(() => `/api/documents/${owner.name}/${kb}/${documentId}/content/original`) },
    ...(['PUT', 'POST'] as const).map((method): Endpoint => ({
      // An empty document has no workflow, so an allowed update applies (a document whose workflow runs would answer 409).
      method, path: '/api/documents/{partner}/{kb}/{doc_id}/content/{type}', access: 'partner', ok: 200,
      prepare: async () => {
        const d = await http('POST', `/api/documents/${owner.name}/${kb}/empty`, { key: admin, form: { name: unique('manual'), folder, type: 'file' } });
        assert.equal(d.status, 201, JSON.stringify(d.body));
        const path = `/api/documents/${owner.name}/${kb}/${d.body.id}/content/original`;
        return {
          owner,
          path,
          call: method === 'PUT' ? { form: { content: 'typed original' } } : { form: { file: { name: 'typed.txt', content: 'uploaded original' } } },
          unchanged: async () => assert.equal((await http('GET', path, { key: admin })).status, 404, 'no original was stored'),
        };
      },
    })),
    { method: 'GET', path: '/api/documents/{partner}/{kb}/{doc_id}/download/{type}', access: 'partner', ok: 200, prepare: shared(() => `/api/documents/${owner.name}/${kb}/${documentId}/download/original`) },
    { method: 'GET', path: '/api/documents/{partner}/{kb}/rewritten-bundle', access: 'partner', ok: 200, prepare: shared(() => `/api/documents/${owner.name}/${kb}/rewritten-bundle`) },
    {
      method: 'POST', path: '/api/rag-test/search', access: 'authenticated', bodyScoped: true, ok: 200,
      prepare: async () => ({ owner, path: '/api/rag-test/search', call: { json: { partner: owner.name, kb, user_message: 'tide tables' } } }),
    },
    // Messaging quota keys (api/messaging/quota-key-routes.ts).
    { method: 'GET', path: '/api/quota-keys', access: 'admin', ok: 200, prepare: shared(() => '/api/quota-keys') },
    {
      method: 'POST', path: '/api/quota-keys', access: 'admin', ok: 201,
      prepare: async () => {
        const name = unique('quota-key');
        return {
          owner, path: '/api/quota-keys', call: { json: { name, quota_type: 'chat', token_amount: 100 } },
          unchanged: async () => assert.equal(await api.deps.db.quotaKey.count({ where: { name } }), 0, 'no key was created'),
        };
      },
    },
    {
      method: 'DELETE', path: '/api/quota-keys/{id}', access: 'admin', ok: 200,
      prepare: async () => {
        const created = await http('POST', '/api/quota-keys', { key: admin, json: { name: unique('quota-key'), quota_type: 'chat', token_amount: 100 } });
        return {
          owner, path: `/api/quota-keys/${created.body.id}`,
          unchanged: async () => assert.equal((await api.deps.db.quotaKey.findUniqueOrThrow({ where: { id: created.body.id } })).revokedAt, null, 'the key was not revoked'),
        };
      },
    },
    { method: 'GET', path: '/api/embedding/{partner}/{kb}', access: 'partner', ok: 200, prepare: shared(() => `/api/embedding/${owner.name}/${kb}`) },
    { method: 'POST', path: '/api/embedding/{partner}/{kb}/retry-failed', access: 'partner', ok: 200, prepare: shared(() => `/api/embedding/${owner.name}/${kb}/retry-failed`) },
    // The seed document has no final rewritten content: an authorized caller gets the 409 that says so.
    { method: 'POST', path: '/api/embedding/{partner}/{kb}/documents/{doc_id}', access: 'partner', ok: 409, prepare: shared(() => `/api/embedding/${owner.name}/${kb}/documents/${documentId}`) },
    { method: 'GET', path: '/api/toc/{partner}/{kb}', access: 'partner', ok: 200, prepare: shared(() => `/api/toc/${owner.name}/${kb}?include_status=true`) },
    { method: 'GET', path: '/api/vendor-sync/{partner}/{kb}', access: 'admin', ok: 200, prepare: shared(() => `/api/vendor-sync/${owner.name}/${kb}`) },
    // Vendor sync is off for the owner: the administrator gets the specified 409.
    { method: 'POST', path: '/api/vendor-sync/{partner}/{kb}/backfill', access: 'admin', ok: 409, prepare: shared(() => `/api/vendor-sync/${owner.name}/${kb}/backfill`) },
    { method: 'POST', path: '/api/vendor-sync/{partner}/{kb}/retry-failed', access: 'admin', ok: 409, prepare: shared(() => `/api/vendor-sync/${owner.name}/${kb}/retry-failed`) },
    {
      // Scoped by the partner in the query; the seed document is not digitized, so an allowed caller gets 409.
      method: 'POST', path: '/api/queue/process', access: 'authenticated', bodyScoped: true, ok: 409,
      prepare: async () => ({ owner, path: `/api/queue/process?action=rewrite&partner=${owner.name}&kb=${kb}`, call: { json: { document: { id: documentId } } } }),
    },
    // Nothing in the seed KB is digitized: an allowed bulk rewrite queues nothing and changes nothing.
    { method: 'POST', path: '/api/bulk/rewrite/folder/{partner}/{kb}/{folder}', access: 'partner', ok: 202, prepare: shared(() => `/api/bulk/rewrite/folder/${owner.name}/${kb}/${folder}`) },
    { method: 'POST', path: '/api/bulk/rewrite/kb/{partner}/{kb}', access: 'partner', ok: 202, prepare: shared(() => `/api/bulk/rewrite/kb/${owner.name}/${kb}`) },
    { method: 'GET', path: '/api/prompts/{content_type}', access: 'admin', ok: 200, prepare: shared(() => '/api/prompts/auto') },
    {
      // Writes the current prompt back, so an allowed call changes nothing either.
      method: 'PUT', path: '/api/prompts/{content_type}', access: 'admin', ok: 200,
      prepare: async () => {
        const current = (await http('GET', '/api/prompts/book', { key: admin })).body.prompt as string;
        return { owner, path: '/api/prompts/book', call: { json: { prompt: current } } };
      },
    },
    { method: 'GET', path: '/api/queue', access: 'admin', ok: 200, prepare: shared(() => '/api/queue') },
    { method: 'GET', path: '/api/queue/jobs', access: 'admin', ok: 200, prepare: shared(() => '/api/queue/jobs?limit=5') },
    { method: 'GET', path: '/api/queue/debug', access: 'admin', ok: 200, prepare: shared(() => '/api/queue/debug') },
    { method: 'POST', path: '/api/queue/retry-failed', access: 'admin', ok: 200, prepare: shared(() => '/api/queue/retry-failed') },
    { method: 'DELETE', path: '/api/queue/clear-orphans', access: 'admin', ok: 200, prepare: shared(() => '/api/queue/clear-orphans') },
  ];

  it('the table covers every route the knowledge-base interface registers', async () => {
    const { knowledgeBaseRoutes } = await import('../../api/knowledge-base/routes.js');
    const { quotaKeyRoutes } = await import('../../api/messaging/quota-key-routes.js');
    const registered = [...knowledgeBaseRoutes(api.deps), ...quotaKeyRoutes(api.deps)].map((r) => `${r.method.toUpperCase()} ${r.path} ${r.access === 'authenticated' ? 'authenticated' : r.access}`);
    const tested = endpoints.map((e) => `${e.method} ${e.path} ${e.access}`);
    assert.deepEqual([...tested].sort(), [...registered].sort());
  });

  for (const endpoint of endpoints) {
    describe(`${endpoint.method} ${endpoint.path} (access: ${endpoint.access})`, () => {
      for (const credential of credentials) {
        const status = expected(endpoint, credential);
        const allowed = status === endpoint.ok;
        it(`${allowed ? 'allows' : `rejects with ${status}`} ${credential}`, async () => {
          const prepared = await endpoint.prepare(credential);
          const res = await http(endpoint.method, prepared.path, { ...prepared.call, key: keyFor(credential, prepared.owner) });
          if (allowed) {
            assert.equal(res.status, endpoint.ok, `expected ${endpoint.ok}, got ${res.status}: ${JSON.stringify(res.body)}`);
          } else {
            assertDetail(res, status);
            await prepared.unchanged?.();
          }
        });
      }
    });
  }

  describe('who a key is', () => {
    it('GET /api/auth/me names the partner of a partner key', async () => {
      const res = await http('GET', '/api/auth/me', { key: owner.key });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { partner: owner.name, isAdmin: false });
    });

    it('GET /api/auth/me reports the administrator key as admin without a partner', async () => {
      const res = await http('GET', '/api/auth/me', { key: admin });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { partner: null, isAdmin: true });
    });

    it('GET /api/partners lists every partner for the admin key', async () => {
      const res = await http('GET', '/api/partners', { key: admin });
      assert.equal(res.status, 200);
      const names = (res.body as Array<{ name: string }>).map((p) => p.name);
      assert.ok(names.includes(owner.name) && names.includes(other.name), JSON.stringify(names));
      assert.equal(names.length, await api.deps.db.partner.count());
    });

    it("GET /api/partners lists only the caller's own partner for a partner key", async () => {
      const res = await http('GET', '/api/partners', { key: owner.key });
      assert.equal(res.status, 200);
      assert.deepEqual((res.body as Array<{ name: string }>).map((p) => p.name), [owner.name]);
    });
  });

  describe('partner keys', () => {
    it('the key returned by partner creation works and no GET ever returns it', async () => {
      const name = unique('keyed');
      const created = await http('POST', `/api/partners/${name}`, { key: admin, form: {} });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const key = created.body.api_key;
      assert.equal(typeof key, 'string');
      assert.ok(key.length >= 32, 'the key is long and random');

      const me = await http('GET', '/api/auth/me', { key });
      assert.deepEqual(me.body, { partner: name, isAdmin: false });

      for (const [path, k] of [
        [`/api/partners/${name}`, admin],
        ['/api/partners', admin],
        ['/api/partners', key],
        [`/api/knowledgebases/${name}`, key],
      ] as const) {
        const res = await http('GET', path, { key: k });
        assert.equal(res.status, 200, path);
        const text = JSON.stringify(res.body);
        assert.ok(!text.includes(key), `${path} does not return the key`);
        assert.ok(!text.includes('api_key'), `${path} has no api_key field`);
      }
      const stored = await api.deps.db.partner.findUniqueOrThrow({ where: { name } });
      assert.ok(!JSON.stringify(stored).includes(key), 'the database holds no plain key');
    });

    it('a partner is created, and updated, with no body at all: every field is optional (spec 4.5)', async () => {
      const name = unique('bare');
      const created = await http('POST', `/api/partners/${name}`, { key: admin });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      assert.deepEqual([created.body.max_documents, created.body.allow_audio_video, created.body.vendor_sync_enabled], [100_000_000, true, false], 'the defaults');
      const updated = await http('PUT', `/api/partners/${name}`, { key: admin });
      assert.equal(updated.status, 200, JSON.stringify(updated.body));
      assert.equal(updated.body.max_documents, 100_000_000);
    });

    it('regenerate-key replaces the key: the old one gets 401 and the new one works', async () => {
      const p = await newPartner(http);
      const res = await http('POST', `/api/partners/${p.name}/regenerate-key`, { key: admin });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const fresh = res.body.api_key as string;
      assert.equal(typeof fresh, 'string');
      assert.notEqual(fresh, p.key);
      assert.equal(res.body.name, p.name);

      const old = await http('GET', `/api/knowledgebases/${p.name}`, { key: p.key });
      assertDetail(old, 401);
      const now = await http('GET', `/api/knowledgebases/${p.name}`, { key: fresh });
      assert.equal(now.status, 200);
      assert.deepEqual((await http('GET', '/api/auth/me', { key: fresh })).body, { partner: p.name, isAdmin: false });
    });

    it('a key regenerated through another API replica is refused here once PARTNER_KEY_CACHE_SECONDS have passed', async () => {
      const bound = 2;
      const replica = await startApi({ ...isolated.env, PARTNER_KEY_CACHE_SECONDS: String(bound) });
      try {
        const here = client(replica.url);
        const p = await newPartner(here);
        assert.equal((await here('GET', '/api/auth/me', { key: p.key })).status, 200);
        // What regenerate-key does on the other replica: the partner's row gets the new key's hash.
        const fresh = `pk_${crypto.randomBytes(32).toString('base64url')}`;
        const regeneratedAt = Date.now();
        await replica.deps.db.partner.update({ where: { name: p.name }, data: { keyHash: crypto.createHash('sha256').update(fresh).digest('hex') } });
        // The entry this replica cached was looked up before the change: it is gone by the bound.
        await new Promise((r) => setTimeout(r, regeneratedAt + bound * 1000 + 50 - Date.now()));
        assertDetail(await here('GET', '/api/auth/me', { key: p.key }), 401);
        assertDetail(await here('GET', `/api/knowledgebases/${p.name}`, { key: p.key }), 401);
        assert.deepEqual((await here('GET', '/api/auth/me', { key: fresh })).body, { partner: p.name, isAdmin: false });
      } finally {
        await replica.close();
      }
    });

    it('a partner deleted through another API replica can have nothing added here, even while its key is still cached', async () => {
      const replica = await startApi({ ...isolated.env, PARTNER_KEY_CACHE_SECONDS: '3600' });
      try {
        const here = client(replica.url);
        const { partner, kb, folder } = await newKnowledgeBase(here);
        const p = { ...partner, kb, folder };
        assert.equal((await here('GET', '/api/auth/me', { key: p.key })).status, 200);
        // What DELETE /api/partners/{partner} marks on the other replica, before its workflow runs.
        const now = new Date();
        await replica.deps.db.$transaction([
          replica.deps.db.partner.update({ where: { name: p.name }, data: { deletionRequestedAt: now } }),
          replica.deps.db.knowledgeBase.updateMany({ where: { partner: { name: p.name } }, data: { deletionRequestedAt: now } }),
        ]);
        const created = await here('POST', `/api/documents/${p.name}/${p.kb}/empty`, { key: p.key, form: { name: 'late', folder: p.folder, type: 'file' } });
        assert.equal(created.status, 409, JSON.stringify(created.body));
        const count = await replica.deps.db.document.count({ where: { knowledgeBase: { partner: { name: p.name } } } });
        assert.equal(count, 0);
      } finally {
        await replica.close();
      }
    });

    it('a partner key works only for its own partner after a rename', async () => {
      const p = await newPartner(http);
      const renamed = unique('renamed');
      const res = await http('PUT', `/api/partners/${p.name}`, { key: admin, form: { new_name: renamed } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal((await http('GET', `/api/knowledgebases/${renamed}`, { key: p.key })).status, 200);
      assertDetail(await http('GET', `/api/knowledgebases/${p.name}`, { key: p.key }), 403);
    });

    it('a deleted partner\'s key gets 401', async () => {
      const p = await newPartner(http);
      assert.equal((await http('DELETE', `/api/partners/${p.name}`, { key: admin })).status, 200);
      assertDetail(await http('GET', '/api/auth/me', { key: p.key }), 401);
    });
  });

  describe('how the key is sent', () => {
    const bearer = (key: string) => ({ headers: { Authorization: `Bearer ${key}` } });

    it('accepts a partner key as Authorization: Bearer', async () => {
      const res = await http('GET', '/api/auth/me', bearer(owner.key));
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { partner: owner.name, isAdmin: false });
      const kbs = await http('GET', `/api/knowledgebases/${owner.name}`, bearer(owner.key));
      assert.equal(kbs.status, 200);
    });

    it('accepts the admin key as Authorization: Bearer', async () => {
      const res = await http('GET', '/api/auth/me', bearer(admin));
      assert.deepEqual(res.body, { partner: null, isAdmin: true });
    });

    it('applies the same partner scope to a Bearer key', async () => {
      assertDetail(await http('GET', `/api/knowledgebases/${owner.name}`, bearer(other.key)), 403);
    });

    it('rejects an unknown Bearer key and other authorization schemes with 401', async () => {
      assertDetail(await http('GET', '/api/auth/me', bearer(badKey())), 401);
      assertDetail(await http('GET', '/api/auth/me', { headers: { Authorization: `Basic ${Buffer.from(`x:${owner.key}`).toString('base64')}` } }), 401);
    });

    it("takes the bare key in Authorization too (AssemblyAI's clients send it so), and refuses a bare unknown one", async () => {
      assert.deepEqual((await http('GET', '/api/auth/me', { headers: { Authorization: owner.key } })).body, { partner: owner.name, isAdmin: false });
      assertDetail(await http('GET', '/api/auth/me', { headers: { Authorization: badKey() } }), 401);
      assertDetail(await http('GET', '/api/auth/me', { key: owner.key, headers: { Authorization: admin } }), 401);
    });

    it('takes the same key in both headers, and refuses two different keys with 401 whichever is valid', async () => {
      const same = await http('GET', '/api/auth/me', { key: owner.key, headers: { Authorization: `Bearer ${owner.key}` } });
      assert.deepEqual(same.body, { partner: owner.name, isAdmin: false });
      const two = await http('GET', '/api/auth/me', { key: owner.key, headers: { Authorization: `Bearer ${admin}` } });
      assertDetail(two, 401);
      assert.match(two.body.detail, /two different keys/);
      assertDetail(await http('GET', `/api/knowledgebases/${owner.name}`, { key: other.key, headers: { Authorization: `Bearer ${owner.key}` } }), 401);
    });

    it('rejects an empty key, a key differing only in case, and the admin key with a suffix', async () => {
      assertDetail(await http('GET', '/api/auth/me', { headers: { 'X-API-Key': '' } }), 401);
      assertDetail(await http('GET', '/api/auth/me', { key: owner.key.toUpperCase() === owner.key ? owner.key.toLowerCase() : owner.key.toUpperCase() }), 401);
      assertDetail(await http('GET', '/api/auth/me', { key: `${admin}x` }), 401);
      assertDetail(await http('GET', '/api/auth/me', { key: admin.slice(0, -1) }), 401);
    });
  });

  describe('a rejected request changes nothing', () => {
    it("creating a knowledge base with another partner's key creates none", async () => {
      const name = unique('kb');
      assertDetail(await http('POST', `/api/knowledgebases/${owner.name}`, { key: other.key, form: { name } }), 403);
      assert.ok(!(await kbNames(owner.name)).includes(name));
      // Nor under the caller's own partner.
      assert.ok(!(await kbNames(other.name)).includes(name));
      assert.equal(await api.deps.db.knowledgeBase.count({ where: { name } }), 0);
    });

    it("uploading with another partner's key stores no document and leaves no upload behind", async () => {
      const before = await documentCount();
      const res = await http('POST', `/api/documents/${owner.name}/${kb}`, {
        key: other.key,
        form: { type: 'file', folder, file: { name: 'intruder.txt', content: 'should never be stored' } },
      });
      assertDetail(res, 403);
      assert.equal(await documentCount(), before);
      assert.equal(await api.deps.db.document.count({ where: { name: 'intruder.txt' } }), 0);
      // The file was parsed before authorization; it is removed when the response closes.
      const uploads = path.join(api.deps.config.storageDir, 'uploads');
      await eventually('the upload directory to be empty', async () => fs.readdirSync(uploads).length === 0, 5_000);
    });

    it("searching another partner's knowledge base with a partner key is refused", async () => {
      const res = await http('POST', '/api/rag-test/search', { key: other.key, json: { partner: owner.name, kb, user_message: 'tide tables' } });
      assertDetail(res, 403);
    });
  });
});
