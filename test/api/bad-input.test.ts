import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { client, eventually, startApi, type Call, type HttpResult, type RunningApi } from '../support/system.js';
import { newKnowledgeBase, newPartner, unique } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { storedNames } from '../support/stored-files.js';

/**
 * Bad input gets a clear 4xx with a `{detail}` body (spec knowledge-base.md §7) and changes
 * nothing: no row, no stored file, no file left in the upload directory.
 */

type Http = ReturnType<typeof client>;
type FormValue = NonNullable<Call['form']>[string];

/** Asserts a `{detail: string}` error with the status, optionally matching the detail. */
function assertRejected(res: HttpResult, status: number, detail?: RegExp) {
  assert.equal(res.status, status, `expected ${status}, got ${res.status}: ${JSON.stringify(res.body)}`);
  assert.ok(res.body !== null && typeof res.body === 'object', `error body is JSON: ${JSON.stringify(res.body)}`);
  assert.deepEqual(Object.keys(res.body), ['detail'], `error body is exactly {detail}: ${JSON.stringify(res.body)}`);
  assert.equal(typeof res.body.detail, 'string');
  assert.ok(res.body.detail.length > 0);
  if (detail) assert.match(res.body.detail, detail);
}

/** A multipart body written by hand, so that it can be broken on purpose. */
function multipart(boundary: string, parts: Array<{ name: string; value: string | Buffer; filename?: string }>): Buffer {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.filename ? `; filename="${p.filename}"` : ''}`;
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n${p.filename ? 'Content-Type: application/octet-stream\r\n' : ''}\r\n`));
    chunks.push(Buffer.isBuffer(p.value) ? p.value : Buffer.from(p.value));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}

describe('bad input', function () {
  let api: RunningApi;
  let http: Http;
  let admin: string;
  let owner: { name: string; key: string };
  let kb: string;
  let folder: string;
  let kbId: string;
  let uploadDir: string;

  before(async () => {
    api = await startApi();
    http = client(api.url);
    admin = testStack().adminApiKey;
    ({ partner: owner, kb, folder } = await newKnowledgeBase(http));
    kbId = (await api.deps.db.knowledgeBase.findFirstOrThrow({ where: { name: kb, partner: { name: owner.name } } })).id;
    uploadDir = path.join(api.deps.config.storageDir, 'uploads');
  });
  after(async () => {
    await api?.close();
  });

  const documentCount = (knowledgeBaseId = kbId) => api.deps.db.document.count({ where: { knowledgeBaseId } });
  const storedDocuments = async () => (await storedNames('documents')).length;
  const kbNames = async (partner = owner.name) => {
    const res = await http('GET', `/api/knowledgebases/${partner}`, { key: admin });
    assert.equal(res.status, 200);
    return (res.body as Array<{ name: string }>).map((k) => k.name);
  };
  const folderNames = async () => (await http('GET', `/api/folders/${owner.name}/${kb}`, { key: admin })).body.folders as string[];

  /** Runs a request that must be rejected and checks that no document, stored file or upload remains. */
  async function rejectedUpload(send: () => Promise<HttpResult>, status: number, detail?: RegExp, knowledgeBaseId = kbId) {
    const docsBefore = await documentCount(knowledgeBaseId);
    const storedBefore = await storedDocuments();
    const res = await send();
    assertRejected(res, status, detail);
    assert.equal(await documentCount(knowledgeBaseId), docsBefore, 'no document row was created');
    assert.equal(await storedDocuments(), storedBefore, 'no document file was stored');
    // Upload files are removed when the response closes, which may be just after the client has it.
    await eventually('the upload directory to be empty', async () => fs.readdirSync(uploadDir).length === 0, 5_000).catch(() => {
      assert.deepEqual(fs.readdirSync(uploadDir), [], 'no stray file in the upload directory');
    });
    return res;
  }

  const upload = (form: Record<string, FormValue>, p = owner, k = kb) => http('POST', `/api/documents/${p.name}/${k}`, { key: p.key, form });
  const textFile = (name: string, content: string | Buffer = 'Tide tables for the northern harbour.') => ({ name, content });

  describe('missing required fields', () => {
    it('a knowledge base without a name is 400 and none is created', async () => {
      const before = await kbNames();
      assertRejected(await http('POST', `/api/knowledgebases/${owner.name}`, { key: owner.key, form: { expert_name: 'A. Nobody' } }), 400, /name is required/);
      assert.deepEqual(await kbNames(), before);
    });

    it('a knowledge base with an empty name is 400', async () => {
      const before = await kbNames();
      assertRejected(await http('POST', `/api/knowledgebases/${owner.name}`, { key: owner.key, form: { name: '' } }), 400, /name/);
      assert.deepEqual(await kbNames(), before);
    });

    it('a folder without a name is 400 and none is created', async () => {
      const before = await folderNames();
      assertRejected(await http('POST', `/api/folders/${owner.name}/${kb}`, { key: owner.key, form: { type: 'regular' } }), 400, /name is required/);
      assert.deepEqual(await folderNames(), before);
    });

    it('a document without type is 400', async () => {
      await rejectedUpload(() => upload({ folder, file: textFile('a.txt') }), 400, /type is required/);
    });

    it('a document without folder is 400', async () => {
      await rejectedUpload(() => upload({ type: 'file', file: textFile('a.txt') }), 400, /folder is required/);
    });

    it('a document of type file without a file is 400', async () => {
      await rejectedUpload(() => upload({ type: 'file', folder }), 400, /file is required/);
    });

    it('a retrieval search without user_message is 400', async () => {
      assertRejected(await http('POST', '/api/rag-test/search', { key: owner.key, json: { partner: owner.name, kb } }), 400, /user_message is required/);
    });

    it('a retrieval search whose messages are only whitespace is 400 (it would otherwise answer with arbitrary chunks)', async () => {
      assertRejected(await http('POST', '/api/rag-test/search', { key: owner.key, json: { partner: owner.name, kb, user_message: ' \n\t ', robot_message: '  ' } }), 400, /user_message must contain text, not only whitespace/);
      assertRejected(await http('POST', '/api/rag-test/search', { key: owner.key, json: { partner: owner.name, kb, user_message: '\u200b\u200b', robot_message: '\ufeff' } }), 400, /user_message must contain text, not only whitespace/);
    });
  });

  describe('wrong types and values', () => {
    const kbCases: Array<[string, Record<string, string>, RegExp]> = [
      ['character_limit=abc', { character_limit: 'abc' }, /character_limit/],
      ['character_limit=1.5', { character_limit: '1.5' }, /character_limit/],
      ['token_limit=-1', { token_limit: '-1' }, /token_limit/],
      ['character_limit beyond any integer column', { character_limit: '99999999999999999999999' }, /character_limit/],
      ['token_limit=2^63', { token_limit: '9223372036854775808' }, /token_limit/],
      ['dollar_limit_usd with 9 decimals', { dollar_limit_usd: '1.123456789' }, /dollar_limit_usd/],
      ['dollar_limit_usd=-5', { dollar_limit_usd: '-5' }, /dollar_limit_usd/],
      ['dollar_limit_usd=ten', { dollar_limit_usd: 'ten' }, /dollar_limit_usd/],
      ['an unknown field', { colour: 'blue' }, /colour/],
    ];
    for (const [what, fields, detail] of kbCases) {
      it(`creating a knowledge base with ${what} is 400 and creates none`, async () => {
        const name = unique('kb');
        assertRejected(await http('POST', `/api/knowledgebases/${owner.name}`, { key: owner.key, form: { name, ...fields } }), 400, detail);
        assert.ok(!(await kbNames()).includes(name));
      });
    }

    const partnerCases: Array<[string, Record<string, string>, RegExp]> = [
      ['max_documents=0', { max_documents: '0' }, /max_documents/],
      ['max_documents=lots', { max_documents: 'lots' }, /max_documents/],
      ['max_documents beyond a 32-bit integer', { max_documents: '99999999999' }, /max_documents/],
      ['allow_audio_video=maybe', { allow_audio_video: 'maybe' }, /allow_audio_video/],
      ['vendor_sync_enabled=sometimes', { vendor_sync_enabled: 'sometimes' }, /vendor_sync_enabled/],
    ];
    for (const [what, fields, detail] of partnerCases) {
      it(`creating a partner with ${what} is 400 and creates none`, async () => {
        const name = unique('partner');
        assertRejected(await http('POST', `/api/partners/${name}`, { key: admin, form: fields }), 400, detail);
        assertRejected(await http('GET', `/api/partners/${name}`, { key: admin }), 404);
      });
    }

    it('a partner name with characters outside [A-Za-z0-9._-] is 400', async () => {
      assertRejected(await http('POST', `/api/partners/${encodeURIComponent('bad name!')}`, { key: admin, form: {} }), 400, /partner/);
      assert.equal(await api.deps.db.partner.count({ where: { name: 'bad name!' } }), 0);
    });

    it('updating a partner with max_documents=0 is 400 and changes nothing', async () => {
      const p = await newPartner(http);
      assertRejected(await http('PUT', `/api/partners/${p.name}`, { key: admin, form: { max_documents: '0' } }), 400, /max_documents/);
      assert.equal((await http('GET', `/api/partners/${p.name}`, { key: admin })).body.max_documents, 100000000);
    });

    it('a document with model_tier=premium is 400', async () => {
      await rejectedUpload(() => upload({ type: 'file', folder, model_tier: 'premium', file: textFile('a.txt') }), 400, /model_tier must be one of standard, economy/);
    });

    it('a document with type=pdf is 400', async () => {
      await rejectedUpload(() => upload({ type: 'pdf', folder, file: textFile('a.txt') }), 400, /type must be one of file, url/);
    });

    it('a knowledge base, folder or document name with a control character is 400 and nothing is created or renamed', async () => {
      const kbsBefore = await kbNames();
      assertRejected(await http('POST', `/api/knowledgebases/${owner.name}`, { key: owner.key, form: { name: 'two\nlines' } }), 400, /form\.name must not contain control characters/);
      assert.deepEqual(await kbNames(), kbsBefore);
      const foldersBefore = await folderNames();
      assertRejected(await http('POST', `/api/folders/${owner.name}/${kb}`, { key: owner.key, form: { name: 'tab\there' } }), 400, /form\.name must not contain control characters/);
      assert.deepEqual(await folderNames(), foldersBefore);
      await rejectedUpload(() => upload({ type: 'file', folder, name: 'bell\u0007', file: textFile('a.txt') }), 400, /form\.name must not contain control characters/);
      const created = await upload({ type: 'file', folder, name: 'Harbour notes', file: textFile('a.txt') });
      assert.equal(created.status, 201);
      assertRejected(await http('PUT', `/api/documents/${owner.name}/${kb}/${created.body.id}/name`, { key: owner.key, form: { name: 'carriage\rreturn' } }), 400, /must not contain control characters/);
      assert.equal((await http('GET', `/api/document/${owner.name}/${kb}/${created.body.id}`, { key: owner.key })).body.name, 'Harbour notes');
      // Names that are only unusual pass: accents, emoji, right-to-left text.
      assert.equal((await http('PUT', `/api/documents/${owner.name}/${kb}/${created.body.id}/name`, { key: owner.key, form: { name: 'Café ✓ مرفأ' } })).status, 200);
    });

    it('a URL document whose URL carries a user name or password is 400, saying so, alone and in a batch', async () => {
      const url = 'https://reader:s3cret@example.com/private';
      await rejectedUpload(() => upload({ type: 'url', folder, url }), 400, /carries a user name or password/);
      await rejectedUpload(() => http('POST', `/api/documents/${owner.name}/${kb}/empty`, { key: owner.key, form: { name: 'n', folder, type: 'url', url } }), 400, /form\.url carries a user name or password/);
      const before = await documentCount(kbId);
      const batch = await http('POST', `/api/documents/${owner.name}/${kb}/batch`, { key: owner.key, json: { urls: [url], folder } });
      assert.equal(batch.body.results[0].status, 'failed');
      assert.match(batch.body.results[0].error, /carries a user name or password/);
      assert.equal(await documentCount(kbId), before);
    });

    it('a document with character_limit=0 is 400 (a request-level limit is positive)', async () => {
      await rejectedUpload(() => upload({ type: 'file', folder, character_limit: '0', file: textFile('a.txt') }), 400, /character_limit/);
    });

    it('a document with use_original_as_rewritten=perhaps is 400', async () => {
      await rejectedUpload(() => upload({ type: 'file', folder, use_original_as_rewritten: 'perhaps', file: textFile('a.txt') }), 400, /use_original_as_rewritten/);
    });

    it("a document's flags take the words Python's and HTML's clients send (True, 1, on / False, 0, off; empty: the default)", async () => {
      const flags = async (auto_rewrite: string, use_original_as_rewritten: string) => {
        const res = await upload({ type: 'file', folder, auto_rewrite, use_original_as_rewritten, file: textFile(`${unique('flags')}.txt`) });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        const row = await api.deps.db.document.findUniqueOrThrow({ where: { id: res.body.id } });
        return [row.autoRewrite, row.useOriginalAsRewritten];
      };
      assert.deepEqual(await flags('True', 'false'), [true, false]);
      assert.deepEqual(await flags(' on', '1'), [true, true]);
      assert.deepEqual(await flags('NO', 'Yes'), [false, true]);
      assert.deepEqual(await flags('', '0'), [false, false]);
    });

    it('a folder with model_tier=premium or type=shared is 400', async () => {
      const before = await folderNames();
      assertRejected(await http('POST', `/api/folders/${owner.name}/${kb}`, { key: owner.key, form: { name: unique('f'), model_tier: 'premium' } }), 400, /model_tier/);
      assertRejected(await http('POST', `/api/folders/${owner.name}/${kb}`, { key: owner.key, form: { name: unique('f'), type: 'shared' } }), 400, /type/);
      assert.deepEqual(await folderNames(), before);
    });

    it('a document file sent under another field name is 400', async () => {
      await rejectedUpload(() => upload({ type: 'file', folder, attachment: textFile('a.txt') }), 400, /unexpected file in field "attachment"/);
    });

    it('two files in the single-file field are 400', async () => {
      const boundary = `b${crypto.randomBytes(8).toString('hex')}`;
      const body = multipart(boundary, [
        { name: 'type', value: 'file' },
        { name: 'folder', value: folder },
        { name: 'file', value: 'one', filename: 'one.txt' },
        { name: 'file', value: 'two', filename: 'two.txt' },
      ]);
      await rejectedUpload(
        () => http('POST', `/api/documents/${owner.name}/${kb}`, { key: owner.key, rawBody: { body, contentType: `multipart/form-data; boundary=${boundary}` } }),
        400,
        /unexpected file in field "file".*more files than it accepts/,
      );
    });

    const searchCases: Array<[string, Record<string, unknown>, RegExp]> = [
      ['top_k="many"', { top_k: 'many' }, /top_k/],
      ['top_k=0', { top_k: 0 }, /top_k/],
      // A weight so large that the fused scores overflow would answer scores of null.
      ['rrf_weight_bm25 over 1000', { rrf_weight_bm25: 1e308 }, /body\.rrf_weight_bm25 must be <= 1000/],
      ['query_weight_original over 1000', { query_weight_original: 1001 }, /body\.query_weight_original must be <= 1000/],
      ['user_message as a number', { user_message: 42 }, /user_message/],
      ['an empty user_message', { user_message: '' }, /user_message/],
      ['an unknown field', { temperature: 0.3 }, /temperature/],
    ];
    for (const [what, fields, detail] of searchCases) {
      it(`a retrieval search with ${what} is 400`, async () => {
        const res = await http('POST', '/api/rag-test/search', { key: admin, json: { partner: owner.name, kb, user_message: 'tides', ...fields } });
        assertRejected(res, 400, detail);
      });
    }
  });

  describe('NUL and control characters', () => {
    it('a NUL character in a knowledge base name is 400 and creates none', async () => {
      const before = await kbNames();
      assertRejected(await http('POST', `/api/knowledgebases/${owner.name}`, { key: owner.key, form: { name: 'tide\u0000tables' } }), 400, /form\.name must not contain NUL/);
      assert.deepEqual(await kbNames(), before);
    });

    it('a NUL character in a folder name is 400 and creates none', async () => {
      const before = await folderNames();
      assertRejected(await http('POST', `/api/folders/${owner.name}/${kb}`, { key: owner.key, form: { name: 'in\u0000box' } }), 400, /NUL/);
      assert.deepEqual(await folderNames(), before);
    });

    it('a NUL character in a document field is 400 and stores nothing', async () => {
      await rejectedUpload(() => upload({ type: 'file', folder, expert_name: 'R.\u0000S.', file: textFile('a.txt') }), 400, /form\.expert_name must not contain NUL/);
    });

    it('a NUL character in a path segment is 400', async () => {
      assertRejected(await http('GET', `/api/folders/${owner.name}/tide%00tables`, { key: owner.key }), 400, /path\.kb must not contain NUL/);
      assertRejected(await http('GET', '/api/knowledgebases/some%00one', { key: admin }), 400, /path\.partner must not contain NUL/);
    });

    it('a NUL character in a JSON body is 400', async () => {
      assertRejected(await http('POST', '/api/rag-test/search', { key: owner.key, json: { partner: owner.name, kb, user_message: 'tide\u0000tables' } }), 400, /body\.user_message must not contain NUL/);
    });

    it('a file name with a NUL or other control character is 400 and stores nothing', async () => {
      const boundary = `b${crypto.randomBytes(8).toString('hex')}`;
      for (const encoded of ['a%00b.txt', 'a%01%0Ab.txt']) {
        const body = Buffer.concat([
          multipart(boundary, [{ name: 'type', value: 'file' }, { name: 'folder', value: folder }]).subarray(0, -`--${boundary}--\r\n`.length),
          Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename*=UTF-8''${encoded}\r\nContent-Type: text/plain\r\n\r\nhello world\r\n--${boundary}--\r\n`),
        ]);
        await rejectedUpload(
          () => http('POST', `/api/documents/${owner.name}/${kb}`, { key: owner.key, rawBody: { body, contentType: `multipart/form-data; boundary=${boundary}` } }),
          400,
          /control characters/,
        );
      }
    });

    it('a path with broken percent-encoding is 400 naming the URL', async () => {
      assertRejected(await http('GET', '/api/knowledgebases/%E0%A4%A', { key: admin }), 400, /malformed URL/);
    });
  });

  describe('things that do not exist', () => {
    const missing = 'no-such-partner-' + crypto.randomBytes(4).toString('hex');
    const someUuid = crypto.randomUUID();
    const unknownPartner: Array<[string, string, Call]> = [
      ['GET', `/api/partners/${missing}`, {}],
      ['PUT', `/api/partners/${missing}`, { form: { max_documents: '5' } }],
      ['DELETE', `/api/partners/${missing}`, {}],
      ['POST', `/api/partners/${missing}/regenerate-key`, {}],
      ['GET', `/api/knowledgebases/${missing}`, {}],
      ['POST', `/api/knowledgebases/${missing}`, { form: { name: 'kb' } }],
      ['GET', `/api/folders/${missing}/kb`, {}],
      ['POST', `/api/folders/${missing}/kb`, { form: { name: 'f' } }],
      ['POST', `/api/documents/${missing}/kb`, { form: { type: 'file', folder: 'f', file: { name: 'a.txt', content: 'text' } } }],
      ['GET', `/api/document/${missing}/kb/${someUuid}`, {}],
      ['POST', '/api/rag-test/search', { json: { partner: missing, kb: 'kb', user_message: 'tides' } }],
    ];
    for (const [method, url, call] of unknownPartner) {
      it(`${method} ${url.replace(missing, '{unknown partner}').replace(someUuid, '{uuid}')} with the admin key is 404`, async () => {
        assertRejected(await http(method, url, { ...call, key: admin }), 404, /partner .* does not exist/);
        assert.equal(await api.deps.db.partner.count({ where: { name: missing } }), 0);
        await eventually('the upload directory to be empty', async () => fs.readdirSync(uploadDir).length === 0, 5_000);
      });
    }

    it('an unknown partner with a partner key is 403, not a hint that it does not exist', async () => {
      assertRejected(await http('GET', `/api/knowledgebases/${missing}`, { key: owner.key }), 403);
    });

    const unknownKb: Array<[string, string, () => string, () => Call]> = [
      ['GET', '/api/folders/{partner}/{unknown kb}', () => `/api/folders/${owner.name}/no-such-kb`, () => ({})],
      ['POST', '/api/folders/{partner}/{unknown kb}', () => `/api/folders/${owner.name}/no-such-kb`, () => ({ form: { name: 'f' } })],
      ['POST', '/api/documents/{partner}/{unknown kb}', () => `/api/documents/${owner.name}/no-such-kb`, () => ({ form: { type: 'file', folder, file: { name: 'a.txt', content: 'text' } } })],
      ['GET', '/api/document/{partner}/{unknown kb}/{uuid}', () => `/api/document/${owner.name}/no-such-kb/${someUuid}`, () => ({})],
      ['POST', '/api/rag-test/search with an unknown kb', () => '/api/rag-test/search', () => ({ json: { partner: owner.name, kb: 'no-such-kb', user_message: 'tides' } })],
    ];
    for (const [method, title, url, call] of unknownKb) {
      it(`${method} ${title} is 404`, async () => {
        const docsBefore = await api.deps.db.document.count();
        assertRejected(await http(method, url(), { ...call(), key: owner.key }), 404, /knowledge base "no-such-kb" does not exist/);
        assert.equal(await api.deps.db.document.count(), docsBefore);
        assert.equal(await api.deps.db.knowledgeBase.count({ where: { name: 'no-such-kb' } }), 0);
        await eventually('the upload directory to be empty', async () => fs.readdirSync(uploadDir).length === 0, 5_000);
      });
    }

    it('an upload into an unknown folder is 404 and stores nothing', async () => {
      await rejectedUpload(() => upload({ type: 'file', folder: 'no-such-folder', file: textFile('a.txt') }), 404, /folder "no-such-folder" does not exist/);
    });

    it('an unknown document id is 404', async () => {
      assertRejected(await http('GET', `/api/document/${owner.name}/${kb}/${crypto.randomUUID()}`, { key: owner.key }), 404, /document .* does not exist/);
    });

    it('a malformed document id is 404', async () => {
      for (const id of ['not-a-uuid', '12345', `${crypto.randomUUID()}x`, "x' OR '1'='1"]) {
        assertRejected(await http('GET', `/api/document/${owner.name}/${kb}/${encodeURIComponent(id)}`, { key: owner.key }), 404, /document .* does not exist/);
      }
    });

    it("a document of another knowledge base is 404 under this one", async () => {
      const other = await newKnowledgeBase(http);
      const created = await upload({ type: 'file', folder: other.folder, file: textFile('elsewhere.txt') }, other.partner, other.kb);
      assert.equal(created.status, 201, JSON.stringify(created.body));
      // Same partner, other KB: the admin key reaches both knowledge bases but the id is only in one.
      const kb2 = unique('kb');
      assert.equal((await http('POST', `/api/knowledgebases/${other.partner.name}`, { key: admin, form: { name: kb2 } })).status, 201);
      assertRejected(await http('GET', `/api/document/${other.partner.name}/${kb2}/${created.body.id}`, { key: admin }), 404);
    });
  });

  describe('duplicate names', () => {
    it('a second partner of the same name is 409 and the first keeps its key', async () => {
      const p = await newPartner(http);
      assertRejected(await http('POST', `/api/partners/${p.name}`, { key: admin, form: { max_documents: '5' } }), 409, /already exists/);
      assert.equal(await api.deps.db.partner.count({ where: { name: p.name } }), 1);
      assert.equal((await http('GET', `/api/partners/${p.name}`, { key: admin })).body.max_documents, 100000000);
      assert.equal((await http('GET', '/api/auth/me', { key: p.key })).status, 200);
    });

    it('renaming a partner to a taken name is 409 and changes nothing', async () => {
      const a = await newPartner(http);
      const b = await newPartner(http);
      assertRejected(await http('PUT', `/api/partners/${a.name}`, { key: admin, form: { new_name: b.name, max_documents: '9' } }), 409, /already exists/);
      assert.equal((await http('GET', `/api/partners/${a.name}`, { key: admin })).body.max_documents, 100000000);
      assert.deepEqual((await http('GET', '/api/auth/me', { key: b.key })).body, { partner: b.name, isAdmin: false });
    });

    it('a second knowledge base of the same name is 409', async () => {
      assertRejected(await http('POST', `/api/knowledgebases/${owner.name}`, { key: owner.key, form: { name: kb } }), 409, /already exists/);
      assert.equal((await kbNames()).filter((n) => n === kb).length, 1);
    });

    it('the same knowledge base name under another partner is fine', async () => {
      const p = await newPartner(http);
      assert.equal((await http('POST', `/api/knowledgebases/${p.name}`, { key: p.key, form: { name: kb } })).status, 201);
    });

    it('a second folder of the same name is 409', async () => {
      assertRejected(await http('POST', `/api/folders/${owner.name}/${kb}`, { key: owner.key, form: { name: folder } }), 409, /already exists/);
      assert.equal((await folderNames()).filter((n) => n === folder).length, 1);
    });

    it('concurrent creations of one knowledge base name give one 201 and 409s, never a 500', async () => {
      const name = unique('kb');
      const results = await Promise.all(Array.from({ length: 6 }, () => http('POST', `/api/knowledgebases/${owner.name}`, { key: owner.key, form: { name } })));
      assert.deepEqual(results.map((r) => r.status).sort(), [201, 409, 409, 409, 409, 409]);
      for (const r of results.filter((x) => x.status === 409)) assertRejected(r, 409);
      assert.equal((await kbNames()).filter((n) => n === name).length, 1);
    });
  });

  describe('malformed bodies', () => {
    const documentsUrl = () => `/api/documents/${owner.name}/${kb}`;
    const sendRaw = (url: string, body: string | Buffer, contentType: string, key = owner.key) => http('POST', url, { key, rawBody: { body, contentType } });

    it('multipart without a boundary is 400', async () => {
      await rejectedUpload(() => sendRaw(documentsUrl(), 'type=file', 'multipart/form-data'), 400, /multipart/i);
    });

    it('multipart whose body uses another boundary than the header is 400', async () => {
      const body = multipart('the-real-boundary', [{ name: 'type', value: 'file' }, { name: 'folder', value: folder }, { name: 'file', value: 'text', filename: 'a.txt' }]);
      await rejectedUpload(() => sendRaw(documentsUrl(), body, 'multipart/form-data; boundary=another-boundary'), 400, /multipart|form/i);
    });

    it('a multipart body truncated inside the file is 400 and leaves no partial upload', async () => {
      const boundary = 'trunc-boundary-1234';
      const full = multipart(boundary, [
        { name: 'type', value: 'file' },
        { name: 'folder', value: folder },
        { name: 'file', value: Buffer.from('A long line of perfectly good text. '.repeat(2000)), filename: 'cut.txt' },
      ]);
      const cut = full.subarray(0, Math.floor(full.length * 0.6));
      await rejectedUpload(() => sendRaw(documentsUrl(), cut, `multipart/form-data; boundary=${boundary}`), 400, /multipart|form/i);
    });

    it('a multipart part with a malformed header is 400', async () => {
      const boundary = 'bad-header-boundary';
      const body = Buffer.from(`--${boundary}\r\nthis line is not a header\r\n\r\nvalue\r\n--${boundary}--\r\n`);
      await rejectedUpload(() => sendRaw(documentsUrl(), body, `multipart/form-data; boundary=${boundary}`), 400);
    });

    it('garbage sent as multipart to the knowledge base and partner forms is 400', async () => {
      const before = await kbNames();
      assertRejected(await sendRaw(`/api/knowledgebases/${owner.name}`, 'just some bytes', 'multipart/form-data; boundary=xyz'), 400, /multipart|form/i);
      assert.deepEqual(await kbNames(), before);
      const name = unique('partner');
      assertRejected(await sendRaw(`/api/partners/${name}`, '--xyz\r\nContent-Disposition: form-data; name="max_documents"\r\n\r\n5', 'multipart/form-data; boundary=xyz', admin), 400, /multipart|form/i);
      assertRejected(await http('GET', `/api/partners/${name}`, { key: admin }), 404);
    });

    it('a JSON body on a form endpoint is 400', async () => {
      const name = unique('kb');
      assertRejected(await http('POST', `/api/knowledgebases/${owner.name}`, { key: owner.key, json: { name } }), 400, /multipart\/form-data/);
      assert.ok(!(await kbNames()).includes(name));
    });

    it('malformed JSON on /api/rag-test/search is 400', async () => {
      assertRejected(await sendRaw('/api/rag-test/search', '{"partner": "x", "kb": ', 'application/json'), 400, /JSON/);
      assertRejected(await sendRaw('/api/rag-test/search', "{'partner': 'x'}", 'application/json'), 400, /JSON/);
    });

    it('JSON sent with another content type is 400', async () => {
      const body = JSON.stringify({ partner: owner.name, kb, user_message: 'tides' });
      assertRejected(await sendRaw('/api/rag-test/search', body, 'text/plain'), 400, /application\/json/);
      assertRejected(await sendRaw('/api/rag-test/search', body, 'application/x-www-form-urlencoded'), 400, /application\/json/);
    });

    it('a JSON body that is not an object, or no body at all, is 400', async () => {
      assertRejected(await http('POST', '/api/rag-test/search', { key: owner.key, json: [owner.name, kb, 'tides'] }), 400);
      assertRejected(await http('POST', '/api/rag-test/search', { key: owner.key, json: 'tides' }), 400);
      assertRejected(await http('POST', '/api/rag-test/search', { key: owner.key, headers: { 'Content-Type': 'application/json' } }), 400);
    });

    it('a user_message over 20,000 characters is 400; exactly 20,000 is accepted', async () => {
      const search = (user_message: string) => http('POST', '/api/rag-test/search', { key: owner.key, json: { partner: owner.name, kb, user_message } });
      assertRejected(await search('a'.repeat(20_001)), 400, /user_message/);
      const atLimit = await search('tide '.repeat(4000));
      assert.equal(atLimit.status, 200, JSON.stringify(atLimit.body));
    });

    it('a robot_message over 20,000 characters is 400', async () => {
      const res = await http('POST', '/api/rag-test/search', { key: owner.key, json: { partner: owner.name, kb, user_message: 'tides', robot_message: 'b'.repeat(20_001) } });
      assertRejected(res, 400, /robot_message/);
    });
  });

  describe('unknown routes', () => {
    for (const [method, url] of [
      ['GET', '/api/no-such-endpoint'],
      ['GET', '/nothing-here'],
      ['POST', '/api/knowledgebases'],
      ['DELETE', '/api/content_types'],
      ['GET', '/api/documents/a/b/c/d/e/f'],
    ] as const) {
      it(`${method} ${url} is a JSON 404 {detail}`, async () => {
        const res = await http(method, url, { key: admin });
        assertRejected(res, 404, /no route/);
        assert.match(res.headers.get('content-type') ?? '', /application\/json/);
      });
    }

    it('an unknown route under /v3/ answers in the messaging error shape', async () => {
      const res = await http('POST', '/v3/no-such-endpoint', { key: admin, json: { model: 'x' } });
      assert.equal(res.status, 404);
      assert.match(res.headers.get('content-type') ?? '', /application\/json/);
      const detail = res.body.detail;
      assert.equal(typeof detail, 'object');
      assert.equal(detail.code, 'not_found');
      assert.equal(typeof detail.message, 'string');
      assert.ok(detail.message.length > 0);
      assert.deepEqual(detail.context, { request_id: res.headers.get('x-request-id'), endpoint: '/v3/no-such-endpoint' });
    });

    it('the /v3/ error context echoes an incoming request id', async () => {
      const requestId = `trace-${crypto.randomBytes(6).toString('hex')}`;
      const res = await http('GET', '/v3/engines/unknown?x=1', { headers: { 'X-Request-Id': requestId } });
      assert.equal(res.status, 404);
      assert.equal(res.body.detail.context.request_id, requestId);
      assert.equal(res.body.detail.context.endpoint, '/v3/engines/unknown');
    });
  });

  describe('upload validation', () => {
    const zip = Buffer.concat([Buffer.from([0x50, 0x4b, 0x03, 0x04]), Buffer.from('fake zip entry')]);
    const pdf = Buffer.from('%PDF-1.7\n1 0 obj\n<< /Type /Catalog >>\nendobj\n');
    const cases: Array<[string, { name: string; content: string | Buffer }, RegExp]> = [
      ['an archive (.zip)', { name: 'bundle.zip', content: zip }, /archives \(\.zip\) are not accepted/],
      ['an archive (.tar.gz)', { name: 'bundle.tar.gz', content: Buffer.from([0x1f, 0x8b, 0x08, 0x00]) }, /archives \(\.gz\) are not accepted/],
      ['a PDF renamed .txt', { name: 'report.txt', content: pdf }, /report\.txt is a PDF, not a \.txt file/],
      ['a ZIP renamed .md', { name: 'notes.md', content: zip }, /ZIP/],
      ['an empty .txt', { name: 'empty.txt', content: '' }, /empty\.txt is empty/],
      ['binary data with NUL bytes as .md', { name: 'data.md', content: Buffer.from([0x23, 0x20, 0x48, 0x69, 0x00, 0x01, 0x02, 0x00, 0x0a]) }, /binary/],
      ['an unsupported extension (.exe)', { name: 'setup.exe', content: Buffer.from('MZ\x90\x00\x03') }, /\.exe files are not supported/],
      ['a file without an extension', { name: 'README', content: 'plain text' }, /no file extension/],
    ];
    for (const [what, file, detail] of cases) {
      it(`${what} is 400 naming the reason, and stores nothing`, async () => {
        await rejectedUpload(() => upload({ type: 'file', folder, file }), 400, detail);
      });
    }

    it('the same upload as a plain .txt is accepted (control)', async () => {
      const before = await documentCount();
      const res = await upload({ type: 'file', folder, file: textFile('fine.txt') });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(await documentCount(), before + 1);
      await eventually('the upload directory to be empty', async () => fs.readdirSync(uploadDir).length === 0, 5_000);
    });
  });

  describe('max_documents', () => {
    it('a partner with max_documents=1 can upload one document; the second is 403 QUOTA_EXCEEDED', async () => {
      const p = await newPartner(http, { max_documents: '1' });
      const kbA = unique('kb');
      const kbB = unique('kb');
      for (const k of [kbA, kbB]) {
        assert.equal((await http('POST', `/api/knowledgebases/${p.name}`, { key: p.key, form: { name: k } })).status, 201);
        assert.equal((await http('POST', `/api/folders/${p.name}/${k}`, { key: p.key, form: { name: 'inbox' } })).status, 201);
      }
      const idOf = async (k: string) => (await api.deps.db.knowledgeBase.findFirstOrThrow({ where: { name: k, partner: { name: p.name } } })).id;
      const [idA, idB] = [await idOf(kbA), await idOf(kbB)];

      const first = await upload({ type: 'file', folder: 'inbox', file: textFile('first.txt') }, p, kbA);
      assert.equal(first.status, 201, JSON.stringify(first.body));
      assert.equal(await documentCount(idA), 1);

      const second = await rejectedUpload(() => upload({ type: 'file', folder: 'inbox', file: textFile('second.txt') }, p, kbA), 403, /^QUOTA_EXCEEDED/, idA);
      assert.match(second.body.detail, /max_documents/);
      // The limit is per partner: another of its knowledge bases is refused as well.
      await rejectedUpload(() => upload({ type: 'file', folder: 'inbox', file: textFile('third.txt') }, p, kbB), 403, /^QUOTA_EXCEEDED/, idB);
      assert.equal(await api.deps.db.document.count({ where: { knowledgeBase: { partnerId: (await api.deps.db.partner.findUniqueOrThrow({ where: { name: p.name } })).id } } }), 1);
    });

    it('raising max_documents lets the next upload through', async () => {
      const p = await newPartner(http, { max_documents: '1' });
      const k = unique('kb');
      assert.equal((await http('POST', `/api/knowledgebases/${p.name}`, { key: p.key, form: { name: k } })).status, 201);
      assert.equal((await http('POST', `/api/folders/${p.name}/${k}`, { key: p.key, form: { name: 'inbox' } })).status, 201);
      assert.equal((await upload({ type: 'file', folder: 'inbox', file: textFile('1.txt') }, p, k)).status, 201);
      assertRejected(await upload({ type: 'file', folder: 'inbox', file: textFile('2.txt') }, p, k), 403, /^QUOTA_EXCEEDED/);
      assert.equal((await http('PUT', `/api/partners/${p.name}`, { key: admin, form: { max_documents: '2' } })).status, 200);
      assert.equal((await upload({ type: 'file', folder: 'inbox', file: textFile('2.txt') }, p, k)).status, 201);
    });
  });

  describe('request ids', () => {
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

    it('every response carries X-Request-Id: success, 4xx, unknown routes, malformed bodies', async () => {
      const responses = [
        await http('GET', '/api/content_types'),
        await http('GET', '/api/auth/me'),
        await http('GET', `/api/knowledgebases/${owner.name}`, { key: owner.key }),
        await http('GET', '/api/nowhere'),
        await http('GET', '/v3/nowhere'),
        await http('POST', '/api/rag-test/search', { key: owner.key, rawBody: { body: '{', contentType: 'application/json' } }),
        await http('POST', `/api/documents/${owner.name}/${kb}`, { key: owner.key, rawBody: { body: 'x', contentType: 'multipart/form-data' } }),
        await http('GET', '/openapi.json'),
      ];
      const ids = responses.map((r) => r.headers.get('x-request-id'));
      for (const [i, id] of ids.entries()) assert.match(id ?? '', uuid, `response ${i} (${responses[i]!.status}) has a generated request id`);
      assert.equal(new Set(ids).size, ids.length, 'each request gets its own id');
    });

    it('a valid incoming X-Request-Id is echoed', async () => {
      for (const id of ['abcdefgh', 'req-2024.01_ABC', crypto.randomUUID(), 'x'.repeat(128)]) {
        const ok = await http('GET', '/api/content_types', { headers: { 'X-Request-Id': id } });
        assert.equal(ok.headers.get('x-request-id'), id);
        const err = await http('GET', '/api/auth/me', { headers: { 'X-Request-Id': id } });
        assert.equal(err.status, 401);
        assert.equal(err.headers.get('x-request-id'), id);
      }
    });

    it('an invalid incoming X-Request-Id is replaced by a generated one', async () => {
      for (const id of ['short', 'has spaces in it', 'semi;colon;value', 'x'.repeat(129), '<script>alert(1)</script>']) {
        const res = await http('GET', '/api/content_types', { headers: { 'X-Request-Id': id } });
        const got = res.headers.get('x-request-id');
        assert.notEqual(got, id);
        assert.match(got ?? '', uuid);
      }
    });
  });
});
