import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import proto from '@temporalio/proto';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newPartner } from '../support/fixtures.js';
import { testStack } from '../support/stack.js';
import { speak } from '../support/audio.js';
import { transcriptWorkflowId } from '../../lib/contracts/transcript.js';
import { searchAttributes } from '../../lib/contracts/search-attributes.js';

/**
 * The `transcript` workflow's code changes keep running executions safe: histories recorded by the
 * code before JobStatus followed the row (test/transcription/histories/v1-*.json: a completed
 * transcript, a language the engine refuses, an operator's cancel, and a reset of a transcript
 * already ended in error; each `History.toObject` of @temporalio/proto with longs, enums and bytes
 * as strings, which `History.fromObject` reads back exactly) replay deterministically
 * with the current code, and so do histories of the current code. New executions report in
 * JobStatus the status their transcript really ended in.
 */
const historiesDir = fileURLToPath(new URL('./histories/', import.meta.url));

function installRuntime() {
  try {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch {
    // Another test of this process installed the runtime already.
  }
}

const replay = (history: Parameters<typeof Worker.runReplayHistory>[1], workflowId: string) =>
  Worker.runReplayHistory({ workflowBundle: { codePath: testStack().workflowBundlePath } }, history, workflowId);

describe('transcription: workflow versioning and JobStatus', function () {
  this.timeout(300_000);

  const recorded = fs.readdirSync(historiesDir).filter((f) => f.startsWith('v1-') && f.endsWith('.json'));

  it('has recorded histories of every path of the earlier code', () => {
    assert.deepEqual(recorded.sort(), ['v1-cancelled.json', 'v1-completed.json', 'v1-language-error.json', 'v1-reset-after-error.json']);
  });

  for (const file of recorded) {
    it(`a history recorded before the JobStatus change replays with the current code (${file})`, async () => {
      installRuntime();
      const history = proto.temporal.api.history.v1.History.fromObject(JSON.parse(fs.readFileSync(path.join(historiesDir, file), 'utf8')));
      await replay(history, `transcript-${path.basename(file, '.json')}`);
    });
  }

  describe('new executions', () => {
    let api: RunningApi;
    let worker: RunningWorker;
    let http: ReturnType<typeof client>;
    let partner: { name: string; key: string };
    let clip: Buffer;

    before(async () => {
      api = await startApi({ TRANSCRIPTION_RATE_LIMIT_PER_MINUTE: '0', TRANSCRIPTION_CONCURRENCY_LIMIT: '0', TRANSCRIPT_RETENTION_SECONDS: '10' });
      http = client(api.url);
      partner = await newPartner(http);
      worker = await startWorker();
      clip = fs.readFileSync(await speak('Hello there.', 'flite-kal'));
    });
    after(async () => {
      await worker?.kill();
      await api?.close();
    });

    it('JobStatus is the status the transcript ended in (completed, error), and their histories replay', async () => {
      const submit = async (form: Record<string, string> = {}) => {
        const res = await http('POST', '/v2/transcript', { key: partner.key, form: { audio: { name: 'clip.wav', content: clip }, ...form } });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        return res.body.id as string;
      };
      const cases = [
        { id: await submit(), status: 'completed' },
        { id: await submit({ language_code: 'de' }), status: 'error' },
      ];
      // Each is watched from its submission: it can be read only for 10 s once finished.
      const seen = await Promise.all(
        cases.map((c) =>
          eventually(`${c.id} to finish`, async () => {
            const r = await http('GET', c.id, { key: partner.key });
            return r.body.status === 'completed' || r.body.status === 'error' ? r.body.status : null;
          }, 180_000),
        ),
      );
      assert.deepEqual(seen, cases.map((c) => c.status));
      installRuntime();
      for (const c of cases) {
        const handle = api.deps.temporal.workflow.getHandle(transcriptWorkflowId(c.id.split('/').pop()!));
        // Kept for the retention period, then deleted: the workflow completes with the attribute it last set.
        await eventually('the workflow to complete', async () => (await handle.describe()).status.name === 'COMPLETED', 60_000);
        assert.equal((await handle.describe()).typedSearchAttributes.get(searchAttributes.jobStatus), c.status);
        await replay(await handle.fetchHistory(), handle.workflowId);
      }
    });
  });
});
