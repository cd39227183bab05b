import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { AssemblyAI } from 'assemblyai';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newPartner } from '../support/fixtures.js';
import { speak, wer } from '../support/audio.js';

/**
 * The transcription interface is AssemblyAI's v2 shape: a partner who already uses AssemblyAI's
 * official Node client points it at this service and keeps their code. The client sends the key
 * bare in `Authorization`, uses AssemblyAI's option names, builds the polling path by appending the
 * id (which here is itself a path) to `/v2/transcript/`, and shows a failed request's `error`.
 */
describe("transcription through AssemblyAI's official client", function () {
  this.timeout(300_000);
  let api: RunningApi;
  let worker: RunningWorker;
  let partner: { name: string; key: string };
  let audioHost: http.Server;
  let audioUrl: string;
  const spoken = 'Please call the doctor tomorrow morning about the weather report.';

  before(async () => {
    api = await startApi({ TRANSCRIPTION_RATE_LIMIT_PER_MINUTE: '0' });
    worker = await startWorker();
    partner = await newPartner(client(api.url));
    const clip = fs.readFileSync(await speak(spoken, 'flite-kal'));
    audioHost = http.createServer((_req, res) => void res.writeHead(200, { 'content-type': 'audio/wav', 'content-length': clip.length }).end(clip));
    await new Promise<void>((resolve) => audioHost.listen(0, '127.0.0.1', resolve));
    audioUrl = `http://127.0.0.1:${(audioHost.address() as AddressInfo).port}/clip.wav`;
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
    audioHost?.closeAllConnections();
    audioHost?.close();
  });

  const assemblyai = () => new AssemblyAI({ apiKey: partner.key, baseUrl: api.url });

  it('transcribe() submits with AssemblyAI option names, polls to completion and reads the text', async () => {
    const transcript = await assemblyai().transcripts.transcribe({ audio: audioUrl, disfluencies: true, word_boost: ['doctor', 'weather'], language_detection: false }, { pollingInterval: 250 });
    assert.equal(transcript.status, 'completed', JSON.stringify(transcript));
    assert.match(transcript.id, /^\/v2\/transcript\/[0-9a-f-]{36}$/);
    assert.equal(transcript.audio_url, audioUrl);
    assert.ok(wer(spoken, transcript.text ?? '') <= 0.3, transcript.text ?? '');
    const row = await api.deps.db.transcript.findUniqueOrThrow({ where: { id: transcript.id.split('/').pop()! } });
    assert.equal(row.fillerWords, true, 'disfluencies is filler_words');
    assert.deepEqual(row.boostedWords, ['doctor', 'weather'], 'word_boost is boosted_words');
  });

  it('transcripts.delete() deletes a finished transcript at once; one in progress, or another partner\'s, is refused', async () => {
    // Audio served only once the test lets it go: the transcript waits in queued/processing meanwhile.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const clip = fs.readFileSync(await speak(spoken, 'flite-kal'));
    const slowHost = http.createServer((_req, res) => void released.then(() => res.writeHead(200, { 'content-type': 'audio/wav', 'content-length': clip.length }).end(clip)));
    await new Promise<void>((resolve) => slowHost.listen(0, '127.0.0.1', resolve));
    try {
      const submitted = await assemblyai().transcripts.submit({ audio_url: `http://127.0.0.1:${(slowHost.address() as AddressInfo).port}/slow.wav` });
      await assert.rejects(assemblyai().transcripts.delete(submitted.id), /can be deleted once it is completed or in error/);
      release();
      const done = await assemblyai().transcripts.waitUntilReady(submitted.id, { pollingInterval: 250 });
      assert.equal(done.status, 'completed');

      const other = await newPartner(client(api.url));
      await assert.rejects(new AssemblyAI({ apiKey: other.key, baseUrl: api.url }).transcripts.delete(done.id), /transcript not found/);
      assert.equal((await assemblyai().transcripts.get(done.id)).status, 'completed', 'still there for its partner');

      const deleted = await assemblyai().transcripts.delete(done.id);
      assert.equal(deleted.text, 'Deleted by user.');
      await assert.rejects(assemblyai().transcripts.get(done.id), /transcript not found/);
      // Its workflow, cancelled in its retention wait, removes the row and ends.
      const uuid = done.id.split('/').pop()!;
      await eventually('the row to be deleted', async () => (await api.deps.db.transcript.findUnique({ where: { id: uuid } })) === null);
      await eventually('the workflow to end', async () => (await api.deps.temporal.workflow.getHandle(`transcript-${uuid}`).describe()).status.name === 'COMPLETED');
    } finally {
      release();
      slowHost.closeAllConnections();
      slowHost.close();
    }
  });

  it('a finished transcript whose workflow an operator terminated is deleted all the same', async () => {
    const done = await assemblyai().transcripts.transcribe({ audio: audioUrl }, { pollingInterval: 250 });
    const uuid = done.id.split('/').pop()!;
    await api.deps.temporal.workflow.getHandle(`transcript-${uuid}`).terminate('test: an operator stops it');
    assert.equal((await assemblyai().transcripts.delete(done.id)).text, 'Deleted by user.');
    assert.equal(await api.deps.db.transcript.findUnique({ where: { id: uuid } }), null);
  });

  it("a refused request shows the service's reason, not a bare status", async () => {
    await assert.rejects(assemblyai().transcripts.submit({ audio_url: 'ftp://example.org/clip.wav' }), /audio_url must be an http or https URL/);
    await assert.rejects(
      assemblyai().transcripts.submit({ audio_url: audioUrl, language_detection: true, language_auto: true } as never),
      /language_detection is AssemblyAI's name for language_auto: send one of the two/,
    );
    await assert.rejects(new AssemblyAI({ apiKey: 'pk_not-a-key', baseUrl: api.url }).transcripts.get('/v2/transcript/00000000-0000-4000-8000-000000000000'), /invalid API key/i);
  });
});
