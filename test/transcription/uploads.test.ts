import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import { AssemblyAI } from 'assemblyai';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newPartner } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { speak, wer } from '../support/audio.js';
import { binary, startAudioHost } from '../support/audio-host.js';
import { uploadFolder } from '../../api/http/upload-folder.js';

/**
 * POST /v2/upload: AssemblyAI's clients send a local file there first and submit the `upload_url`
 * they get back as the transcript's `audio_url`. The upload is the partner's own, kept for
 * TRANSCRIPT_UPLOAD_RETENTION_SECONDS and then removed by the reconciler (this file's worker runs
 * it every second), and removed with its partner.
 */
describe('transcription: uploading a local file first (POST /v2/upload)', function () {
  this.timeout(300_000);
  const env = { TEMPORAL_TASK_QUEUE: `uploads-${process.pid}`, RECONCILE_INTERVAL_SECONDS: '1', TRANSCRIPTION_RATE_LIMIT_PER_MINUTE: '0', TRANSCRIPT_PENDING_UPLOADS_PER_PARTNER: '2' };
  let api: RunningApi;
  let worker: RunningWorker;
  let call: ReturnType<typeof client>;
  let partner: { name: string; key: string };
  let clipPath: string;
  const spoken = 'Please call the doctor tomorrow morning about the weather report.';

  before(async () => {
    api = await startApi(env);
    worker = await startWorker(env);
    call = client(api.url);
    partner = await newPartner(call);
    clipPath = await speak(spoken, 'flite-kal');
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
  });

  const upload = (key: string, body: Buffer | string, contentType = 'application/octet-stream') => call('POST', '/v2/upload', { key, rawBody: { contentType, body } });
  const uploadRow = (uploadUrl: string) => api.deps.db.audioUpload.findUnique({ where: { id: uploadUrl.split('/').pop()! } });
  const storedFile = (partnerId: string | null, uploadUrl: string) => `audio-uploads/${partnerId ?? 'admin'}/${uploadUrl.split('/').pop()}.wav`;
  const partnerId = async (name: string) => (await api.deps.db.partner.findUniqueOrThrow({ where: { name } })).id;

  it("AssemblyAI's client transcribes a local file: upload, submit of its upload_url, polling, text", async () => {
    const assemblyai = new AssemblyAI({ apiKey: partner.key, baseUrl: api.url });
    const transcript = await assemblyai.transcripts.transcribe({ audio: clipPath }, { pollingInterval: 250 });
    assert.equal(transcript.status, 'completed', JSON.stringify(transcript));
    assert.match(transcript.audio_url, new RegExp(`^${api.url}/v2/upload/[0-9a-f-]{36}$`));
    assert.ok(wer(spoken, transcript.text ?? '') <= 0.3, transcript.text ?? '');
    const row = await api.deps.db.transcript.findUniqueOrThrow({ where: { id: transcript.id.split('/').pop()! } });
    assert.equal(row.sourceKind, 'upload');
    assert.equal(row.audioKind, 'wav');
    // A submitted upload is used up: the transcript had its own copy.
    assert.equal(await uploadRow(transcript.audio_url), null);
    assert.equal(await api.deps.storage.exists(storedFile(await partnerId(partner.name), transcript.audio_url)), false);
    const again = await call('POST', '/v2/transcript', { key: partner.key, json: { audio_url: transcript.audio_url } });
    assert.equal(again.status, 422, JSON.stringify(again.body));
    assert.match(again.body.errors.audio_url[0], /was transcribed already/);
  });

  it('a partner holds at most TRANSCRIPT_PENDING_UPLOADS_PER_PARTNER uploads not yet submitted (here 2); submitting one makes room', async () => {
    const busy = await newPartner(call);
    const clip = fs.readFileSync(clipPath);
    const first = await upload(busy.key, clip);
    assert.equal((await upload(busy.key, clip)).status, 200);
    const refused = await upload(busy.key, clip);
    assert.equal(refused.status, 429, JSON.stringify(refused.body));
    assert.match(refused.body.error, /at most 2 uploads of a partner wait to be transcribed at once/);
    assert.ok(Number(refused.headers.get('retry-after')) > 0);
    assert.equal((await upload((await newPartner(call)).key, clip)).status, 200, 'another partner is not affected');
    const submitted = await call('POST', '/v2/transcript', { key: busy.key, json: { audio_url: first.body.upload_url } });
    assert.equal(submitted.status, 200, JSON.stringify(submitted.body));
    assert.equal((await upload(busy.key, clip)).status, 200);
  });

  it("another partner's key cannot use the upload_url, and a made-up one is refused too", async () => {
    const uploaded = await upload(partner.key, fs.readFileSync(clipPath));
    assert.equal(uploaded.status, 200, JSON.stringify(uploaded.body));
    const other = await newPartner(call);
    const before = await api.deps.db.transcript.count({ where: { partnerId: await partnerId(other.name) } });
    for (const audioUrl of [uploaded.body.upload_url, `${api.url}/v2/upload/00000000-0000-4000-8000-000000000000`]) {
      const refused = await call('POST', '/v2/transcript', { key: other.key, json: { audio_url: audioUrl } });
      assert.equal(refused.status, 422, JSON.stringify(refused.body));
      assert.match(refused.body.errors.audio_url[0], /names an upload that does not exist, has expired, was transcribed already, or was uploaded with another partner's key/);
    }
    assert.equal(await api.deps.db.transcript.count({ where: { partnerId: await partnerId(other.name) } }), before, 'nothing was queued');
  });

  it('an upload_url reached through another address of this API (a second hostname, a proxy path prefix) is still the upload; that path on another host naming no upload is fetched as usual', async () => {
    const other = await newPartner(call);
    const clip = fs.readFileSync(clipPath);
    const ids = [];
    for (const rewrite of [(u: string) => u.replace('//127.0.0.1:', '//localhost:'), (u: string) => `http://gateway.invalid/speech${new URL(u).pathname}`]) {
      const uploaded = await upload(other.key, clip);
      assert.equal(uploaded.status, 200, JSON.stringify(uploaded.body));
      const submitted = await call('POST', '/v2/transcript', { key: other.key, json: { audio_url: rewrite(uploaded.body.upload_url) } });
      assert.equal(submitted.status, 200, JSON.stringify(submitted.body));
      const row = await api.deps.db.transcript.findUniqueOrThrow({ where: { id: submitted.body.id.split('/').pop() } });
      assert.equal(row.sourceKind, 'upload');
      ids.push(submitted.body.id);
      await eventually('the submitted upload to be used up', async () => (await uploadRow(uploaded.body.upload_url)) === null);
    }

    const path = '/v2/upload/11111111-2222-4333-8444-555555555555';
    const host = await startAudioHost({ [path]: binary(clip, 'audio/wav') });
    try {
      const elsewhere = host.url(path);
      const submitted = await call('POST', '/v2/transcript', { key: other.key, json: { audio_url: elsewhere } });
      assert.equal(submitted.status, 200, JSON.stringify(submitted.body));
      assert.equal((await api.deps.db.transcript.findUniqueOrThrow({ where: { id: submitted.body.id.split('/').pop() } })).sourceKind, 'url');
      ids.push(submitted.body.id);
      for (const id of ids) {
        await eventually(`transcript ${id} to complete`, async () => (await call('GET', id, { key: other.key })).body.status === 'completed');
      }
      assert.equal(host.requestsTo(path), 1, 'the other host was asked for its audio');
    } finally {
      await host.close();
    }
  });

  it('a body that is not audio, an empty one and one over 100 MB are refused (422 on file), and nothing is kept', async () => {
    const count = () => api.deps.db.audioUpload.count();
    const before = await count();
    const text = await upload(partner.key, 'just some text, not a recording', 'text/plain');
    assert.equal(text.status, 422, JSON.stringify(text.body));
    assert.equal(text.body.message, 'The request is invalid: file is not an audio file this service recognises (mp3, wav, ogg, flac, m4a, mp4, webm)');
    const empty = await upload(partner.key, Buffer.alloc(0));
    assert.equal(empty.status, 422, JSON.stringify(empty.body));
    assert.match(empty.body.errors.file[0], /is empty/);

    // The declared length alone is refused: the client need not send 100 MB to hear it.
    const tooLarge = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const url = new URL('/v2/upload', api.url);
      const req = http.request(url, { method: 'POST', headers: { 'X-API-Key': partner.key, 'Content-Type': 'application/octet-stream', 'Content-Length': String(101 * 1024 * 1024) } }, (res) => {
        let body = '';
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      });
      req.on('error', reject);
      req.write(Buffer.alloc(1024));
    });
    // The interface answers invalid input with 422 {message, errors}, a file over its size included (as for a multipart `audio`).
    assert.equal(tooLarge.status, 422, tooLarge.body);
    assert.deepEqual(JSON.parse(tooLarge.body).errors, { file: ['is larger than the upload limit of this endpoint (100 MiB)'] });

    // Chunked, with no length declared: counted as it streams, refused past 100 MiB, the part written removed.
    const megabyte = Buffer.alloc(1024 * 1024, 1);
    let sent = 0;
    const body = new ReadableStream({
      pull(controller) {
        if (sent++ < 110) controller.enqueue(new Uint8Array(megabyte));
        else controller.close();
      },
    });
    const streamed = await fetch(`${api.url}/v2/upload`, { method: 'POST', headers: { 'X-API-Key': partner.key, 'Content-Type': 'application/octet-stream' }, body, duplex: 'half' } as RequestInit);
    assert.equal(streamed.status, 422);
    assert.deepEqual((await streamed.json()).errors, { file: ['is larger than the upload limit of this endpoint (100 MiB)'] });
    assert.deepEqual(fs.readdirSync(uploadFolder(api.deps.config.storageDir)), [], 'no file of the refused uploads is left');
    assert.equal(await count(), before);
  });

  it('an expired upload is refused, then removed with its file by the reconciler', async () => {
    const uploaded = await upload(partner.key, fs.readFileSync(clipPath));
    assert.equal(uploaded.status, 200, JSON.stringify(uploaded.body));
    const file = storedFile(await partnerId(partner.name), uploaded.body.upload_url);
    assert.equal(await api.deps.storage.exists(file), true);
    await api.deps.db.audioUpload.update({ where: { id: uploaded.body.upload_url.split('/').pop() }, data: { expiresAt: new Date(Date.now() - 1000) } });
    const refused = await call('POST', '/v2/transcript', { key: partner.key, json: { audio_url: uploaded.body.upload_url } });
    assert.equal(refused.status, 422, JSON.stringify(refused.body));
    await eventually('the expired upload to be removed', async () => (await uploadRow(uploaded.body.upload_url)) === null);
    assert.equal(await api.deps.storage.exists(file), false);
  });

  it("a partner's uploads go with the partner", async () => {
    const leaving = await newPartner(call);
    const id = await partnerId(leaving.name);
    const uploaded = await upload(leaving.key, fs.readFileSync(clipPath));
    assert.equal(uploaded.status, 200, JSON.stringify(uploaded.body));
    assert.equal(await api.deps.storage.exists(storedFile(id, uploaded.body.upload_url)), true);
    assert.equal((await call('DELETE', `/api/partners/${leaving.name}`, { key: testStack().adminApiKey })).status, 200);
    await eventually('the partner and its upload file to be removed', async () => (await api.deps.db.partner.findUnique({ where: { id } })) === null && !(await api.deps.storage.exists(storedFile(id, uploaded.body.upload_url))));
    assert.equal(await uploadRow(uploaded.body.upload_url), null);
  });
});
