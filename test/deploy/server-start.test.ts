import assert from 'node:assert/strict';
import net from 'node:net';
import path from 'node:path';
import { freePort, freePortPair, startTemporal, startWeaviate, type ManagedProcess } from '../../scripts/stack.js';
import { testStack } from '../support/stack.js';

/**
 * A server that cannot start says why: `scripts/start` and the test run report the end of its log
 * with the error, not an exit code alone.
 */
describe('starting the servers on a port another process holds', function () {
  this.timeout(120_000);
  let holder: net.Server;
  let started: ManagedProcess | null = null;

  const hold = async (port: number) => {
    holder = net.createServer((socket) => socket.destroy());
    await new Promise<void>((r) => holder.listen(port, '127.0.0.1', r));
  };
  const dir = (name: string) => path.join(testStack().workDir, `${name}-${process.pid}`);

  afterEach(async () => {
    await started?.stop();
    started = null;
    await new Promise((r) => holder.close(r));
  });

  it('Weaviate fails with the reason from its log', async () => {
    const ports = { http: await freePort(), grpc: await freePort(), gossip: await freePort(), data: await freePort(), raft: await freePortPair() };
    await hold(ports.grpc);
    await assert.rejects(
      async () => (started = await startWeaviate({ dataDir: dir('weaviate-taken'), logFile: path.join(dir('weaviate-taken'), 'weaviate.log'), ports })),
      (err: Error) => {
        assert.match(err.message, /^Weaviate exited with code 1 before it was ready; the end of its log:/);
        assert.match(err.message, new RegExp(`:${ports.grpc}: bind: address already in use`));
        return true;
      },
    );
  });

  it('Temporal fails with the reason from its log', async () => {
    const port = await freePort();
    await hold(port);
    await assert.rejects(
      async () => (started = await startTemporal({ port, uiPort: null, dbFile: path.join(dir('temporal-taken'), 'temporal.db'), logFile: path.join(dir('temporal-taken'), 'temporal.log') })),
      (err: Error) => {
        assert.match(err.message, /^Temporal server exited with code 1 before it was ready; the end of its log:/);
        assert.match(err.message, new RegExp(`frontend port ${port}: .*bind: address already in use`));
        return true;
      },
    );
  });
});
