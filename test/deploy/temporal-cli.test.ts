import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { repoRoot } from '../../scripts/stack.js';
import { testStack } from '../support/stack.js';

const run = promisify(execFile);

/** `npm run temporal -- <args>`, as the operator guide has it: the built CLI, pointed at the system's Temporal. */
const npmTemporal = (args: string[], env: Record<string, string | undefined> = {}) =>
  run('npm', ['run', '--silent', 'temporal', '--', ...args], { cwd: repoRoot, env: { ...process.env, ...env }, timeout: 60_000 });

describe('the Temporal CLI of the operator guide: npm run temporal', function () {
  this.timeout(120_000);

  it('runs the built CLI', async () => {
    const { stdout } = await npmTemporal(['--version']);
    assert.match(stdout, /^temporal version .*\(Server \d+\.\d+\.\d+/);
  });

  it('talks to the Temporal of TEMPORAL_ADDRESS without an --address flag', async () => {
    const { stdout } = await npmTemporal(['workflow', 'count', '--query', 'ExecutionStatus="Running" OR ExecutionStatus="Completed"'], { TEMPORAL_ADDRESS: testStack().temporalAddress });
    assert.match(stdout, /^Total: \d+/m);
    // An --address flag still wins over the environment.
    await assert.rejects(npmTemporal(['workflow', 'count', '--address', testStack().temporalAddress.replace(/:\d+$/, ':1')], { TEMPORAL_ADDRESS: testStack().temporalAddress }));
  });

  it('says how to build the CLI when it is missing, and refuses a malformed TEMPORAL_ADDRESS', async () => {
    await assert.rejects(npmTemporal(['--version'], { DWB_TOOLS_DIR: '/nonexistent/dwb-tools' }), (err: { code: number; stderr: string }) => {
      assert.equal(err.code, 127);
      assert.match(err.stderr, /the Temporal CLI is not built .*run scripts\/setup\.sh/);
      return true;
    });
    await assert.rejects(npmTemporal(['workflow', 'list'], { TEMPORAL_ADDRESS: 'no-port' }), (err: { code: number; stderr: string }) => {
      assert.equal(err.code, 78);
      assert.match(err.stderr, /TEMPORAL_ADDRESS must be host:port/);
      return true;
    });
  });
});
