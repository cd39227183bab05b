import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { freePort, repoRoot, startObjectStore, type ObjectStoreProcess } from '../../scripts/stack.js';
import { systemEnv, testStack } from '../support/stack.js';
import { isolatedSystemEnv, startWorker } from '../support/system.js';

/**
 * Bad object-store settings stop both entry points before they serve, with exit code 78 and a
 * message naming the setting (one listing of the bucket at start): a missing bucket, refused
 * credentials, an endpoint that does not answer within the start-up wait. A store that comes up a
 * moment after the process is waited for.
 */
const entryPoints = ['api/server.ts', 'workers/main.ts'];

/** Runs an entry point until it exits (or `timeoutMs`): its exit code and what it wrote to stderr. */
function startUp(entry: string, env: Record<string, string>, timeoutMs = 60_000): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', entry], { cwd: repoRoot, env: { ...process.env, ...systemEnv(env) }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += String(d)));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${entry} did not exit within ${timeoutMs / 1000} s:\n${stderr}`));
    }, timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

describe('object store settings checked at start', function () {
  this.timeout(120_000);

  for (const entry of entryPoints) {
    it(`${entry}: a bucket that does not exist stops it, naming STORAGE_URL and the bucket`, async () => {
      const r = await startUp(entry, { STORAGE_URL: 's3://no-such-bucket/files' });
      assert.equal(r.code, 78, r.stderr);
      assert.match(r.stderr, /configuration error: STORAGE_URL names bucket "no-such-bucket", which does not exist at http:\/\/127\.0\.0\.1:\d+/);
    });

    it(`${entry}: refused credentials stop it, naming AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (the secret itself never shown)`, async () => {
      const wrongSecret = 'not-the-secret-of-the-store-0123';
      const r = await startUp(entry, { AWS_SECRET_ACCESS_KEY: wrongSecret });
      assert.equal(r.code, 78, r.stderr);
      assert.match(r.stderr, /configuration error: AWS_ACCESS_KEY_ID \S+ \/ AWS_SECRET_ACCESS_KEY were refused by the object store at http:\/\/127\.0\.0\.1:\d+ \(SignatureDoesNotMatch/);
      assert.ok(!r.stderr.includes(wrongSecret), 'the secret is not in the message');
    });
  }

  it('an endpoint that does not answer stops both, naming S3_ENDPOINT, after the start-up wait (15 s)', async () => {
    const endpoint = `http://127.0.0.1:${await freePort()}`;
    const started = Date.now();
    const results = await Promise.all(entryPoints.map((entry) => startUp(entry, { S3_ENDPOINT: endpoint })));
    for (const r of results) {
      assert.equal(r.code, 78, r.stderr);
      assert.match(r.stderr, new RegExp(`configuration error: S3_ENDPOINT ${endpoint.replace(/\./g, '\\.')} could not be reached for 15 s \\(ECONNREFUSED\\)`));
    }
    assert.ok(Date.now() - started >= 15_000, 'it waited for the store before giving up');
  });

  it('a worker whose object store comes up a few seconds after it starts normally', async () => {
    const { objectStore } = testStack();
    const port = await freePort();
    const dataDir = fs.mkdtempSync(path.join(testStack().workDir, 'late-store-'));
    const storeOptions = { dataDir: path.join(dataDir, 'data'), logFile: path.join(dataDir, 'store.log'), port, accessKey: objectStore.accessKey, secretKey: objectStore.secretKey, bucket: 'late-bucket' };
    // The bucket exists; the store is down when the worker starts, and comes up 4 s later (the
    // worker's own start takes ~2 s before its check).
    let store: ObjectStoreProcess | null = await startObjectStore(storeOptions);
    await store.stop();
    // The port is held while the store is down, so that no server of another lane takes it in the
    // meantime (one that never answers hung this test); the worker finds its connections closed.
    const placeholder = net.createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => placeholder.listen(port, '127.0.0.1', resolve));
    // A database and task queues of its own: on the lane's, the worker could take up another test's
    // leftover work, and its graceful stop would then wait for that (it hung past the timeout).
    const isolated = await isolatedSystemEnv('late_store');
    const worker = startWorker({ ...isolated.env, TEMPORAL_AUDIO_TASK_QUEUE: `${isolated.env.TEMPORAL_TASK_QUEUE}-audio`, STORAGE_URL: 's3://late-bucket/files', S3_ENDPOINT: `http://127.0.0.1:${port}` });
    worker.catch(() => undefined);
    try {
      await new Promise((r) => setTimeout(r, 4_000));
      await new Promise((resolve) => placeholder.close(resolve));
      store = await startObjectStore(storeOptions);
      const running = await worker;
      assert.equal(running.child.exitCode, null, 'the worker runs');
    } finally {
      if (placeholder.listening) placeholder.close();
      await worker.then((w) => w.kill(), () => undefined);
      await store?.stop();
      await isolated.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
