import assert from 'node:assert/strict';
import fs from 'node:fs';
import crypto from 'node:crypto';
import path from 'node:path';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newPartner, unique } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { anythingStored, storedNames } from '../support/stored-files.js';
import { wavFile } from '../../lib/audio/index.js';
import { createVoice, download, encodeAs, envelope, libraryPassage, locate, mmss, pcm16k, probe, probeBytes, recording, settled, speak, tempFile, unzip, voicePath } from './support.js';

/**
 * The voice interface end to end with the local engines (no GPU job service): a recording made
 * here (speech with pauses, in a video container) is stored, split into samples in its pauses and
 * embedded with the local voice print; every endpoint of spec 4.1 is used the way a client would.
 */
describe('voices: recordings, samples, embeddings (local engines)', function () {
  this.timeout(600_000);
  let api: RunningApi;
  let worker: RunningWorker;
  let http: ReturnType<typeof client>;
  let partner: { name: string; key: string };
  let original: string;
  let originalMp4: Buffer;
  let mp4Path: string;
  const maxUpload = 4_000_000;

  before(async () => {
    api = await startApi({ VOICE_MAX_UPLOAD_BYTES: String(maxUpload), VOICE_RATE_LIMIT_PER_MINUTE: '0', TRUST_PROXY: 'loopback' });
    http = client(api.url);
    [worker, original] = await Promise.all([startWorker(), recording('flite-kal')]);
    mp4Path = await encodeAs(original, 'mp4');
    originalMp4 = fs.readFileSync(mp4Path);
    partner = await newPartner(http);
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
  });

  const get = (voice: string) => http('GET', voicePath(partner.name, voice), { key: partner.key });
  const samplesOf = async (voice: string, v: any) =>
    Promise.all(v.samples.map(async (s: any) => ({ ...s, file: await download(api.url, `${voicePath(partner.name, voice)}/samples/${s.index}`, partner.key) })));
  const voiceFilesOf = (partnerId: string, voiceId?: string) => `voices/${partnerId}${voiceId ? `/${voiceId}` : ''}`;

  describe('a voice made from a recording', () => {
    const name = unique('Anna Kal');
    let created: any;
    let done: any;

    before(async () => {
      created = await createVoice(http, partner.key, partner.name, name, { name: 'interview.mp4', content: originalMp4 }, { creator_name: 'Ann', creator_email: 'ann@example.org' });
    });

    it('create answers 201 with splitting and embedding in progress, and the voice is locked: rename and delete are 409', async () => {
      assert.equal(created.name, name);
      assert.deepEqual({ splitting: created.status.splitting, embedding: created.status.embedding }, { splitting: 'in_progress', embedding: 'in_progress' });
      assert.equal(created.original_uploaded_name, 'interview.mp4');
      assert.equal(created.original_filename, 'original.mp4');
      assert.ok(Math.abs(created.original_duration - (await probe(mp4Path)).duration) < 0.05, `${created.original_duration}`);
      assert.equal(created.creator_name, 'Ann');
      assert.equal(created.creator_email, 'ann@example.org');
      assert.equal(created.embedding_type, 'builtin');
      assert.equal(created.workflow_id, `voice-${partner.name}-${created.id}`);
      const rename = await http('PUT', `${voicePath(partner.name, name)}/name`, { key: partner.key, form: { name: unique('other') } });
      assert.equal(rename.status, 409, JSON.stringify(rename.body));
      assert.deepEqual(Object.keys(rename.body), ['detail']);
      assert.match(rename.body.detail, /being processed/);
      const del = await http('DELETE', voicePath(partner.name, name), { key: partner.key });
      assert.equal(del.status, 409, JSON.stringify(del.body));
      assert.equal((await get(name)).status, 200, 'still there');
      const list = await http('GET', `/api/voices/${partner.name}`, { key: partner.key });
      assert.deepEqual(list.body.find((v: any) => v.name === name), {
        name, has_original: true, sample_count: 0, splitting_status: 'in_progress', embedding_status: 'in_progress', creator_name: 'Ann', creator_email: 'ann@example.org',
      });
    });

    it('splits the speech into samples of at most 15 s (the default) that are Opus 96 kbps mono, with timestamps of the original', async () => {
      done = await settled(http, partner.key, partner.name, name);
      assert.equal(done.status.splitting, 'completed', JSON.stringify(done.status));
      assert.equal(done.status.embedding, 'completed', JSON.stringify(done.status));
      assert.ok(done.samples.length >= 3 && done.samples.length <= 25, `${done.samples.length} samples`);
      assert.deepEqual(done.samples.map((s: any) => s.index), done.samples.map((_: any, i: number) => i));
      const whole = envelope(await pcm16k(original));
      const info = JSON.parse(unzip((await download(api.url, `${voicePath(partner.name, name)}/samples-bundle`, partner.key)).bytes)['voice_info.json']!.toString('utf8'));
      let covered = 0;
      for (const s of await samplesOf(name, done)) {
        const start = info.samples.find((x: any) => x.index === s.index).source_start_seconds as number;
        assert.equal(s.source_timestamp, mmss(start));
        assert.equal(s.file.status, 200);
        assert.equal(s.file.type, 'audio/ogg');
        const p = await probeBytes(s.file.bytes, 'opus');
        assert.equal(p.codec, 'opus');
        assert.equal(p.channels, 1);
        assert.match(p.format, /ogg/);
        assert.ok(p.bitRate >= 90_000 && p.bitRate <= 110_000, `bit rate ${p.bitRate}`);
        assert.ok(p.duration <= 15.05 && p.duration >= 2, `sample ${s.index}: ${p.duration} s`);
        assert.ok(Math.abs(p.duration - s.duration) < 0.1, `${p.duration} vs ${s.duration}`);
        // The sample's sound is found in the original at its timestamp.
        const at = locate(whole, envelope(await pcm16k(tempFile(s.file.bytes, 'opus'))));
        assert.ok(at.error < 3, `sample ${s.index} matches the original (mean error ${at.error.toFixed(2)} dB)`);
        assert.ok(Math.abs(at.offsetSeconds - start) <= 0.05, `sample ${s.index} is found at ${at.offsetSeconds} s of the original, its start is ${start} s (${s.source_timestamp})`);
        covered += s.duration;
      }
      assert.ok(covered > 0.6 * created.original_duration, `the samples cover most of the recording (${covered} of ${created.original_duration} s)`);
    });

    it('the embedding: a score per sample, test samples spoken by the nearest built-in voice, the artefact, speech ready', async () => {
      assert.equal(done.embedding_info.tts_type, 'builtin');
      assert.equal(done.embedding_info.last_update_status, 'completed');
      assert.ok(Date.parse(done.embedding_info.last_update_time) > Date.parse(created.created_at));
      assert.deepEqual(done.embedding_info.sample_scores.map((s: any) => s.sample_index), done.samples.map((s: any) => s.index));
      for (const s of done.embedding_info.sample_scores) assert.ok(s.score > 0.5 && s.score <= 1, JSON.stringify(s));
      assert.equal(done.embedding_info.test_samples.length, 3);
      assert.deepEqual(done.speech, { ready: true, built_in_voice: 'kal', remote_voice_id: null });

      const listed = await http('GET', `${voicePath(partner.name, name)}/test-samples`, { key: partner.key });
      assert.equal(listed.status, 200);
      assert.deepEqual(listed.body.map((t: any) => t.sentence_index), [0, 1, 2]);
      for (const t of listed.body) {
        assert.equal(t.tts_type, 'builtin');
        const audio = await download(api.url, new URL(t.url).pathname + new URL(t.url).search, partner.key);
        assert.equal(audio.status, 200);
        assert.equal(audio.type, 'audio/ogg');
        const p = await probeBytes(audio.bytes, 'opus');
        assert.ok(p.duration > 1, `a spoken sentence (${p.duration} s)`);
      }

      const zipUrl = new URL(done.embedding_zip_url);
      assert.equal(zipUrl.origin, api.url);
      // Behind a TLS proxy (TRUST_PROXY), links carry the scheme and host the client used.
      const proxied = { 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'voices.example.com' };
      const viaProxy = await http('GET', voicePath(partner.name, name), { key: partner.key, headers: proxied });
      assert.equal(new URL(viaProxy.body.embedding_zip_url).origin, 'https://voices.example.com');
      const samplesViaProxy = await http('GET', `${voicePath(partner.name, name)}/test-samples`, { key: partner.key, headers: proxied });
      assert.ok(samplesViaProxy.body.every((t: { url: string }) => t.url.startsWith('https://voices.example.com/')), JSON.stringify(samplesViaProxy.body));
      const zip = await download(api.url, zipUrl.pathname, partner.key);
      assert.equal(zip.status, 200);
      assert.equal(zip.type, 'application/zip');
      const files = unzip(zip.bytes);
      const embedding = JSON.parse(files['embedding.json']!.toString('utf8'));
      assert.equal(embedding.method, 'mfcc-stats-v1');
      assert.equal(embedding.samples.length, done.samples.length);
      assert.equal(embedding.samples[0].vector.length, 38);
      assert.equal(embedding.nearest_builtin_voice, 'kal');
      assert.match(files['README.txt']!.toString('utf8'), /NOT a neural speaker embedding/);
    });

    it('the samples bundle streams a ZIP with {index}.opus for every sample and voice_info.json', async () => {
      const zip = await download(api.url, `${voicePath(partner.name, name)}/samples-bundle`, partner.key);
      assert.equal(zip.status, 200);
      assert.equal(zip.type, 'application/zip');
      const files = unzip(zip.bytes);
      assert.deepEqual(Object.keys(files).sort(), ['voice_info.json', ...done.samples.map((s: any) => `${s.index}.opus`)].sort());
      const info = JSON.parse(files['voice_info.json']!.toString('utf8'));
      assert.equal(info.name, name);
      assert.deepEqual(info.samples.map((s: any) => [s.index, s.file, s.source_timestamp]), done.samples.map((s: any) => [s.index, `${s.index}.opus`, s.source_timestamp]));
      const single = await download(api.url, `${voicePath(partner.name, name)}/samples/0`, partner.key);
      assert.ok(files['0.opus']!.equals(single.bytes), 'the archived sample is the sample');
    });

    it('preferred sample: set, refused for a missing index, cleared by an empty value', async () => {
      const set = await http('PUT', `${voicePath(partner.name, name)}/preferred-sample`, { key: partner.key, form: { sample_index: '1' } });
      assert.equal(set.status, 200, JSON.stringify(set.body));
      assert.equal(set.body.preferred_sample_index, 1);
      const missing = await http('PUT', `${voicePath(partner.name, name)}/preferred-sample`, { key: partner.key, form: { sample_index: '999' } });
      assert.equal(missing.status, 400);
      assert.equal((await get(name)).body.preferred_sample_index, 1, 'unchanged');
      const notANumber = await http('PUT', `${voicePath(partner.name, name)}/preferred-sample`, { key: partner.key, form: { sample_index: 'two' } });
      assert.equal(notANumber.status, 400);
      const cleared = await http('PUT', `${voicePath(partner.name, name)}/preferred-sample`, { key: partner.key, form: { sample_index: '' } });
      assert.equal(cleared.status, 200);
      assert.equal(cleared.body.preferred_sample_index, null);
      // Left out, or no body at all (Python's requests with `{'sample_index': None}`): cleared too.
      for (const call of [{ form: {} }, {}]) {
        await http('PUT', `${voicePath(partner.name, name)}/preferred-sample`, { key: partner.key, form: { sample_index: '1' } });
        const res = await http('PUT', `${voicePath(partner.name, name)}/preferred-sample`, { key: partner.key, ...call });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assert.equal(res.body.preferred_sample_index, null);
      }
    });

    it('deleting a sample keeps the other indexes; the deleted preferred sample is cleared with its score', async () => {
      const before = (await get(name)).body;
      const victim = before.samples[1].index;
      await http('PUT', `${voicePath(partner.name, name)}/preferred-sample`, { key: partner.key, form: { sample_index: String(victim) } });
      const del = await http('DELETE', `${voicePath(partner.name, name)}/samples/${victim}`, { key: partner.key });
      assert.equal(del.status, 200, JSON.stringify(del.body));
      assert.deepEqual(del.body.samples.map((s: any) => s.index), before.samples.map((s: any) => s.index).filter((i: number) => i !== victim));
      assert.deepEqual(del.body.samples.map((s: any) => s.source_timestamp), before.samples.filter((s: any) => s.index !== victim).map((s: any) => s.source_timestamp));
      assert.equal(del.body.preferred_sample_index, null);
      assert.ok(!del.body.embedding_info.sample_scores.some((s: any) => s.sample_index === victim));
      assert.equal((await download(api.url, `${voicePath(partner.name, name)}/samples/${victim}`, partner.key)).status, 404);
      assert.equal((await http('DELETE', `${voicePath(partner.name, name)}/samples/${victim}`, { key: partner.key })).status, 404);
      const last = before.samples.at(-1).index;
      assert.equal((await download(api.url, `${voicePath(partner.name, name)}/samples/${last}`, partner.key)).status, 200, 'later samples keep their index');
    });

    it('re-split with max_samples=3 and sample_duration=5: the old samples are cleared at once; three samples of at most 5 s that start and end in pauses', async () => {
      const split = await http('POST', `${voicePath(partner.name, name)}/split`, { key: partner.key, rawBody: { body: 'max_samples=3&sample_duration=5', contentType: 'application/x-www-form-urlencoded' } });
      assert.equal(split.status, 202, JSON.stringify(split.body));
      assert.deepEqual(split.body.samples, [], 'cleared first');
      assert.deepEqual(split.body.embedding_info.sample_scores, []);
      assert.equal(split.body.status.splitting, 'in_progress');
      assert.equal(split.body.status.embedding, 'in_progress');
      assert.deepEqual(split.body.split_settings, { max_samples: 3, sample_duration: 5 });
      assert.equal((await http('POST', `${voicePath(partner.name, name)}/split`, { key: partner.key })).status, 409, 'a second split while the first runs');
      const v = await settled(http, partner.key, partner.name, name);
      assert.equal(v.status.splitting, 'completed', JSON.stringify(v.status));
      assert.equal(v.samples.length, 3);
      assert.deepEqual(v.samples.map((s: any) => s.index), [0, 1, 2]);
      const starts = [] as number[];
      for (const s of await samplesOf(name, v)) {
        const p = await probeBytes(s.file.bytes, 'opus');
        assert.ok(p.duration <= 5.02, `sample ${s.index}: ${p.duration} s`);
        const e = envelope(await pcm16k(tempFile(s.file.bytes, 'opus')));
        const peak = Math.max(...e);
        // Cut in pauses: the first and last 50 ms are far quieter than the speech.
        assert.ok(Math.max(...e.slice(0, 5)) < peak - 25, `sample ${s.index} starts in a pause`);
        assert.ok(Math.max(...e.slice(-5)) < peak - 25, `sample ${s.index} ends in a pause`);
        starts.push(Number(s.source_timestamp.split(':')[0]) * 60 + Number(s.source_timestamp.split(':')[1]));
      }
      // Spread over the recording, not the first three sentences.
      assert.ok(starts[2]! - starts[0]! > 0.4 * v.original_duration, JSON.stringify(starts));
      assert.equal(v.status.embedding, 'completed', 'the new samples are embedded');
      assert.deepEqual(v.embedding_info.sample_scores.map((s: any) => s.sample_index), [0, 1, 2]);
    });

    it('split settings out of range are 400 and change nothing', async () => {
      for (const form of [{ max_samples: '0' }, { max_samples: '101' }, { sample_duration: '4' }, { sample_duration: '61' }, { max_samples: 'many' }]) {
        const r = await http('POST', `${voicePath(partner.name, name)}/split`, { key: partner.key, form });
        assert.equal(r.status, 400, `${JSON.stringify(form)}: ${JSON.stringify(r.body)}`);
        assert.deepEqual(Object.keys(r.body), ['detail']);
      }
      const v = (await get(name)).body;
      assert.equal(v.status.splitting, 'completed');
      assert.equal(v.samples.length, 3);
    });

    it('a split with an empty body takes the defaults (25 samples of at most 15 s)', async () => {
      const split = await http('POST', `${voicePath(partner.name, name)}/split`, { key: partner.key });
      assert.equal(split.status, 202, JSON.stringify(split.body));
      assert.deepEqual(split.body.split_settings, { max_samples: 25, sample_duration: 15 });
      const v = await settled(http, partner.key, partner.name, name);
      assert.equal(v.status.splitting, 'completed');
      assert.ok(v.samples.length > 3 && v.samples.every((s: any) => s.duration <= 15.05), JSON.stringify(v.samples));
    });

    it('rename: answers the voice under its new name; the old name is 404; a taken name is 409', async () => {
      const renamed = unique('Renamed');
      const r = await http('PUT', `${voicePath(partner.name, name)}/name`, { key: partner.key, form: { name: renamed } });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.name, renamed);
      assert.equal(r.body.embedding_zip_url.endsWith(`${voicePath(partner.name, renamed)}/embedding-zip`), true);
      assert.equal((await get(name)).status, 404);
      const other = unique('Other');
      await http('POST', `/api/voices/${partner.name}/empty`, { key: partner.key, form: { name: other } });
      const taken = await http('PUT', `${voicePath(partner.name, renamed)}/name`, { key: partner.key, form: { name: other } });
      assert.equal(taken.status, 409);
      const back = await http('PUT', `${voicePath(partner.name, renamed)}/name`, { key: partner.key, form: { name } });
      assert.equal(back.status, 200);
    });

    it('the test samples of a TTS type are deleted by test-files/{tts_type}', async () => {
      const del = await http('DELETE', `${voicePath(partner.name, name)}/test-files/builtin`, { key: partner.key });
      assert.equal(del.status, 200, JSON.stringify(del.body));
      assert.deepEqual(del.body.embedding_info.test_samples, []);
      assert.deepEqual((await http('GET', `${voicePath(partner.name, name)}/test-samples?tts_type=builtin`, { key: partner.key })).body, []);
      const partnerId = (await api.deps.db.partner.findUniqueOrThrow({ where: { name: partner.name } })).id;
      assert.deepEqual(await storedNames(`${voiceFilesOf(partnerId, done.id)}/test-samples`), []);
    });

    it('delete: the voice, its rows and every file are gone', async () => {
      const partnerId = (await api.deps.db.partner.findUniqueOrThrow({ where: { name: partner.name } })).id;
      const files = voiceFilesOf(partnerId, done.id);
      assert.ok(await anythingStored(files));
      const r = await http('DELETE', voicePath(partner.name, name), { key: partner.key });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.deepEqual(r.body, { status: 'deleted', name });
      assert.equal((await get(name)).status, 404);
      assert.equal(await anythingStored(files), false);
      assert.equal(await api.deps.db.voiceSample.count({ where: { voiceId: done.id } }), 0);
    });
  });

  describe('a voice created empty, with uploaded samples', () => {
    const name = unique('Uploaded');
    it('uploads are converted to Opus 96 kbps mono and take the next index, which never moves', async () => {
      const created = await http('POST', `/api/voices/${partner.name}/empty`, { key: partner.key, form: { name } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      assert.deepEqual({ s: created.body.status.splitting, e: created.body.status.embedding, o: created.body.original_filename, n: created.body.samples }, { s: 'idle', e: 'idle', o: null, n: [] });
      assert.equal((await http('POST', `${voicePath(partner.name, name)}/split`, { key: partner.key })).status, 409, 'nothing to split');
      assert.equal((await http('POST', `${voicePath(partner.name, name)}/embed`, { key: partner.key })).status, 409, 'nothing to embed');
      const clips = await Promise.all(libraryPassage.slice(0, 3).map((s) => speak(s, 'flite-slt')));
      const formats = ['mp3', 'flac', 'webm'];
      for (const [i, clip] of clips.entries()) {
        const file = await encodeAs(clip, formats[i]!);
        const up = await http('POST', `${voicePath(partner.name, name)}/samples`, { key: partner.key, form: { file: { name: path.basename(file), content: fs.readFileSync(file) } } });
        assert.equal(up.status, 201, JSON.stringify(up.body));
        assert.deepEqual(up.body.samples.map((s: any) => s.index), Array.from({ length: i + 1 }, (_, k) => k));
        assert.equal(up.body.samples[i].source_timestamp, '00:00');
        const p = await probe(clip);
        assert.ok(Math.abs(up.body.samples[i].duration - p.duration) < 0.1, `${up.body.samples[i].duration} vs ${p.duration}`);
      }
      const sample = await download(api.url, `${voicePath(partner.name, name)}/samples/2`, partner.key);
      const p = await probeBytes(sample.bytes, 'opus');
      assert.deepEqual([p.codec, p.channels], ['opus', 1]);
      assert.ok(p.bitRate >= 90_000 && p.bitRate <= 110_000, `bit rate ${p.bitRate}`);
      assert.equal((await http('DELETE', `${voicePath(partner.name, name)}/samples/0`, { key: partner.key })).status, 200);
      const again = await http('POST', `${voicePath(partner.name, name)}/samples`, { key: partner.key, form: { file: { name: 'again.wav', content: fs.readFileSync(clips[0]!) } } });
      assert.deepEqual(again.body.samples.map((s: any) => s.index), [1, 2, 3], 'a deleted index is not reused');
    });

    it('embeds the uploaded samples on request; rename and delete are refused meanwhile', async () => {
      const embed = await http('POST', `${voicePath(partner.name, name)}/embed`, { key: partner.key });
      assert.equal(embed.status, 202, JSON.stringify(embed.body));
      assert.equal(embed.body.status.embedding, 'in_progress');
      assert.equal((await http('DELETE', voicePath(partner.name, name), { key: partner.key })).status, 409);
      assert.equal((await http('POST', `${voicePath(partner.name, name)}/samples`, { key: partner.key, form: { file: { name: 'x.wav', content: fs.readFileSync(original) } } })).status, 409);
      const v = await settled(http, partner.key, partner.name, name);
      assert.equal(v.status.embedding, 'completed', JSON.stringify(v.status));
      assert.equal(v.status.splitting, 'idle');
      assert.equal(v.speech.ready, true);
      assert.equal(v.embedding_info.sample_scores.length, 3);
    });

    it('a voice with an original takes no uploaded samples (409); a tts_type no engine here makes is 400', async () => {
      const withOriginal = unique('WithOriginal');
      await createVoice(http, partner.key, partner.name, withOriginal, { name: 'a.wav', content: fs.readFileSync(original) });
      const v = await settled(http, partner.key, partner.name, withOriginal);
      const up = await http('POST', `${voicePath(partner.name, withOriginal)}/samples`, { key: partner.key, form: { file: { name: 'x.wav', content: fs.readFileSync(original) } } });
      assert.equal(up.status, 409, JSON.stringify(up.body));
      const embed = await http('POST', `${voicePath(partner.name, withOriginal)}/embed`, { key: partner.key, form: { tts_type: 'xtts-v2' } });
      assert.equal(embed.status, 400, JSON.stringify(embed.body));
      assert.match(embed.body.detail, /VOICE_JOB_BASE_URL/);
      assert.equal((await get(withOriginal)).body.status.embedding, v.status.embedding);
    });
  });

  describe('the local voice print tells voices apart', () => {
    it('recordings of two different synthetic voices are each spoken by their own nearest built-in voice', async () => {
      const female = unique('Festival');
      const rec = await recording('festival-slt', libraryPassage.slice(0, 6));
      await createVoice(http, partner.key, partner.name, female, { name: 'f.wav', content: fs.readFileSync(rec) }, { sample_duration: '5' });
      const v = await settled(http, partner.key, partner.name, female);
      assert.equal(v.status.embedding, 'completed', JSON.stringify(v.status));
      assert.equal(v.speech.built_in_voice, 'slt');
      const zip = unzip((await download(api.url, new URL(v.embedding_zip_url).pathname, partner.key)).bytes);
      const sims = JSON.parse(zip['embedding.json']!.toString('utf8')).builtin_similarities as Array<{ name: string; similarity: number }>;
      assert.equal(sims[0]!.name, 'slt');
      assert.ok(sims[0]!.similarity - sims.find((s) => s.name === 'kal')!.similarity > 0.3, JSON.stringify(sims));
    });

    it('in a recording of two speakers, the samples of the minority speaker score lowest', async () => {
      const name = unique('Mixed');
      const kal = await Promise.all(libraryPassage.slice(0, 6).map((s) => speak(s, 'flite-kal')));
      const other = await Promise.all(libraryPassage.slice(6, 8).map((s) => speak(s, 'espeak')));
      const { concatWithPauses } = await import('../support/audio.js');
      const mixed = await concatWithPauses([kal[0]!, kal[1]!, other[0]!, kal[2]!, kal[3]!, other[1]!, kal[4]!, kal[5]!], 1.2);
      await createVoice(http, partner.key, partner.name, name, { name: 'mixed.wav', content: fs.readFileSync(mixed) }, { sample_duration: '5' });
      const v = await settled(http, partner.key, partner.name, name);
      assert.equal(v.status.embedding, 'completed', JSON.stringify(v.status));
      assert.equal(v.samples.length, 8, JSON.stringify(v.samples));
      const scores = v.embedding_info.sample_scores.map((s: any) => s.score);
      const outsiders = [2, 5].map((i) => scores[i]);
      const insiders = scores.filter((_: number, i: number) => i !== 2 && i !== 5);
      assert.ok(Math.max(...outsiders) < Math.min(...insiders), `espeak samples ${outsiders} score below the flite kal samples ${insiders}`);
      assert.equal(v.speech.built_in_voice, 'kal');
    });
  });

  describe('the speech interface speaks a partner voice', () => {
    it('/v2/audio/speech with the voice name answers audio; /v2/audio/voices lists it with the built-in voice that speaks it', async () => {
      const name = unique('Speaker');
      await createVoice(http, partner.key, partner.name, name, { name: 'v.wav', content: fs.readFileSync(original) });
      const quota = await http('POST', '/api/quota-keys', { key: testStack().adminApiKey, json: { name: unique('speech-key'), quota_type: 'speech', token_amount: 10_000, partner: partner.name } });
      assert.equal(quota.status, 201, JSON.stringify(quota.body));
      const speech = (voice: string) =>
        fetch(`${api.url}/v2/audio/speech`, { method: 'POST', headers: { authorization: `Bearer ${quota.body.api_key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'tts-1', voice, input: 'Good morning, this is my voice.', response_format: 'wav' }) });
      const early = await speech(name);
      if (early.status !== 200) {
        assert.equal(early.status, 400);
        assert.match((await early.json()).error, /cannot be spoken yet/);
      }
      const voice = await settled(http, partner.key, partner.name, name);
      const r = await speech(name);
      assert.equal(r.status, 200, await r.clone().text());
      assert.equal(r.headers.get('content-type'), 'audio/wav');
      const p = await probe(tempFile(Buffer.from(await r.arrayBuffer()), 'wav'));
      assert.ok(p.duration > 1);
      const voices = await fetch(`${api.url}/v2/audio/voices`, { headers: { authorization: `Bearer ${quota.body.api_key}` } });
      const listed = ((await voices.json()).voices as any[]).find((v) => v.name === name);
      assert.deepEqual({ kind: listed.kind, spoken_by: listed.spoken_by }, { kind: 'partner', spoken_by: 'kal' });
      const row = await api.deps.db.speechRequest.findFirstOrThrow({ where: { voice: name }, orderBy: { id: 'desc' } });
      assert.match(row.engine ?? '', /^flite:kal16$/);
      // The spec's `voice` is a "voice ID": the voice's id (GET /api/voices/...) names it as its name does.
      const byId = await speech(voice.id);
      assert.equal(byId.status, 200, await byId.clone().text());
      const latest = await api.deps.db.speechRequest.findFirstOrThrow({ orderBy: { id: 'desc' } });
      assert.deepEqual({ voice: latest.voice, engine: latest.engine }, { voice: name, engine: row.engine }, 'recorded as the voice it named');
      const unknownId = await speech(crypto.randomUUID());
      assert.equal(unknownId.status, 400);
      assert.match((await unknownId.json()).error, /is not a voice of this service/);
    });
  });

  describe('bad input', () => {
    const uploads = () => fs.readdirSync(path.join(api.deps.config.storageDir, 'uploads'));
    const refused = async (file: { name: string; content: Buffer }, status: number, detail: RegExp) => {
      const name = unique('Bad');
      const r = await http('POST', `/api/voices/${partner.name}`, { key: partner.key, form: { name, file } });
      assert.equal(r.status, status, JSON.stringify(r.body));
      assert.deepEqual(Object.keys(r.body), ['detail']);
      assert.match(r.body.detail, detail);
      assert.equal((await get(name)).status, 404, 'no voice was created');
    };

    it('files that are not usable audio are refused with a 400 that says why; nothing is kept', async () => {
      const mp3 = fs.readFileSync(await encodeAs(original, 'mp3'));
      const silentVideo = tempFile(Buffer.alloc(0), 'mp4');
      const { execFileSync } = await import('node:child_process');
      execFileSync('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'color=c=red:s=64x64:r=5', '-t', '2', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', silentVideo]);
      await refused({ name: 'empty.mp3', content: Buffer.alloc(0) }, 400, /empty/);
      await refused({ name: 'voice.mp3', content: Buffer.from('%PDF-1.4\n1 0 obj\n<<>>\nendobj\n%%EOF\n') }, 400, /PDF/);
      await refused({ name: 'notes.wav', content: Buffer.from('just some text, not a recording\n') }, 400, /text file/);
      await refused({ name: 'cut.mp3', content: Buffer.concat([mp3.subarray(0, 10), Buffer.alloc(2000, 0x55)]) }, 400, /damaged|truncated|cannot be read|no audio/);
      await refused({ name: 'silent.mp4', content: fs.readFileSync(silentVideo) }, 400, /no audio stream/);
      await refused({ name: 'nothing.wav', content: wavFile({ sampleRate: 16000, channels: 1 }, Buffer.alloc(0)) }, 400, /no readable duration/);
      await refused({ name: 'huge.wav', content: Buffer.concat([fs.readFileSync(original).subarray(0, 44), Buffer.alloc(maxUpload + 10)]) }, 413, /larger than the upload limit/);
      await eventually('the upload directory to be empty', async () => uploads().length === 0, 5_000);
    });

    it('a silent recording is accepted and its split fails saying there is no speech', async () => {
      const { silence } = await import('../support/audio.js');
      const name = unique('Silent');
      await createVoice(http, partner.key, partner.name, name, { name: 'silence.wav', content: fs.readFileSync(await silence(8)) });
      const v = await settled(http, partner.key, partner.name, name);
      assert.equal(v.status.splitting, 'failed');
      assert.match(v.status.splitting_error, /no speech|silent/);
      assert.equal(v.status.embedding, 'failed');
      assert.match(v.status.embedding_error, /not run: splitting failed/);
      // Not locked: it can be deleted.
      assert.equal((await http('DELETE', voicePath(partner.name, name), { key: partner.key })).status, 200);
    });

    it('names: 1-255 characters, not blank, unique per partner', async () => {
      const name = unique('Dup');
      assert.equal((await http('POST', `/api/voices/${partner.name}/empty`, { key: partner.key, form: { name } })).status, 201);
      const dup = await http('POST', `/api/voices/${partner.name}/empty`, { key: partner.key, form: { name } });
      assert.equal(dup.status, 409);
      assert.match(dup.body.detail, /already exists/);
      const other = await newPartner(http);
      assert.equal((await http('POST', `/api/voices/${other.name}/empty`, { key: other.key, form: { name } })).status, 201, 'another partner may use the name');
      for (const bad of ['', '   ', '\u200b\u200b', 'x'.repeat(256), 'tab\there']) {
        const r = await http('POST', `/api/voices/${partner.name}/empty`, { key: partner.key, form: { name: bad } });
        assert.equal(r.status, 400, `${JSON.stringify(bad)}: ${JSON.stringify(r.body)}`);
      }
      const long = 'é'.repeat(255);
      const ok = await http('POST', `/api/voices/${partner.name}/empty`, { key: partner.key, form: { name: long } });
      assert.equal(ok.status, 201, JSON.stringify(ok.body));
      assert.equal((await get(long)).body.name, long, 'addressable by its URL-encoded name');
      assert.equal((await http('POST', `/api/voices/${partner.name}/empty`, { key: partner.key, form: {} })).status, 400, 'name is required');
      assert.equal((await http('GET', voicePath(partner.name, unique('nobody')), { key: partner.key })).status, 404);
      assert.equal((await http('GET', `/api/voices/${unique('no-partner')}`, { key: testStack().adminApiKey })).status, 404);
    });
  });

  it('deleting a partner deletes its voices and every file of them', async () => {
    const doomed = await newPartner(http);
    const name = unique('Doomed');
    const created = await createVoice(http, doomed.key, doomed.name, name, { name: 'v.wav', content: fs.readFileSync(original) });
    await settled(http, doomed.key, doomed.name, name);
    const partnerId = (await api.deps.db.partner.findUniqueOrThrow({ where: { name: doomed.name } })).id;
    assert.ok(await anythingStored(`${voiceFilesOf(partnerId, created.id)}/samples`));
    const r = await http('DELETE', `/api/partners/${doomed.name}`, { key: testStack().adminApiKey });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(await api.deps.db.voice.count({ where: { id: created.id } }), 0);
    assert.equal(await anythingStored(voiceFilesOf(partnerId)), false);
  });

  it('job-starting requests are limited per partner per minute (429 with Retry-After); the administrator key is not', async () => {
    const limited = await startApi({ VOICE_RATE_LIMIT_PER_MINUTE: '2' });
    try {
      const h = client(limited.url);
      const p = await newPartner(h);
      for (let i = 0; i < 2; i++) assert.equal((await h('POST', `/api/voices/${p.name}/empty`, { key: p.key, form: { name: unique('v') } })).status, 201);
      const third = await h('POST', `/api/voices/${p.name}/empty`, { key: p.key, form: { name: unique('v') } });
      assert.equal(third.status, 429, JSON.stringify(third.body));
      assert.deepEqual(Object.keys(third.body), ['detail']);
      assert.ok(Number(third.headers.get('retry-after')) >= 1);
      assert.equal((await h('GET', `/api/voices/${p.name}`, { key: p.key })).status, 200, 'reads are not limited');
      assert.equal((await h('POST', `/api/voices/${p.name}/empty`, { key: testStack().adminApiKey, form: { name: unique('v') } })).status, 201);
    } finally {
      await limited.close();
    }
  });
});
