import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, manage, portOpen, startAgainOnTakenPort, waitFor, type ManagedProcess } from '../../scripts/stack.js';

/**
 * The Temporal dev server, when one of the internal ports it picked is taken before it binds it,
 * logs the error and then panics with a goroutine dump of a hundred lines. A stand-in server
 * writes that shape of log here: the launcher must still see the taken port (and start again) and
 * must still quote the error when the cause is something else.
 */
describe('starting a server whose failure ends in a long stack trace', function () {
  this.timeout(30_000);
  let dir: string;
  const started: ManagedProcess[] = [];

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'server-launch-'));
  });
  afterEach(async () => {
    for (const proc of started.splice(0)) await proc.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const trace = Array.from({ length: 100 }, (_, i) => `go.temporal.io/server/temporal.frame${i}(...)\\n\\t/root/go/pkg/mod/server.go:${i}`).join('\\n');
  /** Fails its first run with `error`, then a panic and its trace; a later run listens on `port`. */
  const standIn = (port: number, error: string) => `
    const fs = require('node:fs');
    const marker = ${JSON.stringify(path.join(dir, 'ran-once'))};
    if (!fs.existsSync(marker)) {
      fs.writeFileSync(marker, '');
      console.log('time=2026-11-29T10:00:00Z level=ERROR msg="${error}"');
      console.log('panic: runtime error: invalid memory address or nil pointer dereference');
      console.log("${trace}");
      process.exit(2);
    }
    require('node:net').createServer().listen(${port}, '127.0.0.1');
  `;
  const launch = (port: number, error: string) => async () => {
    const proc = manage('stand-in', process.execPath, ['-e', standIn(port, error)], { logFile: path.join(dir, 'server.log') });
    started.push(proc);
    await waitFor('Stand-in server', () => portOpen(port), 10_000, proc);
    return proc;
  };

  it('a port taken before the panic starts it again, and it runs', async () => {
    const port = await freePort();
    let attempts = 0;
    await startAgainOnTakenPort(
      (attempt) => ((attempts = attempt), launch(port, 'Failed to start gRPC listener error=\\"listen tcp 127.0.0.1:45678: bind: address already in use\\"')()),
      () => true,
    );
    assert.equal(attempts, 2);
    assert.equal(await portOpen(port), true);
  });

  it('another failure is reported with its error line, not only the last frames of the trace', async () => {
    const port = await freePort();
    await assert.rejects(
      startAgainOnTakenPort(launch(port, 'Failed to get new ringpop error=\\"no such host\\"'), () => true),
      (err: Error) => {
        assert.match(err.message, /^Stand-in server exited with code 2 before it was ready; the end of its log:/);
        assert.match(err.message, /level=ERROR msg="Failed to get new ringpop/);
        assert.match(err.message, /^panic: runtime error/m);
        assert.match(err.message, /frame99/);
        return true;
      },
    );
    assert.equal(await portOpen(port), false);
  });
});
