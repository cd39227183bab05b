import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createLogger } from '../../lib/platform/logger.js';
import { makeScratchDir, removeAbandonedScratch, scratchBase } from '../../lib/platform/scratch.js';

/**
 * Working folders live under one folder per process, and a process removes, at start, the folders
 * of processes that are gone: what a SIGKILLed worker was decoding does not stay on disk for good.
 */
describe('lib/platform/scratch: working folders a killed process leaves behind', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'scratch-unit-'));
  const savedTmpdir = process.env.TMPDIR;
  const log = createLogger({}, 'error');
  before(() => {
    process.env.TMPDIR = tmp;
  });
  after(() => {
    if (savedTmpdir === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = savedTmpdir;
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  /** The pid of a process that has exited (and been reaped). */
  const goneProcessPid = () => spawnSync(process.execPath, ['-e', '']).pid;
  const folderOf = (name: string, content = 'decoded audio') => {
    const dir = path.join(scratchBase(), name, 'kb-media-abc123');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'original.wav'), content);
    return path.dirname(dir);
  };

  it("removes the folders of gone processes and of this pid's predecessor, and keeps those of running processes and its own", async () => {
    const ownWork = await makeScratchDir('kb-extract-');
    assert.equal(path.dirname(path.dirname(ownWork)), scratchBase());
    assert.match(path.basename(path.dirname(ownWork)), new RegExp(`^${process.pid}-[0-9a-f]{8}$`));

    const gone = folderOf(`${goneProcessPid()}-0badf00d`);
    const predecessor = folderOf(`${process.pid}-deadbeef`);
    const running = folderOf(`${process.ppid}-c0ffee00`);
    const notOurs = folderOf('some-other-program');

    assert.equal(await removeAbandonedScratch(log), 2);
    assert.equal(fs.existsSync(gone), false, "a gone process's folder is removed with what it held");
    assert.equal(fs.existsSync(predecessor), false, 'a dead process that had this pid is gone too');
    assert.ok(fs.existsSync(running), "a running process's folder is kept");
    assert.ok(fs.existsSync(notOurs), 'a folder not named by pid is not touched');
    assert.ok(fs.existsSync(ownWork), "this process's own work is kept");
    fs.rmSync(ownWork, { recursive: true });
  });

  it('a machine where no process made a folder yet: nothing to remove', async () => {
    fs.rmSync(scratchBase(), { recursive: true, force: true });
    assert.equal(await removeAbandonedScratch(log), 0);
  });
});
