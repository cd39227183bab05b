import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { repoRoot } from '../../scripts/stack.js';

const run = promisify(execFile);

/**
 * The logger writes the lines of one event-loop turn together (lib/platform/logger.ts). What an
 * operator reads must not change: every line, in order, one JSON object each, and none lost when
 * the process exits or crashes before the turn ends.
 */
async function logsOf(script: string): Promise<{ lines: Array<Record<string, unknown>>; code: number }> {
  const source = `import { createLogger } from './lib/platform/logger.ts';\nconst log = createLogger({ component: 'test' });\n${script}`;
  const result = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', source], { cwd: repoRoot }).then(
    (r) => ({ stdout: r.stdout, code: 0 }),
    (err: { stdout: string; code: number }) => ({ stdout: err.stdout, code: err.code }),
  );
  const lines = result.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
  return { lines, code: result.code };
}

describe('log lines', function () {
  this.timeout(60_000);

  it('lines of one turn and of later turns come out whole and in order', async () => {
    const { lines } = await logsOf(`
      for (let i = 0; i < 50; i++) log.info('same turn', { i });
      setTimeout(() => log.warn('later turn', { secret: 'none' }), 20);
      await new Promise((r) => setTimeout(r, 10));
      log.info('between');
    `);
    assert.deepEqual(lines.map((l) => l.msg), [...Array(50).fill('same turn'), 'between', 'later turn']);
    assert.deepEqual(lines.slice(0, 50).map((l) => l.i), Array.from({ length: 50 }, (_, i) => i));
    assert.equal(lines[51]!.level, 'warn');
    assert.equal(lines[51]!.component, 'test');
  });

  it('a line logged just before a crash or an exit in the same turn is written', async () => {
    const crashed = await logsOf(`setTimeout(() => { log.error('about to fail', { step: 3 }); throw new Error('boom'); }, 5);`);
    assert.notEqual(crashed.code, 0);
    assert.deepEqual(crashed.lines.map((l) => [l.msg, l.step]), [['about to fail', 3]]);

    const exited = await logsOf(`log.info('one'); log.info('two'); process.exit(4);`);
    assert.equal(exited.code, 4);
    assert.deepEqual(exited.lines.map((l) => l.msg), ['one', 'two']);
  });
});
