import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { eventually, startApi } from '../support/system.js';
import { testStack } from '../support/stack.js';

/**
 * Uploaded files wait in STORAGE_DIR/uploads while their request runs; a process killed mid-request
 * leaves them there. An API process removes such files (untouched for an hour) when it starts and
 * every 10 minutes after, and never the file of a request that may still be running.
 */
describe('upload files left behind by a killed API process', function () {
  this.timeout(60_000);

  it('are removed by the next API process; a file written in the last hour is left alone', async () => {
    const storage = fs.mkdtempSync(path.join(testStack().workDir, 'left-uploads-'));
    const uploads = path.join(storage, 'uploads');
    fs.mkdirSync(uploads, { recursive: true });
    const writtenAgo = (name: string, minutes: number) => {
      const file = path.join(uploads, name);
      fs.writeFileSync(file, 'x'.repeat(4096));
      const when = new Date(Date.now() - minutes * 60_000);
      fs.utimesSync(file, when, when);
      return file;
    };
    const abandoned = [writtenAgo('a1b2c3', 61), writtenAgo('d4e5f6', 3 * 24 * 60)];
    const recent = writtenAgo('0f9e8d', 50);
    const api = await startApi({ STORAGE_DIR: storage });
    try {
      await eventually('the abandoned uploads removed', async () => abandoned.every((f) => !fs.existsSync(f)), 10_000);
      assert.ok(fs.existsSync(recent), 'a file written within the hour is left alone');
    } finally {
      await api.close();
      fs.rmSync(storage, { recursive: true, force: true });
    }
  });
});
