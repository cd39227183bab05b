import assert from 'node:assert/strict';
import pg from 'pg';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from '../../generated/prisma/client.js';
import type { Db } from '../../lib/platform/db.js';
import { combinedKnowledgeBaseData, listKnowledgeBaseDocuments } from '../../lib/knowledge/document-views.js';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newKnowledgeBase, newPartner, unique } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';

/**
 * Document listings and creation at scale (issue #20): a listing costs the same number of queries
 * whatever the document count, pages through the documents with `limit` and `cursor`, and the
 * partner's max_documents is kept by a counter that racing creations and deletions keep exact. The
 * worker of this file's task queue runs deletions; documents created through `idle` (a task queue
 * no worker polls) wait in their workflows.
 */
describe('document listings and creation at scale', function () {
  this.timeout(180_000);
  let api: RunningApi;
  let idle: RunningApi;
  let worker: RunningWorker;
  let http: ReturnType<typeof client>;

  before(async () => {
    const env = { TEMPORAL_TASK_QUEUE: `listings-${process.pid}` };
    api = await startApi(env);
    worker = await startWorker(env);
    idle = await startApi({ TEMPORAL_TASK_QUEUE: `listings-idle-${process.pid}` });
    http = client(api.url);
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
    await idle?.close();
  });

  const createEmpty = async (p: { name: string; key: string }, kb: string, folder: string, n: number) => {
    for (let i = 0; i < n; i += 10) {
      await Promise.all(
        Array.from({ length: Math.min(10, n - i) }, async () => {
          const r = await http('POST', `/api/documents/${p.name}/${kb}/empty`, { key: p.key, form: { folder, name: unique('d'), type: 'file' } });
          assert.equal(r.status, 201, JSON.stringify(r.body));
        }),
      );
    }
  };

  /** A database handle over its own pool that counts every statement sent to Postgres. */
  function countingDb(): { db: Db; count: () => number; close: () => Promise<void> } {
    let statements = 0;
    const pool = new pg.Pool({ connectionString: testStack().databaseUrl, max: 4 });
    pool.on('connect', (c) => {
      const query = c.query.bind(c) as (...args: unknown[]) => unknown;
      (c as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        statements++;
        return query(...args);
      };
    });
    const prisma = new PrismaClient({ adapter: new PrismaPg(pool) });
    return {
      db: Object.assign(prisma, { pool }) as Db,
      count: () => statements,
      close: async () => {
        await prisma.$disconnect();
        if (!pool.ended) await pool.end();
      },
    };
  }

  it('GET /api/documents and /api/kb-data send as many statements for 40 documents as for 2', async () => {
    const small = await newKnowledgeBase(http);
    const large = await newKnowledgeBase(http);
    await createEmpty(small.partner, small.kb, small.folder, 2);
    await createEmpty(large.partner, large.kb, large.folder, 40);
    const counting = countingDb();
    try {
      const measure = async (read: () => Promise<unknown>) => {
        const before = counting.count();
        await read();
        return counting.count() - before;
      };
      const sources = { folderDetails: async () => [], vendorSync: async () => ({}) };
      // Warm: the first statements of a connection may differ.
      await listKnowledgeBaseDocuments(counting.db, small.partner.name, small.kb, false);
      const list = [
        await measure(() => listKnowledgeBaseDocuments(counting.db, small.partner.name, small.kb, false)),
        await measure(() => listKnowledgeBaseDocuments(counting.db, large.partner.name, large.kb, false)),
      ];
      const data = [
        await measure(() => combinedKnowledgeBaseData(counting.db, small.partner.name, small.kb, false, sources)),
        await measure(() => combinedKnowledgeBaseData(counting.db, large.partner.name, large.kb, false, sources)),
      ];
      const page = [
        await measure(() => listKnowledgeBaseDocuments(counting.db, small.partner.name, small.kb, false, { limit: 10 })),
        await measure(() => listKnowledgeBaseDocuments(counting.db, large.partner.name, large.kb, false, { limit: 10 })),
      ];
      assert.equal(list[1], list[0], `GET /api/documents: ${list.join(' vs ')} statements`);
      assert.equal(data[1], data[0], `GET /api/kb-data: ${data.join(' vs ')} statements`);
      assert.equal(page[1], page[0], `a page: ${page.join(' vs ')} statements`);
    } finally {
      await counting.close();
    }
  });

  it('limit and cursor page through the documents in creation order; without them the whole list', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    await createEmpty(partner, kb, folder, 7);
    const whole = await http('GET', `/api/documents/${partner.name}/${kb}`, { key: partner.key });
    assert.equal(whole.status, 200);
    assert.equal(whole.body.documents.length, 7);
    assert.equal('next_cursor' in whole.body, false, 'the spec answer has no cursor');

    for (const path of ['documents', 'kb-data']) {
      const seen: string[] = [];
      let cursor: string | null = null;
      const sizes: number[] = [];
      do {
        const query: string = `?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
        const res = await http('GET', `/api/${path}/${partner.name}/${kb}${query}`, { key: partner.key });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        sizes.push(res.body.documents.length);
        seen.push(...res.body.documents.map((d: { id: string }) => d.id));
        cursor = res.body.next_cursor;
      } while (cursor);
      assert.deepEqual(sizes, [3, 3, 1]);
      assert.deepEqual(seen, whole.body.documents.map((d: { id: string }) => d.id), `${path}: pages in the order of the whole list`);
    }

    const bad = await http('GET', `/api/documents/${partner.name}/${kb}?limit=2&cursor=not-a-cursor`, { key: partner.key });
    assert.equal(bad.status, 400);
    assert.match(bad.body.detail, /cursor/);
    assert.equal((await http('GET', `/api/documents/${partner.name}/${kb}?limit=0`, { key: partner.key })).status, 400);
    assert.equal((await http('GET', `/api/documents/${partner.name}/${kb}?limit=1001`, { key: partner.key })).status, 400);
  });

  it('max_documents: racing creations and batches stop exactly at the limit, and deletions give the room back', async () => {
    const partner = await newPartner(http, { max_documents: '6' });
    const kb = unique('kb');
    assert.equal((await http('POST', `/api/knowledgebases/${partner.name}`, { key: partner.key, form: { name: kb } })).status, 201);
    assert.equal((await http('POST', `/api/folders/${partner.name}/${kb}`, { key: partner.key, form: { name: 'f' } })).status, 201);
    const counted = async () => (await api.deps.db.partner.findUniqueOrThrow({ where: { name: partner.name } })).documentCount;

    const raced = await Promise.all(Array.from({ length: 8 }, () => http('POST', `/api/documents/${partner.name}/${kb}/empty`, { key: partner.key, form: { folder: 'f', name: unique('d'), type: 'file' } })));
    assert.equal(raced.filter((r) => r.status === 201).length, 6);
    for (const r of raced.filter((x) => x.status !== 201)) {
      assert.equal(r.status, 403);
      assert.match(r.body.detail, /^QUOTA_EXCEEDED:max_documents/);
    }
    assert.equal(await counted(), 6);

    // Two deleted: a batch of three URLs gets two documents, the third is refused on its own.
    for (const r of raced.filter((x) => x.status === 201).slice(0, 2)) {
      const del = await http('DELETE', `/api/documents/${partner.name}/${kb}/${r.body.id}`, { key: partner.key });
      assert.equal(del.status, 200, JSON.stringify(del.body));
    }
    await eventually('the four documents to be counted', async () => (await counted()) === 4);
    const batch = await http('POST', `/api/documents/${partner.name}/${kb}/batch`, { key: partner.key, json: { folder: 'f', urls: ['https://example.org/a', 'https://example.org/b', 'https://example.org/c'] } });
    assert.equal(batch.status, 200, JSON.stringify(batch.body));
    assert.deepEqual(batch.body.results.map((r: { status: string }) => r.status), ['success', 'success', 'failed']);
    assert.match(batch.body.results[2].error, /^QUOTA_EXCEEDED:max_documents/);
    assert.equal(await counted(), 6);
    const rows = await api.deps.db.document.count({ where: { knowledgeBase: { partner: { name: partner.name } } } });
    assert.equal(rows, 6);
  });

  it('a batch of URLs is created in one request with a workflow started for each', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const urls = Array.from({ length: 120 }, (_, i) => `https://example.org/page-${i}`);
    const res = await client(idle.url)('POST', `/api/documents/${partner.name}/${kb}/batch`, { key: partner.key, json: { folder, urls: [...urls, 'ftp://example.org/x'] } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.summary, { total: 121, succeeded: 120, failed: 1 });
    assert.match(res.body.results[120].error, /not an absolute http or https URL/);
    const ids = res.body.results.slice(0, 120).map((r: { document_id: string }) => r.document_id);
    const described = await Promise.all(ids.slice(0, 20).map((id: string) => idle.deps.temporal.workflow.getHandle(`document-${id}`).describe()));
    assert.ok(described.every((d) => d.status.name === 'RUNNING'));
    const docs = await api.deps.db.document.findMany({ where: { id: { in: ids } }, select: { url: true, inQueues: true } });
    assert.equal(docs.length, 120);
    assert.deepEqual(new Set(docs.map((d) => d.url)), new Set(urls));
    assert.ok(docs.every((d) => d.inQueues.join() === 'digitize'));
  });
});
