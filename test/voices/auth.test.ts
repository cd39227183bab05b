import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { client, startApi, startWorker, type Call, type HttpResult, type RunningApi, type RunningWorker } from '../support/system.js';
import { newPartner, unique } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { jobFilesToken } from '../../lib/voices/job-files.js';
import { settled, speak, voicePath } from './support.js';

/**
 * Authentication and authorization of every voice route (spec 5, 7): the key in `X-Api-Key` or in
 * the `api_key` query parameter; no key and an unknown key are 401, another partner's key is 403,
 * the partner's own key and the administrator key are allowed. A rejected request changes nothing.
 * The signed download of the GPU job service needs no key, only a valid link.
 */
type Http = ReturnType<typeof client>;
type Partner = { name: string; key: string };
type Credential = 'no key' | 'a bad key' | "another partner's key" | "the partner's own key" | 'the admin key';
type Transport = 'X-Api-Key header' | 'api_key query parameter';

const credentials: Credential[] = ['no key', 'a bad key', "another partner's key", "the partner's own key", 'the admin key'];
const transports: Transport[] = ['X-Api-Key header', 'api_key query parameter'];

interface Prepared {
  path: string;
  call?: Omit<Call, 'key'>;
  unchanged?: () => Promise<void>;
}

interface Endpoint {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  /** Status of an allowed request. */
  ok: number;
  prepare: () => Promise<Prepared>;
}

const expected = (credential: Credential, ok: number) =>
  credential === 'no key' || credential === 'a bad key' ? 401 : credential === "another partner's key" ? 403 : ok;

const badKey = () => `pk_${crypto.randomBytes(32).toString('base64url')}`;

function assertDetail(res: HttpResult, status: number) {
  assert.equal(res.status, status, `expected ${status}, got ${res.status}: ${JSON.stringify(res.body)}`);
  assert.deepEqual(Object.keys(res.body ?? {}), ['detail'], `error body is exactly {detail}: ${JSON.stringify(res.body)}`);
  assert.ok(typeof res.body.detail === 'string' && res.body.detail.length > 0);
}

describe('voices: authentication and authorization of every route', function () {
  this.timeout(300_000);
  let api: RunningApi;
  let worker: RunningWorker;
  let http: Http;
  let owner: Partner;
  let other: Partner;
  let admin: string;
  let clip: Buffer;
  /** A voice with samples and an embedding (test samples, artefact). */
  const embedded = unique('Embedded');

  before(async () => {
    api = await startApi({ VOICE_RATE_LIMIT_PER_MINUTE: '0' });
    http = client(api.url);
    admin = testStack().adminApiKey;
    [worker, clip] = await Promise.all([startWorker(), speak('The library on the corner of the square opens at nine every morning.', 'flite-kal').then((f) => fs.readFileSync(f))]);
    owner = await newPartner(http);
    other = await newPartner(http);
    assert.equal((await http('POST', `/api/voices/${owner.name}/empty`, { key: owner.key, form: { name: embedded } })).status, 201);
    assert.equal((await http('POST', `${voicePath(owner.name, embedded)}/samples`, { key: owner.key, form: { file: { name: 'a.wav', content: clip } } })).status, 201);
    assert.equal((await http('POST', `${voicePath(owner.name, embedded)}/embed`, { key: owner.key })).status, 202);
    const v = await settled(http, owner.key, owner.name, embedded);
    assert.equal(v.status.embedding, 'completed', JSON.stringify(v.status));
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
  });

  const keyFor = (credential: Credential): string | null =>
    ({ 'no key': null, 'a bad key': badKey(), "another partner's key": other.key, "the partner's own key": owner.key, 'the admin key': admin })[credential];

  const voiceRow = (name: string) => api.deps.db.voice.findFirst({ where: { name, partner: { name: owner.name } }, include: { samples: true } });
  /** A fresh empty voice of the owner (with one uploaded sample when asked). */
  const freshVoice = async (withSample = false) => {
    const name = unique('Voice');
    assert.equal((await http('POST', `/api/voices/${owner.name}/empty`, { key: admin, form: { name } })).status, 201);
    if (withSample) assert.equal((await http('POST', `${voicePath(owner.name, name)}/samples`, { key: admin, form: { file: { name: 'a.wav', content: clip } } })).status, 201);
    return name;
  };
  const shared = (path: () => string) => async (): Promise<Prepared> => ({ path: path() });

  const endpoints: Endpoint[] = [
    { method: 'GET', path: '/api/voices/{partner}', ok: 200, prepare: shared(() => `/api/voices/${owner.name}`) },
    {
      method: 'POST', path: '/api/voices/{partner}', ok: 201,
      prepare: async () => {
        const name = unique('Created');
        return { path: `/api/voices/${owner.name}`, call: { form: { name } }, unchanged: async () => assert.equal(await voiceRow(name), null, 'no voice was created') };
      },
    },
    {
      method: 'POST', path: '/api/voices/{partner}/empty', ok: 201,
      prepare: async () => {
        const name = unique('Empty');
        return { path: `/api/voices/${owner.name}/empty`, call: { form: { name } }, unchanged: async () => assert.equal(await voiceRow(name), null, 'no voice was created') };
      },
    },
    { method: 'GET', path: '/api/voices/{partner}/{voice}', ok: 200, prepare: shared(() => voicePath(owner.name, embedded)) },
    {
      method: 'DELETE', path: '/api/voices/{partner}/{voice}', ok: 200,
      prepare: async () => {
        const name = await freshVoice();
        return { path: voicePath(owner.name, name), unchanged: async () => assert.notEqual(await voiceRow(name), null, 'the voice still exists') };
      },
    },
    {
      method: 'PUT', path: '/api/voices/{partner}/{voice}/name', ok: 200,
      prepare: async () => {
        const name = await freshVoice();
        return { path: `${voicePath(owner.name, name)}/name`, call: { form: { name: unique('Renamed') } }, unchanged: async () => assert.notEqual(await voiceRow(name), null, 'the voice keeps its name') };
      },
    },
    {
      method: 'POST', path: '/api/voices/{partner}/{voice}/samples', ok: 201,
      prepare: async () => {
        const name = await freshVoice();
        return { path: `${voicePath(owner.name, name)}/samples`, call: { form: { file: { name: 'b.wav', content: clip } } }, unchanged: async () => assert.equal((await voiceRow(name))!.samples.length, 0, 'no sample was added') };
      },
    },
    { method: 'GET', path: '/api/voices/{partner}/{voice}/samples/{index}', ok: 200, prepare: shared(() => `${voicePath(owner.name, embedded)}/samples/0`) },
    {
      method: 'DELETE', path: '/api/voices/{partner}/{voice}/samples/{index}', ok: 200,
      prepare: async () => {
        const name = await freshVoice(true);
        return { path: `${voicePath(owner.name, name)}/samples/0`, unchanged: async () => assert.equal((await voiceRow(name))!.samples.length, 1, 'the sample is still there') };
      },
    },
    { method: 'GET', path: '/api/voices/{partner}/{voice}/samples-bundle', ok: 200, prepare: shared(() => `${voicePath(owner.name, embedded)}/samples-bundle`) },
    {
      // An empty voice has no original: an authorized caller gets the 409 that says so, and no job starts.
      method: 'POST', path: '/api/voices/{partner}/{voice}/split', ok: 409,
      prepare: async () => {
        const name = await freshVoice();
        return { path: `${voicePath(owner.name, name)}/split`, unchanged: async () => assert.equal((await voiceRow(name))!.splitGeneration, 0) };
      },
    },
    {
      // No samples: an authorized caller gets the 409 that says so.
      method: 'POST', path: '/api/voices/{partner}/{voice}/embed', ok: 409,
      prepare: async () => {
        const name = await freshVoice();
        return { path: `${voicePath(owner.name, name)}/embed`, unchanged: async () => assert.equal((await voiceRow(name))!.embedGeneration, 0) };
      },
    },
    { method: 'GET', path: '/api/voices/{partner}/{voice}/test-samples', ok: 200, prepare: shared(() => `${voicePath(owner.name, embedded)}/test-samples?tts_type=builtin`) },
    {
      method: 'GET', path: '/api/voices/{partner}/{voice}/test-samples/{filename}', ok: 200,
      prepare: async () => {
        const row = await api.deps.db.voiceTestSample.findFirstOrThrow({ where: { voice: { name: embedded } } });
        return { path: `${voicePath(owner.name, embedded)}/test-samples/${row.filename}?tts_type=builtin` };
      },
    },
    {
      method: 'DELETE', path: '/api/voices/{partner}/{voice}/test-files/{tts_type}', ok: 200,
      // Deleting test samples of a type the voice has none of: allowed and harmless, so the embedded voice keeps its own.
      prepare: shared(() => `${voicePath(owner.name, embedded)}/test-files/none-here`),
    },
    {
      method: 'PUT', path: '/api/voices/{partner}/{voice}/preferred-sample', ok: 200,
      prepare: async () => {
        const name = await freshVoice(true);
        return { path: `${voicePath(owner.name, name)}/preferred-sample`, call: { form: { sample_index: '0' } }, unchanged: async () => assert.equal((await voiceRow(name))!.preferredSampleIndex, null) };
      },
    },
    { method: 'GET', path: '/api/voices/{partner}/{voice}/embedding-zip', ok: 200, prepare: shared(() => `${voicePath(owner.name, embedded)}/embedding-zip`) },
  ];

  it('the table covers every partner-scoped route of the voice interface, each taking the api_key query parameter', async () => {
    const { voiceRoutes } = await import('../../api/voices/routes.js');
    const routes = voiceRoutes(api.deps);
    const scoped = routes.filter((r) => r.access !== 'none');
    assert.deepEqual(scoped.map((r) => `${r.method.toUpperCase()} ${r.path}`).sort(), endpoints.map((e) => `${e.method} ${e.path}`).sort());
    assert.ok(scoped.every((r) => r.access === 'partner' && r.queryKey === 'api_key'));
    assert.deepEqual(routes.filter((r) => r.access === 'none').map((r) => r.path), ['/api/voice-job-files/{token}']);
  });

  it('the OpenAPI document lists every voice route, with the api_key query parameter where a key is taken', async () => {
    const { voiceRoutes } = await import('../../api/voices/routes.js');
    const doc = (await http('GET', '/openapi.json')).body;
    for (const route of voiceRoutes(api.deps)) {
      const op = doc.paths[route.path]?.[route.method];
      assert.ok(op, `${route.method.toUpperCase()} ${route.path} is documented`);
      assert.deepEqual(op.tags, ['voices']);
      const keyParameter = op.parameters.find((p: any) => p.name === 'api_key');
      if (route.access === 'none') {
        assert.deepEqual(op.security, []);
        assert.equal(keyParameter, undefined);
      } else {
        assert.deepEqual(op.security, [{ ApiKey: [] }]);
        assert.equal(keyParameter?.in, 'query', `${route.path} documents api_key`);
      }
    }
    assert.equal(doc.paths['/api/voices/{partner}/{voice}/split'].post.requestBody.content['application/x-www-form-urlencoded'].schema.properties.max_samples.maximum, 100);
    assert.deepEqual(doc.paths['/api/voices/{partner}'].post.requestBody.content['multipart/form-data'].schema.properties.file, { type: 'string', format: 'binary' });
  });

  for (const endpoint of endpoints) {
    describe(`${endpoint.method} ${endpoint.path}`, () => {
      for (const transport of transports) {
        for (const credential of credentials) {
          const status = expected(credential, endpoint.ok);
          const allowed = status === endpoint.ok;
          it(`${allowed ? 'allows' : `rejects with ${status}`} ${credential} (${transport})`, async () => {
            const prepared = await endpoint.prepare();
            const key = keyFor(credential);
            let path = prepared.path;
            if (key && transport === 'api_key query parameter') path += `${path.includes('?') ? '&' : '?'}api_key=${encodeURIComponent(key)}`;
            const res = await http(endpoint.method, path, { ...prepared.call, key: transport === 'X-Api-Key header' ? key : null });
            if (allowed) {
              assert.equal(res.status, endpoint.ok, `expected ${endpoint.ok}, got ${res.status}: ${JSON.stringify(res.body)}`);
            } else {
              assertDetail(res, status);
              await prepared.unchanged?.();
            }
          });
        }
      }
    });
  }

  describe('how the key is sent', () => {
    it('a header and the query parameter with different keys are refused with 401; the same key in both is fine', async () => {
      const path = `/api/voices/${owner.name}`;
      assertDetail(await http('GET', `${path}?api_key=${encodeURIComponent(owner.key)}`, { key: admin }), 401);
      assertDetail(await http('GET', `${path}?api_key=${encodeURIComponent(owner.key)}&api_key=${encodeURIComponent(admin)}`), 401);
      assert.equal((await http('GET', `${path}?api_key=${encodeURIComponent(owner.key)}`, { key: owner.key })).status, 200);
      assert.equal((await http('GET', path, { headers: { Authorization: `Bearer ${owner.key}` } })).status, 200);
    });

    it('api_key works only on voice routes, never on other interfaces', async () => {
      assertDetail(await http('GET', `/api/knowledgebases/${owner.name}?api_key=${encodeURIComponent(owner.key)}`), 401);
      assertDetail(await http('GET', `/api/auth/me?api_key=${encodeURIComponent(admin)}`), 401);
    });

    it('a voice of another partner is not found with the admin key under the wrong partner, and 403 with the other key', async () => {
      assertDetail(await http('GET', voicePath(other.name, embedded), { key: admin }), 404);
      assertDetail(await http('GET', voicePath(owner.name, embedded), { key: other.key }), 403);
    });

    it('the GPU job service download needs no key but a valid, unaltered, unexpired link', async () => {
      const voice = await api.deps.db.voice.findFirstOrThrow({ where: { name: embedded } });
      const config = api.deps.config;
      const good = jobFilesToken(config, voice.id, new Date(Date.now() + 60_000));
      const ok = await fetch(`${api.url}/api/voice-job-files/${good}`);
      assert.equal(ok.status, 200);
      assert.equal(ok.headers.get('content-type'), 'application/zip');
      const tampered = good.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'));
      assertDetail(await http('GET', `/api/voice-job-files/${tampered}`), 404);
      const otherVoice = jobFilesToken(config, crypto.randomUUID(), new Date(Date.now() + 60_000));
      assertDetail(await http('GET', `/api/voice-job-files/${otherVoice}`), 404);
      assertDetail(await http('GET', `/api/voice-job-files/${jobFilesToken(config, voice.id, new Date(Date.now() - 1000))}`), 404);
      const [id, exp, sig] = good.split('.');
      assertDetail(await http('GET', `/api/voice-job-files/${id}.${Number(exp) + 3600}.${sig}`), 404);
    });
  });
});
