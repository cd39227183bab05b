import assert from 'node:assert/strict';
import fs from 'node:fs';
import { client, eventually, startApi, startWorker, type RunningApi } from '../support/system.js';
import { newPartner } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { storedNames } from '../support/stored-files.js';
import { uploadFolder } from '../../api/http/upload-folder.js';
import { newQuotaKey } from '../messaging/support.js';
import { encodeAs, speak } from '../support/audio.js';
import { pdf } from '../support/samples.js';
import { transcriptWorkflowId } from '../../lib/contracts/transcript.js';

/**
 * /v2/transcript's refusals: invalid input (422 per field, nothing stored, no workflow), keys
 * (401), ownership (404), and the per-partner rate and concurrency limits (429 + Retry-After).
 */
describe('transcription: validation, keys, ownership and limits', function () {
  this.timeout(240_000);
  let api: RunningApi;
  let http: ReturnType<typeof client>;
  let partner: { name: string; key: string };
  let mp3: Buffer;

  before(async () => {
    api = await startApi({ TRANSCRIPTION_RATE_LIMIT_PER_MINUTE: '0', TRANSCRIPTION_CONCURRENCY_LIMIT: '0' });
    http = client(api.url);
    partner = await newPartner(http);
    mp3 = fs.readFileSync(await encodeAs(await speak('Hello there.', 'flite-kal'), 'mp3'));
  });
  after(async () => {
    await api?.close();
  });

  /** Uploads waiting in the API's scratch folder, and stored transcript files. */
  const stored = async () => {
    const uploads = uploadFolder(api.deps.config.storageDir);
    return [...(fs.existsSync(uploads) ? fs.readdirSync(uploads) : []), ...(await storedNames('transcripts'))];
  };
  const rows = () => api.deps.db.transcript.count();

  /** A refused request leaves no row, no stored file and no workflow. */
  async function refused(call: () => Promise<{ status: number; body: any; headers: Headers }>, field: string, message?: RegExp) {
    const [before, files] = [await rows(), await stored()];
    const res = await call();
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.equal(typeof res.body.message, 'string');
    assert.ok(Array.isArray(res.body.errors?.[field]), `errors.${field} in ${JSON.stringify(res.body)}`);
    if (message) assert.match(res.body.errors[field].join(' '), message);
    assert.equal(await rows(), before);
    // Multer's temporary file is removed once the answer is sent.
    await eventually('uploads to be cleaned', async () => (await stored()).length === files.length);
    return res;
  }

  const submit = (c: Parameters<typeof http>[2]) => http('POST', '/v2/transcript', { key: partner.key, ...c });

  it('neither audio_url nor a file: 422 on both fields', async () => {
    const res = await refused(() => submit({ json: {} }), 'audio_url', /required/);
    assert.ok(res.body.errors.audio);
    await refused(() => submit({ form: { language_code: 'en' } }), 'audio');
  });

  it('both audio_url and a file: 422 on audio', () =>
    refused(() => submit({ form: { audio_url: 'http://127.0.0.1:9/a.mp3', audio: { name: 'a.mp3', content: mp3 } } }), 'audio', /not both/));

  it('audio as a JSON member: 422 telling to upload it as a file', () => refused(() => submit({ json: { audio: 'aGVsbG8=' } }), 'audio', /multipart/));

  const invalid: Array<[string, Record<string, unknown>, string]> = [
    ['an unknown language_code', { language_code: 'xx' }, 'language_code'],
    ['a regional code of the wrong form', { language_code: 'en-US' }, 'language_code'],
    ['an audio_url that is not a URL', { audio_url: 'not a url' }, 'audio_url'],
    ['an ftp audio_url', { audio_url: 'ftp://example.com/a.mp3' }, 'audio_url'],
    ['101 boosted words', { boosted_words: Array.from({ length: 101 }, (_, i) => `word${i}`) }, 'boosted_words'],
    ['an empty boosted word', { boosted_words: ['ok', ''] }, 'boosted_words.1'],
    ['a blank boosted word', { boosted_words: ['ok', '   '] }, 'boosted_words'],
    ['a boosted word of 101 characters', { boosted_words: ['x'.repeat(101)] }, 'boosted_words.0'],
    ['filler_words that is not a boolean', { filler_words: 'maybe' }, 'filler_words'],
    ['an unknown field', { speaker_labels: true }, 'speaker_labels'],
  ];
  for (const [what, change, field] of invalid) {
    it(`422 on ${field} for ${what}`, () => refused(() => submit({ json: { audio_url: 'http://127.0.0.1:9/a.mp3', ...change } }), field));
  }

  it('an upload that is not audio, or whose content contradicts its extension: 422 on audio', async () => {
    await refused(() => submit({ form: { audio: { name: 'talk.mp3', content: pdf(['not audio']) } } }), 'audio', /PDF/);
    await refused(() => submit({ form: { audio: { name: 'talk.wav', content: mp3 } } }), 'audio', /MP3 file, not a \.wav/);
    await refused(() => submit({ form: { audio: { name: 'notes.txt', content: 'hello' } } }), 'audio', /not an audio file/);
  });

  it('an upload over 100 MB: 422 on audio', async () => {
    const big = Buffer.alloc(100 * 1024 * 1024 + 1);
    mp3.copy(big);
    await refused(() => submit({ form: { audio: { name: 'big.mp3', content: big } } }), 'audio', /upload limit/);
  });

  it('multipart takes repeated boosted_words[] (and a single boosted_words) and coerces the booleans', async () => {
    const fd = new FormData();
    fd.append('audio', new Blob([new Uint8Array(mp3)]), 'hello.mp3');
    for (const w of ['sunny', 'breeze', 'sunny']) fd.append('boosted_words[]', w);
    fd.append('filler_words', 'true');
    fd.append('format_text', 'false');
    const res = await fetch(`${api.url}/v2/transcript`, { method: 'POST', headers: { 'X-Api-Key': partner.key }, body: fd });
    assert.equal(res.status, 200, await res.clone().text());
    const id = ((await res.json()) as { id: string }).id.split('/').pop()!;
    const row = await api.deps.db.transcript.findUnique({ where: { id } });
    assert.deepEqual(row?.boostedWords, ['sunny', 'breeze']);
    assert.equal(row?.fillerWords, true);
    assert.equal(row?.formatText, false);
    assert.equal(row?.languageCode, 'en_us');
    const single = await submit({ form: { audio: { name: 'hello.mp3', content: mp3 }, boosted_words: 'quinoa' } });
    assert.equal(single.status, 200, JSON.stringify(single.body));
    const row2 = await api.deps.db.transcript.findUnique({ where: { id: single.body.id.split('/').pop() } });
    assert.deepEqual(row2?.boostedWords, ['quinoa']);
  });

  it('keys: none, unknown or a quota key is 401 {error} on both routes', async () => {
    const quota = (await newQuotaKey(http, { quota_type: 'any' })).key;
    for (const key of [undefined, 'pk_unknown', quota]) {
      const post = await http('POST', '/v2/transcript', { key, json: { audio_url: 'http://127.0.0.1:9/a.mp3' } });
      assert.equal(post.status, 401);
      assert.deepEqual(Object.keys(post.body), ['error']);
      const get = await http('GET', '/v2/transcript/00000000-0000-4000-8000-000000000000', { key });
      assert.equal(get.status, 401);
      assert.deepEqual(Object.keys(get.body), ['error']);
    }
  });

  it("another partner's, an unknown and a malformed id are the same 404 {error}; the administrator reads every transcript", async () => {
    const res = await submit({ json: { audio_url: 'http://127.0.0.1:9/a.mp3' } });
    assert.equal(res.status, 200);
    const other = await newPartner(http);
    for (const [key, id] of [[other.key, res.body.id], [partner.key, '/v2/transcript/00000000-0000-4000-8000-000000000000'], [partner.key, '/v2/transcript/not-a-uuid']]) {
      const r = await http('GET', id, { key });
      assert.equal(r.status, 404);
      assert.deepEqual(r.body, { error: 'transcript not found' });
    }
    const admin = await http('GET', res.body.id, { key: testStack().adminApiKey });
    assert.equal(admin.status, 200);
    assert.equal(admin.body.id, res.body.id);
  });

  it('an unknown path under /v2/transcript answers in the transcription shape', async () => {
    const r = await http('DELETE', '/v2/transcript/x/y', { key: partner.key });
    assert.equal(r.status, 404);
    assert.deepEqual(Object.keys(r.body), ['error']);
  });

  describe('per-partner limits', () => {
    let limited: RunningApi;
    let call: ReturnType<typeof client>;
    before(async () => {
      limited = await startApi({ TRANSCRIPTION_RATE_LIMIT_PER_MINUTE: '2', TRANSCRIPTION_CONCURRENCY_LIMIT: '1' });
      call = client(limited.url);
    });
    after(async () => {
      await limited?.close();
    });

    it('a second transcript in flight is 429 {error} with Retry-After; another partner is not affected; a finished one frees the slot', async () => {
      const a = await newPartner(http);
      const b = await newPartner(http);
      const upload = { audio: { name: 'hello.mp3', content: mp3 } };
      const first = await call('POST', '/v2/transcript', { key: a.key, form: upload });
      assert.equal(first.status, 200);
      const second = await call('POST', '/v2/transcript', { key: a.key, form: upload });
      assert.equal(second.status, 429);
      assert.deepEqual(Object.keys(second.body), ['error']);
      assert.match(second.body.error, /concurrency limit/);
      assert.match(second.headers.get('retry-after') ?? '', /^\d+$/);
      assert.equal((await call('POST', '/v2/transcript', { key: b.key, form: upload })).status, 200);
      const worker = await startWorker();
      try {
        await eventually('the first transcript to finish', async () => ['completed', 'error'].includes((await call('GET', first.body.id, { key: a.key })).body.status), 120_000);
      } finally {
        await worker.kill();
      }
      // The rate limit (2 a minute) now refuses: two were counted, the refused one too.
      const third = await call('POST', '/v2/transcript', { key: a.key, form: upload });
      assert.equal(third.status, 429);
      assert.match(third.body.error, /rate limit: 2 transcripts per minute/);
      assert.ok(Number(third.headers.get('retry-after')) >= 1);
    });

    it('a transcript whose workflow was stopped outside the service stops holding its slot (and ends in error)', async () => {
      const c = await newPartner(http);
      const stuck = await call('POST', '/v2/transcript', { key: c.key, json: { audio_url: 'http://127.0.0.1:9/a.mp3' } });
      assert.equal(stuck.status, 200);
      const id = stuck.body.id.split('/').pop();
      await limited.deps.temporal.workflow.getHandle(transcriptWorkflowId(id)).terminate('test: stopped by hand');
      await limited.deps.db.transcript.update({ where: { id }, data: { createdAt: new Date(Date.now() - 5 * 60_000) } });
      const next = await call('POST', '/v2/transcript', { key: c.key, json: { audio_url: 'http://127.0.0.1:9/b.mp3' } });
      assert.equal(next.status, 200, JSON.stringify(next.body));
      const old = await call('GET', stuck.body.id, { key: c.key });
      assert.equal(old.body.status, 'error');
      assert.match(old.body.error, /stopped outside the service/);
    });
  });
});
