import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../lib/platform/logger.js';

/** Where multer writes uploaded files while their request runs. */
export const uploadFolder = (storageDir: string) => path.join(storageDir, 'uploads');

/**
 * Uploaded files wait in STORAGE_DIR/uploads while their request runs and are moved into storage or
 * removed when it ends; a process killed mid-request (a crash, a deploy's SIGKILL) leaves them
 * behind. Every API process removes the files there untouched for this long: no request lives that
 * long (Node ends one whose body is not in after 5 minutes), so nothing in use is ever removed.
 */
export const ABANDONED_UPLOAD_MS = 60 * 60_000;
const SWEEP_EVERY_MS = 10 * 60_000;

/** Removes the upload files last written more than `olderThanMs` ago; returns how many. */
export async function removeAbandonedUploads(dir: string, olderThanMs = ABANDONED_UPLOAD_MS): Promise<number> {
  const before = Date.now() - olderThanMs;
  let removed = 0;
  for (const entry of await fs.promises.readdir(dir, { withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(dir, entry.name);
    // Gone meanwhile (its request ended, or another process swept it): nothing to do.
    const stat = await fs.promises.stat(file).catch(() => null);
    if (!stat || stat.mtimeMs >= before) continue;
    await fs.promises.rm(file, { force: true });
    removed++;
  }
  return removed;
}

/**
 * Creates the upload folder, removes what killed processes left there, and keeps doing so every
 * 10 minutes for as long as the process runs. Returns the function that stops it.
 */
export function keepUploadFolder(dir: string, log: Logger): () => void {
  fs.mkdirSync(dir, { recursive: true });
  const sweep = () =>
    removeAbandonedUploads(dir)
      .then((removed) => removed > 0 && log.info('abandoned uploads removed', { removed, dir }))
      .catch((err) => log.warn('abandoned uploads not removed', { err, dir }));
  void sweep();
  const timer = setInterval(sweep, SWEEP_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}
