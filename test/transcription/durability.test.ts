import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newPartner } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { anythingStored } from '../support/stored-files.js';
import { concatWithPauses, libraryPassage as sentences, speak, wer } from '../support/audio.js';
import { binaries } from '../../scripts/stack.js';
import { transcriptProgressQuery, transcriptWorkflowId } from '../../lib/contracts/transcript.js';

const run = promisify(execFile);
/** The operator commands of docs/operations.md ("Transcripts"), run with the Temporal CLI against the test server. */
const temporalCli = (...args: string[]) => run(binaries.temporal, [...args, '--address', testStack().temporalAddress]);


/**
 * A transcript survives a worker killed in the middle of it (the finished segments are not done
 * again), and the operator commands of docs/operations.md work: cancel, progress query, and the
 * retention period after which the transcript is gone.
 */
describe('transcription: a killed worker, operator commands, retention', function () {
  this.timeout(600_000);
  let api: RunningApi;
  let http: ReturnType<typeof client>;
  let partner: { name: string; key: string };
  let recording: Buffer;
  let clip: Buffer;

  before(async () => {
    api = await startApi({ TRANSCRIPTION_RATE_LIMIT_PER_MINUTE: '0', TRANSCRIPTION_CONCURRENCY_LIMIT: '0', TRANSCRIPT_HEARTBEAT_TIMEOUT_SECONDS: '5', TRANSCRIPT_RETENTION_SECONDS: '20' });
    http = client(api.url);
    partner = await newPartner(http);
    recording = fs.readFileSync(await concatWithPauses(await Promise.all(sentences.map((s) => speak(s, 'flite-kal'))), 1.0));
    clip = fs.readFileSync(await speak(sentences[0]!, 'flite-kal'));
  });
  after(async () => {
    await api?.close();
  });

  const submit = async (content = recording) => {
    const res = await http('POST', '/v2/transcript', { key: partner.key, form: { audio: { name: 'library.wav', content } } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return { path: res.body.id as string, id: (res.body.id as string).split('/').pop()! };
  };
  const segments = (id: string) => api.deps.db.transcriptSegment.findMany({ where: { transcriptId: id }, orderBy: { index: 'asc' } });
  const storedFiles = (id: string) => anythingStored(`transcripts/${id}`);
  /** Whether `temporal workflow list` (what an operator filters the Web UI by) shows the transcript's workflow with this JobStatus. */
  const listedWith = async (id: string, status: string) => {
    const { stdout } = await temporalCli('workflow', 'list', '--query', `WorkflowId="${transcriptWorkflowId(id)}" AND JobStatus="${status}"`);
    return stdout.includes(transcriptWorkflowId(id));
  };

  it('a worker killed mid-transcript: a new worker finishes it, the segments done before are not done again, and the working folders it left are removed', async () => {
    // The workers' OS temp folder, to see what the killed one left there.
    const tmp = fs.mkdtempSync(path.join(testStack().workDir, 'worker-tmp-'));
    const scratchOf = (w: RunningWorker) => fs.readdirSync(path.join(tmp, 'kb-scratch')).filter((name) => name.startsWith(`${w.child.pid}-`));
    const workerEnv = { TRANSCRIPT_SEGMENT_SECONDS: '15', TMPDIR: tmp };
    let worker: RunningWorker = await startWorker(workerEnv);
    try {
      const t = await submit();
      const seen = new Set<string>();
      const watch = setInterval(() => void http('GET', t.path, { key: partner.key }).then((r) => seen.add(r.body.status), () => undefined), 200);
      try {
        const before = await eventually('some but not all segments to be done', async () => {
          const s = await segments(t.id);
          const done = s.filter((x) => x.completedAt);
          return s.length > 2 && done.length >= 1 && done.length < s.length ? done.map((x) => x.index) : null;
        }, 240_000);
        await worker.kill('SIGKILL');
        const killed = worker;
        assert.equal(scratchOf(killed).length, 1, 'the killed worker left its working folder');
        worker = await startWorker(workerEnv);
        assert.deepEqual(scratchOf(killed), [], 'the next worker removed it at start');
        const done = await eventually('the transcript to finish', async () => {
          const r = await http('GET', t.path, { key: partner.key });
          return r.body.status === 'completed' || r.body.status === 'error' ? r.body : null;
        }, 300_000);
        assert.equal(done.status, 'completed', JSON.stringify(done));
        const rate = wer(sentences.join(' '), done.text);
        assert.ok(rate <= 0.3, `WER ${rate.toFixed(2)}: ${done.text}`);
        const after = await segments(t.id);
        for (const i of before) assert.equal(after[i]!.attempts, 1, `segment ${i} was done before the kill and not again`);
        assert.ok(after.every((s) => s.completedAt));
        assert.ok(seen.has('processing'), [...seen].join());
        assert.equal(await storedFiles(t.id), false, 'the audio is deleted when the transcript finishes');
      } finally {
        clearInterval(watch);
      }
    } finally {
      await worker.kill();
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  describe('operator commands (temporal CLI) and retention', () => {
    let worker: RunningWorker;
    before(async () => {
      worker = await startWorker({ TRANSCRIPT_SEGMENT_SECONDS: '15', AUDIO_WORKER_MAX_ACTIVITIES: '1' });
    });
    after(async () => {
      await worker?.kill();
    });

    it('the progress query and the cancel signal: the transcript ends in error with the reason, its audio removed', async () => {
      const t = await submit();
      await eventually('processing', async () => (await http('GET', t.path, { key: partner.key })).body.status === 'processing');
      // Visibility indexes JobStatus a moment after the workflow set it: wait on the list itself.
      await eventually('the transcript listed as processing', async () => {
        const { stdout } = await temporalCli('workflow', 'list', '--query', `WorkflowType="transcript" AND JobStatus="processing"`);
        return stdout.includes(transcriptWorkflowId(t.id));
      });
      const progress = await api.deps.temporal.workflow.getHandle(transcriptWorkflowId(t.id)).query(transcriptProgressQuery);
      assert.equal(progress.status, 'processing');
      await temporalCli('workflow', 'signal', '--workflow-id', transcriptWorkflowId(t.id), '--name', 'cancel', '--input', '"wrong file"');
      const done = await eventually('the cancellation', async () => {
        const r = await http('GET', t.path, { key: partner.key });
        return r.body.status === 'error' ? r.body : null;
      });
      assert.deepEqual(done, { id: t.path, status: 'error', error: 'cancelled by an operator: wrong file' });
      await eventually('the audio to be removed', async () => !(await storedFiles(t.id)));
      await eventually('JobStatus error in the list', async () => listedWith(t.id, 'error'));
      assert.equal(await listedWith(t.id, 'processing'), false);
    });

    it("an operator's reset of a transcript the service had already ended in error leaves it in error, and JobStatus says error", async () => {
      // A transcript whose workflow was terminated by hand is ended in error by the API when the
      // partner's concurrency limit is reached (reconcileStuck). An operator who then resets the
      // workflow gets a run that finds the transcript finished: it must not report it completed.
      const limited = await startApi({ TRANSCRIPTION_RATE_LIMIT_PER_MINUTE: '0', TRANSCRIPTION_CONCURRENCY_LIMIT: '1', TRANSCRIPT_RETENTION_SECONDS: '20' });
      try {
        const call = client(limited.url);
        const owner = await newPartner(call);
        // Nothing answers on port 9: the download is retried, the transcript stays processing.
        const stuck = await call('POST', '/v2/transcript', { key: owner.key, json: { audio_url: 'http://127.0.0.1:9/episode.mp3' } });
        assert.equal(stuck.status, 200, JSON.stringify(stuck.body));
        const id = (stuck.body.id as string).split('/').pop()!;
        const workflowId = transcriptWorkflowId(id);
        await eventually('processing', async () => (await call('GET', stuck.body.id, { key: owner.key })).body.status === 'processing');
        await temporalCli('workflow', 'terminate', '--workflow-id', workflowId, '--reason', 'test: stopped by hand');
        await limited.deps.db.transcript.update({ where: { id }, data: { createdAt: new Date(Date.now() - 5 * 60_000) } });
        const next = await call('POST', '/v2/transcript', { key: owner.key, form: { audio: { name: 'clip.wav', content: clip } } });
        assert.equal(next.status, 200, JSON.stringify(next.body));
        const ended = (await call('GET', stuck.body.id, { key: owner.key })).body;
        assert.equal(ended.status, 'error');
        assert.match(ended.error, /stopped outside the service/);

        await temporalCli('workflow', 'reset', '--workflow-id', workflowId, '--type', 'FirstWorkflowTask', '--reason', 'operator: try it again');
        await eventually('JobStatus error on the reset run', async () => {
          const { stdout } = await temporalCli('workflow', 'list', '--query', `WorkflowId="${workflowId}" AND ExecutionStatus="Running" AND JobStatus="error"`);
          return stdout.includes(workflowId);
        }, 120_000);
        assert.equal((await limited.deps.temporal.workflow.getHandle(workflowId).query(transcriptProgressQuery)).status, 'error');
        assert.deepEqual((await call('GET', stuck.body.id, { key: owner.key })).body, ended, 'the transcript is as the service left it');
        await eventually('the other transcript to finish', async () => ['completed', 'error'].includes((await call('GET', next.body.id, { key: owner.key })).body.status), 240_000);
      } finally {
        await limited.close();
      }
    });

    it('deleting a partner deletes its transcripts: a transcript in progress stops, its workflow ends and its audio is removed', async () => {
      const doomed = await newPartner(http);
      const res = await http('POST', '/v2/transcript', { key: doomed.key, form: { audio: { name: 'library.wav', content: recording } } });
      const id = (res.body.id as string).split('/').pop()!;
      await eventually('processing', async () => (await http('GET', res.body.id, { key: doomed.key })).body.status === 'processing');
      const deleted = await http('DELETE', `/api/partners/${doomed.name}`, { key: testStack().adminApiKey });
      assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
      assert.equal(await api.deps.db.transcript.count({ where: { id } }), 0);
      await eventually('the workflow to end', async () => (await api.deps.temporal.workflow.getHandle(transcriptWorkflowId(id)).describe()).status.name === 'COMPLETED', 120_000);
      assert.equal(await storedFiles(id), false);
    });

    it('a finished transcript is readable for the retention period, then 404 and deleted; cancelling its workflow deletes it at once', async () => {
      const t = await submit(clip);
      await eventually('completion', async () => (await http('GET', t.path, { key: partner.key })).body.status === 'completed', 240_000);
      const expiresAt = (await api.deps.db.transcript.findUnique({ where: { id: t.id } }))!.expiresAt!;
      const finishedAt = (await api.deps.db.transcript.findUnique({ where: { id: t.id } }))!.finishedAt!;
      assert.equal(expiresAt.getTime() - finishedAt.getTime(), 20_000);
      await eventually('expiry', async () => (await http('GET', t.path, { key: partner.key })).status === 404, 60_000);
      await eventually('the row to be deleted', async () => (await api.deps.db.transcript.count({ where: { id: t.id } })) === 0, 60_000);

      const second = await submit(clip);
      await eventually('completion', async () => (await http('GET', second.path, { key: partner.key })).body.status === 'completed', 240_000);
      await temporalCli('workflow', 'cancel', '--workflow-id', transcriptWorkflowId(second.id));
      await eventually('the row to be deleted', async () => (await api.deps.db.transcript.count({ where: { id: second.id } })) === 0);
      assert.equal((await http('GET', second.path, { key: partner.key })).status, 404);
    });
  });
});
