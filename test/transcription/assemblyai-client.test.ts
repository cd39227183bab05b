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

  it('sentences(), paragraphs(), subtitles() and wordSearch() read the words of a completed transcript', async () => {
    const transcript = await assemblyai().transcripts.transcribe({ audio: audioUrl }, { pollingInterval: 250 });
    assert.equal(transcript.status, 'completed', JSON.stringify(transcript));
    const words = transcript.words ?? [];
    assert.ok(words.length >= 8, JSON.stringify(words));
    assert.equal(words.map((w) => w.text).join(' '), transcript.text);
    const { sentences } = await assemblyai().transcripts.sentences(transcript.id);
    assert.equal(sentences.map((s) => s.text).join(' '), transcript.text);
    const { paragraphs } = await assemblyai().transcripts.paragraphs(transcript.id);
    assert.equal(paragraphs.length, 1, 'one short utterance is one paragraph');
    assert.deepEqual(paragraphs[0]!.words, words);
    const vtt = await assemblyai().transcripts.subtitles(transcript.id, 'vtt', 16);
    assert.match(vtt, /^WEBVTT\n\n00:00:0\d\.\d{3} --> /);
    const srt = await assemblyai().transcripts.subtitles(transcript.id);
    assert.match(srt, /^1\n00:00:0\d,\d{3} --> 00:00:0\d,\d{3}\n/);
    const third = words[2]!;
    const found = await assemblyai().transcripts.wordSearch(transcript.id, [third.text]);
    assert.ok(found.matches.some((m) => m.timestamps.some(([start, end]) => start === third.start && end === third.end)), JSON.stringify(found));
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

  it("transcripts.list() pages the key's transcripts newest first (prev_url older, next_url newer), filters by status, and shows no other partner's", async () => {
    const lister = await newPartner(client(api.url));
    const own = new AssemblyAI({ apiKey: lister.key, baseUrl: api.url });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await own.transcripts.submit({ audio: audioUrl })).id);
    // A URL that answers 404 (this API's own, unknown path): the transcript ends in error at once.
    const failed = (await own.transcripts.submit({ audio: `${api.url}/none.wav` })).id;
    await eventually('all four finished', async () => (await Promise.all([...ids, failed].map((id) => own.transcripts.get(id)))).every((t) => t.status === 'completed' || t.status === 'error'));
    const newestFirst = [...ids, failed].reverse();

    const first = await own.transcripts.list({ limit: 2 });
    assert.deepEqual(first.transcripts.map((t) => t.id), newestFirst.slice(0, 2));
    assert.deepEqual({ limit: first.page_details.limit, count: first.page_details.result_count, next: first.page_details.next_url }, { limit: 2, count: 2, next: null });
    const item = first.transcripts[0]!;
    assert.equal(item.resource_url, `${api.url}${item.id}`);
    assert.ok(item.created instanceof Date && Date.now() - item.created.getTime() < 300_000, 'created is a date the client parsed');
    const older = await own.transcripts.list(first.page_details.prev_url!);
    assert.deepEqual(older.transcripts.map((t) => t.id), newestFirst.slice(2, 4));
    assert.equal(older.page_details.prev_url, null, 'nothing older');
    const newer = await own.transcripts.list(older.page_details.next_url!);
    assert.deepEqual(newer.transcripts.map((t) => t.id), newestFirst.slice(0, 2));

    const errors = await own.transcripts.list({ status: 'error' });
    assert.deepEqual(errors.transcripts.map((t) => ({ id: t.id, completed: t.completed, failed: typeof t.error === 'string' && t.error.length > 0 })), [{ id: failed, completed: null, failed: true }]);
    const completed = await own.transcripts.list({ status: 'completed', limit: 10 });
    assert.deepEqual(completed.transcripts.map((t) => t.id), [...ids].reverse());
    assert.ok(completed.transcripts.every((t) => t.completed instanceof Date && t.audio_url === audioUrl && t.error === null));

    const listedByOther = await assemblyai().transcripts.list({ limit: 200 });
    assert.ok(!listedByOther.transcripts.some((t) => [...ids, failed].includes(t.id)), "another partner's key does not list them");
    const http = client(api.url);
    const refusals: Array<[string, string, string]> = [
      [lister.key, 'limit=0', 'limit'],
      [lister.key, 'status=done', 'status'],
      [lister.key, 'created_on=yesterday', 'created_on'],
      [partner.key, `before_id=${encodeURIComponent(ids[0]!)}`, 'before_id'],
      [lister.key, 'before_id=x&after_id=y', 'after_id'],
    ];
    for (const [key, query, field] of refusals) {
      const refused = await http('GET', `/v2/transcript?${query}`, { key });
      assert.equal(refused.status, 422, `${query}: ${JSON.stringify(refused.body)}`);
      assert.ok(refused.body.errors[field], `${query}: ${JSON.stringify(refused.body)}`);
    }
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
