import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newPartner, unique } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { anythingStored } from '../support/stored-files.js';
import { RunPodFake, type FakeJob } from '../support/runpod-fake.js';
import { binaries } from '../../scripts/stack.js';
import { voiceJobProgressQuery } from '../../lib/contracts/voice-job.js';
import { download, libraryPassage, settled, speak, unzip, voicePath } from './support.js';

const run = promisify(execFile);
const temporalCli = (...args: string[]) => run(binaries.temporal, [...args, '--address', testStack().temporalAddress]);

/**
 * Embedding through the GPU job service adapter, against a local server speaking the RunPod
 * serverless queue protocol: the job's input (and the samples it downloads by signed link), a
 * completed job's output stored and served, a failed job and the operator's retry, a job timing
 * out on the service and on our side, a re-embed and a deletion cancelling the running job, an
 * outage of the status endpoint, and a worker killed while it awaits a job.
 */
describe('voices: embedding through a GPU job service (RunPod protocol)', function () {
  this.timeout(600_000);
  const fake = new RunPodFake();
  let api: RunningApi;
  let worker: RunningWorker;
  let http: ReturnType<typeof client>;
  let partner: { name: string; key: string };
  let clips: Buffer[];
  let workerEnv: Record<string, string>;

  before(async () => {
    await fake.start();
    const gpu = { VOICE_JOB_BASE_URL: fake.url, VOICE_JOB_API_KEY: fake.apiKey, VOICE_RATE_LIMIT_PER_MINUTE: '0', VOICE_JOB_TIMEOUT_SECONDS: '120', VOICE_HEARTBEAT_TIMEOUT_SECONDS: '5' };
    api = await startApi(gpu);
    http = client(api.url);
    workerEnv = { ...gpu, VOICE_JOB_POLL_INTERVAL_MS: '200', VOICE_JOB_FILES_BASE_URL: api.url };
    [worker, clips] = await Promise.all([
      startWorker(workerEnv),
      Promise.all(libraryPassage.slice(0, 2).map(async (s) => fs.readFileSync(await speak(s, 'flite-kal')))),
    ]);
    partner = await newPartner(http);
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
    await fake.close();
  });

  /** A voice with two uploaded samples (no split needed), for `owner`. */
  const voiceWithSamples = async (owner = partner) => {
    const name = unique('Gpu');
    assert.equal((await http('POST', `/api/voices/${owner.name}/empty`, { key: owner.key, form: { name } })).status, 201);
    for (const [i, clip] of clips.entries()) {
      const r = await http('POST', `${voicePath(owner.name, name)}/samples`, { key: owner.key, form: { file: { name: `${i}.wav`, content: clip } } });
      assert.equal(r.status, 201, JSON.stringify(r.body));
    }
    return name;
  };
  const embed = async (name: string, form: Record<string, string> = {}, owner = partner) => {
    const r = await http('POST', `${voicePath(owner.name, name)}/embed`, { key: owner.key, form });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    return r.body;
  };
  const jobsOf = (voiceId: string) => fake.jobList.filter((j) => j.input.voice.id === voiceId);
  const jobOf = (voiceId: string, n = 1) => eventually(`GPU job ${n} of the voice`, async () => jobsOf(voiceId)[n - 1] ?? null);
  const polled = (job: FakeJob) => eventually('the job to be polled', async () => fake.statusRequests.includes(job.id));

  it('a completed job: its input names the samples (downloaded by signed link), its output is stored and served', async () => {
    const name = await voiceWithSamples();
    const requested = await embed(name, { tts_type: 'xtts-v2' });
    assert.equal(requested.status.embedding, 'in_progress');
    const v = await settled(http, partner.key, partner.name, name);
    assert.equal(v.status.embedding, 'completed', JSON.stringify(v.status));
    const jobs = jobsOf(v.id);
    assert.equal(jobs.length, 1, 'one job');
    const { input } = jobs[0]!;
    assert.equal(input.operation, 'embed_voice');
    assert.equal(input.operation_key, `${v.workflow_id}/embed/1`);
    assert.deepEqual(input.voice, { id: v.id, name, partner: partner.name });
    assert.equal(input.tts_type, 'xtts-v2');
    assert.deepEqual(input.samples, v.samples);
    assert.deepEqual(input.test_sentences.map((t: any) => t.sentence_index), [0, 1, 2]);
    assert.ok(input.samples_bundle_url.startsWith(`${api.url}/api/voice-job-files/`), input.samples_bundle_url);
    assert.equal(jobs[0]!.bundleError, null);
    assert.deepEqual(jobs[0]!.bundle!.files, ['0.opus', '1.opus', 'voice_info.json']);
    assert.ok(jobs[0]!.bundle!.opusHeads.every((h) => h.subarray(0, 4).toString('latin1') === 'OggS'));

    const output = jobs[0]!.output as any;
    assert.deepEqual(v.embedding_info.sample_scores, output.sample_scores);
    assert.equal(v.embedding_info.tts_type, 'xtts-v2');
    assert.equal(v.embedding_info.last_update_status, 'completed');
    assert.equal(v.speech.remote_voice_id, `remote-${v.id}`);
    assert.equal(v.speech.built_in_voice, 'kal', 'local speech still finds its nearest built-in voice');
    assert.equal(v.embedding_info.test_samples.length, 3);
    const listed = await http('GET', `${voicePath(partner.name, name)}/test-samples?tts_type=xtts-v2`, { key: partner.key });
    assert.deepEqual(listed.body.map((t: any) => [t.filename, t.content_type]), [['0_0.wav', 'audio/wav'], ['0_1.wav', 'audio/wav'], ['0_2.wav', 'audio/wav']]);
    const audio = await download(api.url, new URL(listed.body[1].url).pathname + new URL(listed.body[1].url).search, partner.key);
    assert.equal(audio.status, 200);
    assert.equal(audio.type, 'audio/wav');
    assert.deepEqual((await http('GET', `${voicePath(partner.name, name)}/test-samples`, { key: partner.key })).body, [], 'none of the default TTS type');
    const artefact = await download(api.url, new URL(v.embedding_zip_url).pathname, partner.key);
    assert.equal(artefact.status, 200);
    assert.deepEqual(JSON.parse(unzip(artefact.bytes)['speaker.json']!.toString('utf8')), { job: jobs[0]!.id, tts_type: 'xtts-v2', samples: [0, 1] });
    assert.deepEqual(fake.cancelRequests.filter((id) => id === jobs[0]!.id), [], 'a completed job is not cancelled');
  });

  it('a FAILED job fails the embedding with its error; the operator retry signal runs it again', async () => {
    const name = await voiceWithSamples();
    fake.queued.push({ kind: 'fail', error: 'CUDA out of memory' });
    await embed(name);
    const failed = await settled(http, partner.key, partner.name, name);
    assert.equal(failed.status.embedding, 'failed');
    assert.match(failed.status.embedding_error, /CUDA out of memory/);
    assert.equal(failed.embedding_info.last_update_status, 'failed');
    assert.equal(failed.embedding_zip_url, null);
    const { stdout } = await temporalCli('workflow', 'list', '--query', `WorkflowType="voiceJob" AND JobStatus="failed" AND Partner="${partner.name}"`);
    assert.match(stdout, new RegExp(failed.workflow_id));
    const progress = await api.deps.temporal.workflow.getHandle(failed.workflow_id).query(voiceJobProgressQuery);
    assert.equal(progress.state, 'waiting_for_retry');
    assert.match(progress.lastError ?? '', /CUDA out of memory/);
    await temporalCli('workflow', 'signal', '--workflow-id', failed.workflow_id, '--name', 'retry');
    await eventually('the retry to start', async () => (await http('GET', voicePath(partner.name, name), { key: partner.key })).body.status.embedding !== 'failed');
    const v = await settled(http, partner.key, partner.name, name);
    assert.equal(v.status.embedding, 'completed', JSON.stringify(v.status));
    assert.equal(v.status.embedding_error, null);
    assert.equal(jobsOf(v.id).length, 2);
    assert.equal(jobsOf(v.id)[1]!.input.operation_key, `${v.workflow_id}/embed/2`);
    await eventually('the workflow to close', async () => (await api.deps.temporal.workflow.getHandle(v.workflow_id).describe()).status.name === 'COMPLETED');
  });

  it('a job TIMED_OUT on the service fails the embedding saying so', async () => {
    const name = await voiceWithSamples();
    fake.queued.push({ kind: 'timed_out' });
    await embed(name);
    const v = await settled(http, partner.key, partner.name, name);
    assert.equal(v.status.embedding, 'failed');
    assert.match(v.status.embedding_error, /timed out on the GPU job service/);
  });

  it('a job that outlives VOICE_JOB_TIMEOUT_SECONDS is cancelled on the service and the embedding fails', async () => {
    const impatient = await startApi({ VOICE_JOB_BASE_URL: fake.url, VOICE_JOB_API_KEY: fake.apiKey, VOICE_RATE_LIMIT_PER_MINUTE: '0', VOICE_JOB_TIMEOUT_SECONDS: '4' });
    try {
      const name = await voiceWithSamples();
      fake.queued.push({ kind: 'hold' });
      const r = await client(impatient.url)('POST', `${voicePath(partner.name, name)}/embed`, { key: partner.key });
      assert.equal(r.status, 202);
      const job = await jobOf(r.body.id);
      const v = await settled(http, partner.key, partner.name, name, 60_000);
      assert.equal(v.status.embedding, 'failed');
      assert.match(v.status.embedding_error, /did not finish within 4 s/);
      assert.ok(fake.cancelRequests.includes(job.id), 'cancelled on the service');
      assert.equal(job.status, 'CANCELLED');
    } finally {
      await impatient.close();
    }
  });

  it('a re-embed cancels the running job and runs a new one', async () => {
    const name = await voiceWithSamples();
    fake.queued.push({ kind: 'hold' });
    const first = await embed(name);
    const job1 = await jobOf(first.id);
    await polled(job1);
    const again = await embed(name, { tts_type: 'styletts2' });
    assert.equal(again.status.embedding, 'in_progress');
    await eventually('the first job to be cancelled', async () => fake.cancelRequests.includes(job1.id));
    const v = await settled(http, partner.key, partner.name, name);
    assert.equal(v.status.embedding, 'completed', JSON.stringify(v.status));
    assert.equal(v.embedding_info.tts_type, 'styletts2');
    const jobs = jobsOf(v.id);
    assert.equal(jobs.length, 2);
    assert.equal(jobs[0]!.status, 'CANCELLED');
    assert.equal(jobs[1]!.input.tts_type, 'styletts2');
  });

  it('deleting the voice (with its partner) cancels its running job and removes every file; the voice itself is locked meanwhile', async () => {
    const doomed = await newPartner(http);
    const name = await voiceWithSamples(doomed);
    fake.queued.push({ kind: 'hold' });
    const requested = await embed(name, {}, doomed);
    const job = await jobOf(requested.id);
    await polled(job);
    const locked = await http('DELETE', voicePath(doomed.name, name), { key: doomed.key });
    assert.equal(locked.status, 409, 'the voice alone cannot be deleted while it is embedded');
    const partnerId = (await api.deps.db.partner.findUniqueOrThrow({ where: { name: doomed.name } })).id;
    const files = `voices/${partnerId}`;
    assert.ok(await anythingStored(files));
    assert.equal((await http('DELETE', `/api/partners/${doomed.name}`, { key: testStack().adminApiKey })).status, 200);
    await eventually('the job to be cancelled', async () => fake.cancelRequests.includes(job.id));
    assert.equal(job.status, 'CANCELLED');
    assert.equal(await api.deps.db.voice.count({ where: { id: requested.id } }), 0);
    assert.equal(await anythingStored(files), false);
    await eventually('the workflow to end', async () => (await api.deps.temporal.workflow.getHandle(requested.workflow_id).describe()).status.name === 'COMPLETED');
    assert.equal(await api.deps.temporal.workflow.getHandle(requested.workflow_id).result(), 'gone');
  });

  it('an outage of the submission endpoint is waited out (five 503s in a row, where five attempts once failed the embedding)', async function () {
    // The retries wait 2, 4, 8, 16 and 32 s.
    this.timeout(240_000);
    const name = await voiceWithSamples();
    const jobsBefore = fake.jobList.length;
    fake.runOutages = 5;
    fake.runOutageRequests = 0;
    await embed(name);
    const v = await settled(http, partner.key, partner.name, name, 200_000);
    assert.equal(v.status.embedding, 'completed', JSON.stringify(v.status));
    assert.equal(fake.runOutageRequests, 5);
    assert.equal(fake.jobList.length, jobsBefore + 1, 'one job, submitted once the service was back');
  });

  it('an outage of the status endpoint is waited out', async () => {
    const name = await voiceWithSamples();
    fake.statusOutage = 503;
    try {
      const requested = await embed(name);
      const job = await jobOf(requested.id);
      await eventually('a few failed polls', async () => fake.statusRequests.filter((id) => id === job.id).length >= 3);
    } finally {
      fake.statusOutage = null;
    }
    const v = await settled(http, partner.key, partner.name, name);
    assert.equal(v.status.embedding, 'completed', JSON.stringify(v.status));
  });

  it('a worker killed while it awaits a job: a new worker resumes the same job, none is submitted twice', async () => {
    const name = await voiceWithSamples();
    fake.queued.push({ kind: 'hold' });
    const requested = await embed(name);
    const job = await jobOf(requested.id);
    await polled(job);
    await worker.kill('SIGKILL');
    const before = fake.statusRequests.length;
    worker = await startWorker(workerEnv);
    await eventually('the new worker to poll the same job', async () => fake.statusRequests.slice(before).includes(job.id), 120_000);
    fake.release(job.id, { kind: 'complete', afterPolls: 1 });
    const v = await settled(http, partner.key, partner.name, name);
    assert.equal(v.status.embedding, 'completed', JSON.stringify(v.status));
    assert.equal(jobsOf(requested.id).length, 1, 'one job only');
    assert.equal(fake.runRequests.filter((r) => r.input.voice.id === requested.id).length, 1);
  });
});
