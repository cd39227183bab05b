import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { processRunning } from './child-process.js';
import type { Logger } from './logger.js';

/**
 * Working folders (a decoded recording, a converted document, OCR pages, speech engine output) are
 * made under one folder per process, `<OS temp dir>/kb-scratch/<pid>-<random>`, and removed by the
 * code that made them. A process killed outright (SIGKILL, the OOM killer, a deploy that does not
 * wait) cannot remove them: a decoded 4-hour recording is ~460 MB. So every process removes, at
 * start, the folders of processes that are gone (removeAbandonedScratch).
 */
export const scratchBase = () => path.join(os.tmpdir(), 'kb-scratch');

// The random part tells this process from a dead one that had the same pid: in a container a
// restarted process often gets its predecessor's.
const ownName = `${process.pid}-${randomBytes(4).toString('hex')}`;

/** A new empty folder for one piece of work; the caller removes it when done. */
export async function makeScratchDir(prefix: string): Promise<string> {
  const own = path.join(scratchBase(), ownName);
  await fs.mkdir(own, { recursive: true });
  return fs.mkdtemp(path.join(own, prefix));
}

/**
 * Removes the scratch folders of processes that no longer run (and of this process's dead
 * predecessor with the same pid); returns how many. The folders of running processes, whichever
 * program they belong to, are left alone. Never throws: a folder it cannot remove is logged.
 */
export async function removeAbandonedScratch(log: Logger, base = scratchBase()): Promise<number> {
  try {
    const removed = await removeFoldersOfGoneProcesses(base);
    if (removed > 0) log.info('abandoned scratch folders removed', { removed, base });
    return removed;
  } catch (err) {
    log.warn('abandoned scratch folders not removed', { err, base });
    return 0;
  }
}

async function removeFoldersOfGoneProcesses(base: string): Promise<number> {
  const entries = await fs.readdir(base, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [];
    throw err;
  });
  let removed = 0;
  for (const entry of entries) {
    const pid = /^(\d+)-/.exec(entry.name)?.[1];
    if (!entry.isDirectory() || !pid || entry.name === ownName) continue;
    if (Number(pid) !== process.pid && processRunning(Number(pid))) continue;
    await fs.rm(path.join(base, entry.name), { recursive: true, force: true });
    removed++;
  }
  return removed;
}
