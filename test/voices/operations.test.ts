import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newPartner, unique } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { anythingStored, storedNames } from '../support/stored-files.js';
import { concatWithPauses } from '../support/audio.js';
import { binaries } from '../../scripts/stack.js';
import { voiceJobProgressQuery } from '../../lib/contracts/voice-job.js';
import { createVoice, download, libraryPassage, probeBytes, recording, settled, voicePath } from './support.js';

const run = promisify(execFile);
/** The operator commands of docs/operations.md ("Voice jobs"), run with the Temporal CLI against the test server. */
const temporalCli = (...args: string[]) => run(binaries.temporal, [...args, '--address', testStack().temporalAddress]);

/**
 * Voice jobs under failure: a worker killed in the middle of a split (a new worker finishes it and
 * no half-written sample is ever visible), a failed split retried by the operator's signal from
 * the Temporal CLI, and an operator cancelling a job (the voice is not left locked).
 */
describe('voices: a killed worker, operator signals', function () {
  this.timeout(600_000);
  let api: RunningApi;
  let http: ReturnType<typeof client>;
  let partner: { name: string; key: string };
  let long: Buffer;
  let short: Buffer;

  before(async () => {
    // The heartbeat timeout reaches the workflow from the API (its input): a lost worker's split moves on in 5 s.
    api = await startApi({ VOICE_RATE_LIMIT_PER_MINUTE: '0', VOICE_HEARTBEAT_TIMEOUT_SECONDS: '5' });
    http = client(api.url);
    partner = await newPartner(http);
    const passage = await recording('flite-kal');
    // Over two minutes of speech with pauses: a split that takes a few seconds.
    long = fs.readFileSync(await concatWithPauses([passage, passage], 1.0));
    short = fs.readFileSync(await recording('flite-kal', libraryPassage.slice(0, 4)));
  });
  after(async () => {
    await api?.close();
  });

  /** The storage key prefix of a voice's files (lib/voices/files.ts). */
  const storageOf = async (voiceId: string) => {
    const partnerId = (await api.deps.db.partner.findUniqueOrThrow({ where: { name: partner.name } })).id;
    return `voices/${partnerId}/${voiceId}`;
  };
  const splitRunning = (workflowId: string) =>
    eventually('the split activity to run', async () => {
      const d = await api.deps.temporal.workflow.getHandle(workflowId).describe();
      return d.raw.pendingActivities?.some((a) => a.activityType?.name === 'splitVoiceRecording' && String(a.state) !== '1' && a.lastStartedTime) ?? false;
    }, 120_000);

  it('a worker killed mid-split: a new worker splits again from the start, and no half-written samples are ever visible', async () => {
    let worker: RunningWorker = await startWorker();
    try {
      const name = unique('Long');
      const v = await createVoice(http, partner.key, partner.name, name, { name: 'long.wav', content: long }, { max_samples: '100', sample_duration: '5' });
      const counts = new Set<number>();
      const watch = setInterval(() => void api.deps.db.voiceSample.count({ where: { voiceId: v.id } }).then((n) => counts.add(n), () => undefined), 50);
      try {
        await splitRunning(v.workflow_id);
        // Killed as soon as the split is seen running; checked after the kill, so no machine is
        // fast enough to finish the split between the check and the kill.
        await worker.kill('SIGKILL');
        assert.equal((await http('GET', voicePath(partner.name, name), { key: partner.key })).body.status.splitting, 'in_progress', 'killed while splitting');
        assert.equal(await api.deps.db.voiceSample.count({ where: { voiceId: v.id } }), 0, 'no samples after the kill');
        worker = await startWorker();
        const done = await settled(http, partner.key, partner.name, name, 300_000);
        assert.equal(done.status.splitting, 'completed', JSON.stringify(done.status));
        assert.equal(done.status.embedding, 'completed', JSON.stringify(done.status));
        assert.equal(done.samples.length, 2 * libraryPassage.length, 'one sample per sentence: each is under 5 s with its pauses');
        assert.deepEqual([...counts].filter((n) => n !== 0 && n !== done.samples.length), [], `sample counts seen while splitting: ${[...counts]}`);
        // Exactly the committed samples are stored, each a whole Opus file.
        const files = (await storedNames(`${await storageOf(v.id)}/samples`)).sort((a, b) => parseInt(a) - parseInt(b));
        assert.deepEqual(files, done.samples.map((s: any) => `${s.index}.opus`));
        for (const s of [done.samples[0], done.samples[12], done.samples.at(-1)]) {
          const p = await probeBytes((await download(api.url, `${voicePath(partner.name, name)}/samples/${s.index}`, partner.key)).bytes, 'opus');
          assert.ok(p.codec === 'opus' && p.duration <= 5.02, JSON.stringify(p));
        }
        // The split really was interrupted: its activity ran a second time.
        const history = await api.deps.temporal.workflow.getHandle(v.workflow_id).fetchHistory();
        const splits = (history.events ?? []).filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'splitVoiceRecording');
        assert.equal(splits.length, 1);
        const started = (history.events ?? []).filter((e) => e.activityTaskStartedEventAttributes && Number(e.activityTaskStartedEventAttributes.scheduledEventId) === Number(splits[0]!.eventId));
        assert.equal(started[0]?.activityTaskStartedEventAttributes?.attempt, 2);
      } finally {
        clearInterval(watch);
      }
    } finally {
      await worker.kill();
    }
  });

  describe('operator commands (temporal CLI)', () => {
    let worker: RunningWorker;
    before(async () => {
      worker = await startWorker();
    });
    after(async () => {
      await worker?.kill();
    });

    it('a failed split waits for the retry signal; once the cause is repaired, the signal splits and embeds again', async () => {
      const name = unique('Retry');
      const created = await createVoice(http, partner.key, partner.name, name, { name: 'short.wav', content: short });
      const first = await settled(http, partner.key, partner.name, name);
      assert.equal(first.status.splitting, 'completed');
      // The stored original is damaged (a storage fault): the next split fails for good.
      const originalFile = `${await storageOf(created.id)}/${created.original_filename}`;
      const good = await api.deps.storage.read(originalFile);
      await api.deps.storage.write(originalFile, Buffer.concat([good.subarray(0, 44), Buffer.alloc(good.length - 44, 0x7f)]).subarray(0, 60));
      assert.equal((await http('POST', `${voicePath(partner.name, name)}/split`, { key: partner.key })).status, 202);
      const failed = await settled(http, partner.key, partner.name, name);
      assert.equal(failed.status.splitting, 'failed', JSON.stringify(failed.status));
      assert.equal(failed.status.embedding, 'failed');
      assert.deepEqual(failed.samples, []);

      const { stdout: listed } = await temporalCli('workflow', 'list', '--query', `WorkflowType="voiceJob" AND JobStatus="failed" AND Partner="${partner.name}"`);
      assert.match(listed, new RegExp(created.workflow_id));
      const { stdout: progress } = await temporalCli('workflow', 'query', '--workflow-id', created.workflow_id, '--type', 'progress');
      assert.match(progress, /waiting_for_retry/);

      await api.deps.storage.write(originalFile, good);
      await temporalCli('workflow', 'signal', '--workflow-id', created.workflow_id, '--name', 'retry');
      await eventually('the retry to start', async () => (await http('GET', voicePath(partner.name, name), { key: partner.key })).body.status.splitting !== 'failed');
      const v = await settled(http, partner.key, partner.name, name);
      assert.equal(v.status.splitting, 'completed', JSON.stringify(v.status));
      assert.equal(v.status.embedding, 'completed', JSON.stringify(v.status));
      assert.deepEqual(v.samples.map((s: any) => s.source_timestamp), first.samples.map((s: any) => s.source_timestamp));
      await eventually('the workflow to close', async () => (await api.deps.temporal.workflow.getHandle(created.workflow_id).describe()).status.name === 'COMPLETED');
    });

    it('a voice whose workflow was terminated stays locked only until it is read a minute later: the step is then failed', async () => {
      const name = unique('Terminated');
      const created = await createVoice(http, partner.key, partner.name, name, { name: 'long.wav', content: long }, { max_samples: '100', sample_duration: '5' });
      await splitRunning(created.workflow_id);
      await temporalCli('workflow', 'terminate', '--workflow-id', created.workflow_id, '--reason', 'operator mistake');
      assert.equal((await http('DELETE', voicePath(partner.name, name), { key: partner.key })).status, 409, 'locked right after');
      // A minute later: the row's last change is moved back instead of waiting.
      await api.deps.db.$executeRaw`UPDATE voices SET "updatedAt" = now() - interval '2 minutes' WHERE id = ${created.id}::uuid`;
      const v = (await http('GET', voicePath(partner.name, name), { key: partner.key })).body;
      assert.equal(v.status.splitting, 'failed', JSON.stringify(v.status));
      assert.match(v.status.splitting_error, /stopped outside the service/);
      assert.equal(v.status.embedding, 'failed');
      assert.equal((await http('DELETE', voicePath(partner.name, name), { key: partner.key })).status, 200);
      await eventually('no file left', async () => !(await anythingStored(await storageOf(created.id))), 30_000);
    });

    it('a retry signal while nothing failed changes nothing; cancelling a running job fails it, so the voice is not left locked', async () => {
      const name = unique('Cancelled');
      const created = await createVoice(http, partner.key, partner.name, name, { name: 'long.wav', content: long }, { max_samples: '100', sample_duration: '5' });
      await splitRunning(created.workflow_id);
      await temporalCli('workflow', 'signal', '--workflow-id', created.workflow_id, '--name', 'retry');
      const progress = await api.deps.temporal.workflow.getHandle(created.workflow_id).query(voiceJobProgressQuery);
      assert.equal(progress.state, 'running');
      assert.equal(progress.step, 'split');
      await temporalCli('workflow', 'cancel', '--workflow-id', created.workflow_id);
      const v = await settled(http, partner.key, partner.name, name, 60_000);
      assert.equal(v.status.splitting, 'failed');
      assert.match(v.status.splitting_error, /cancelled by an operator/);
      assert.equal(v.status.embedding, 'failed');
      assert.deepEqual(v.samples, []);
      const renamed = await http('PUT', `${voicePath(partner.name, name)}/name`, { key: partner.key, form: { name: unique('Renamed') } });
      assert.equal(renamed.status, 200, 'not locked: it can be renamed');
      assert.equal((await http('DELETE', voicePath(partner.name, renamed.body.name), { key: partner.key })).status, 200, 'and deleted');
    });
  });
});
