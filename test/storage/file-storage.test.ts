import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { HeadObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { LocalFileStorage, MissingStoredFile, type FileStorage } from '../../lib/platform/storage.js';
import { ServiceUnavailable } from '../../lib/providers/service-unavailable.js';
import { freePort } from '../../scripts/stack.js';
import { S3FileStorage } from '../../lib/providers/object-storage.js';
import { testStack } from '../support/stack.js';

/**
 * One contract, two storages: the local directory and the S3 object store (the test stack's
 * versitygw, under a prefix of this run's own) answer the same cases the same way. The S3 storage
 * runs with small parts, so that a 20 MiB file goes up as a multipart upload and is copied part by
 * part, as files over 8 MiB and 1 GiB are in production.
 */
const MiB = 1024 * 1024;
const BIG_BYTES = 20 * MiB;

async function sha256(stream: Readable | fs.ReadStream): Promise<string> {
  const hash = crypto.createHash('sha256');
  await pipeline(stream, hash);
  return hash.digest('hex');
}

const storages: Array<{ name: string; make(dir: string): FileStorage }> = [
  { name: 'the local directory', make: (dir) => new LocalFileStorage(path.join(dir, 'stored')) },
  {
    name: 'the S3 object store',
    make: (dir) => {
      const { objectStore } = testStack();
      const prefix = `contract-${path.basename(dir)}`;
      return new S3FileStorage(
        {
          url: `s3://${objectStore.bucket}/${prefix}`,
          bucket: objectStore.bucket,
          prefix,
          endpoint: objectStore.endpoint,
          region: 'us-east-1',
          forcePathStyle: true,
          credentials: { accessKeyId: objectStore.accessKey, secretAccessKey: objectStore.secretKey },
        },
        { partBytes: 5 * MiB, copyPartBytes: 6 * MiB },
      );
    },
  },
];

for (const { name, make } of storages) {
  describe(`file storage contract: ${name}`, function () {
    this.timeout(120_000);
    let dir: string;
    let storage: FileStorage;
    /** A 20 MiB file of random bytes, and its hash. */
    let big: { file: string; hash: string };

    before(async () => {
      dir = fs.mkdtempSync(path.join(testStack().workDir, 'storage-contract-'));
      storage = make(dir);
      await storage.verify();
      const file = path.join(dir, 'big.bin');
      fs.writeFileSync(file, crypto.randomBytes(BIG_BYTES));
      big = { file, hash: await sha256(fs.createReadStream(file)) };
    });
    after(() => fs.rmSync(dir, { recursive: true, force: true }));

    it('writes small content and reads it back whole; a write replaces what is there', async () => {
      await storage.write('docs/a/notes.md', '# Tides\n');
      assert.equal(await storage.readText('docs/a/notes.md'), '# Tides\n');
      await storage.write('docs/a/notes.md', Buffer.from([0, 1, 2, 255]));
      assert.deepEqual([...(await storage.read('docs/a/notes.md'))], [0, 1, 2, 255]);
      assert.equal(await storage.exists('docs/a/notes.md'), true);
      assert.equal(await storage.exists('docs/a'), false, 'a prefix is not a stored file');
      assert.equal(await storage.exists('docs/a/none.md'), false);
    });

    it('empty files are stored as such, written or moved in', async () => {
      await storage.write('docs/empty/written.md', '');
      const source = path.join(dir, 'empty.txt');
      fs.writeFileSync(source, '');
      await storage.moveIn('docs/empty/moved.txt', source);
      assert.equal(fs.existsSync(source), false);
      assert.equal(await storage.readText('docs/empty/written.md'), '');
      assert.equal((await storage.read('docs/empty/moved.txt')).length, 0);
    });

    it('keys with spaces and characters beyond ASCII are stored, copied and removed like any other', async () => {
      const key = 'voices/p/Zoë Ångström/日本語 sample (1).opus';
      await storage.write(key, 'unicode');
      assert.equal(await storage.exists(key), true);
      assert.equal(await storage.readText(key), 'unicode');
      const copied = 'voices/p/Zoë Ångström/копия ✓.opus';
      await storage.copy(key, copied);
      assert.equal(await sha256(await storage.stream(copied)), crypto.createHash('sha256').update('unicode').digest('hex'));
      await storage.removePrefix('voices/p/Zoë Ångström');
      assert.equal(await storage.exists(key), false);
      assert.equal(await storage.exists(copied), false);
    });

    it('moveIn streams a 20 MiB file in (in parts) and removes the local file; download and stream give back the same bytes', async () => {
      const source = path.join(dir, 'upload.bin');
      fs.copyFileSync(big.file, source);
      await storage.moveIn('documents/big/original.bin', source);
      assert.equal(fs.existsSync(source), false, 'the local file is gone');
      const local = path.join(dir, 'downloaded.bin');
      await storage.download('documents/big/original.bin', local);
      assert.equal(fs.statSync(local).size, BIG_BYTES);
      assert.equal(await sha256(fs.createReadStream(local)), big.hash);
      assert.equal(await sha256(await storage.stream('documents/big/original.bin')), big.hash);
      if (storage instanceof S3FileStorage) assert.match(await s3ETag('documents/big/original.bin'), /-4"$/, 'four 5 MiB parts');
    });

    it('copies a large file (part by part on S3) and replaces an existing target', async () => {
      await storage.write('documents/big/copy.bin', 'old');
      await storage.copy('documents/big/original.bin', 'documents/big/copy.bin');
      assert.equal(await sha256(await storage.stream('documents/big/copy.bin')), big.hash);
      if (storage instanceof S3FileStorage) assert.match(await s3ETag('documents/big/copy.bin'), /-4"$/, 'copied in four parts of at most 6 MiB');
    });

    it('a missing file: read, readText, download, stream and copy reject with MissingStoredFile; exists is false', async () => {
      const missing = 'documents/none/original.pdf';
      const isMissing = (err: unknown) => err instanceof MissingStoredFile && err.key === missing;
      await assert.rejects(storage.read(missing), isMissing);
      await assert.rejects(storage.readText(missing), isMissing);
      await assert.rejects(storage.download(missing, path.join(dir, 'never')), isMissing);
      await assert.rejects(storage.stream(missing), isMissing);
      await assert.rejects(storage.copy(missing, 'documents/none/copy.pdf'), isMissing);
      assert.equal(await storage.exists(missing), false);
      assert.equal(await storage.exists('documents/none/copy.pdf'), false, 'a failed copy leaves nothing');
      await storage.removePrefix('documents/none');
    });

    it('removePrefix removes the file named exactly the prefix and everything under prefix/, never prefixX', async () => {
      for (const key of ['rp/a', 'rp/ab', 'rp/a.md', 'rp/d/x', 'rp/d/y/z', 'rp/de', 'rp/d-1/x']) await storage.write(key, key);
      await storage.removePrefix('rp/a');
      assert.deepEqual(await existing(['rp/a', 'rp/ab', 'rp/a.md']), ['rp/ab', 'rp/a.md']);
      await storage.removePrefix('rp/d/');
      assert.deepEqual(await existing(['rp/d/x', 'rp/d/y/z', 'rp/de', 'rp/d-1/x']), ['rp/de', 'rp/d-1/x']);
      await storage.removePrefix('rp/never-there');
      await storage.removePrefix('rp');
      assert.deepEqual(await existing(['rp/ab', 'rp/a.md', 'rp/de', 'rp/d-1/x']), []);
    });

    it('removePrefix removes more files than one listing page and one delete batch hold (1,000)', async () => {
      const keys = Array.from({ length: 1010 }, (_, i) => `many/${String(i).padStart(4, '0')}.txt`);
      for (let i = 0; i < keys.length; i += 50) await Promise.all(keys.slice(i, i + 50).map((k) => storage.write(k, k)));
      await storage.write('many-kept.txt', 'kept');
      await storage.removePrefix('many');
      assert.deepEqual(await existing([keys[0]!, keys[999]!, keys[1000]!, keys[1009]!]), []);
      assert.equal(await storage.readText('many-kept.txt'), 'kept');
    });

    it('refuses a key that is not a plain relative path', async () => {
      await assert.rejects(storage.write('../outside.txt', 'x'));
      await assert.rejects(storage.removePrefix(''));
    });

    /** The keys of `keys` that exist, in order. */
    async function existing(keys: string[]): Promise<string[]> {
      const found = await Promise.all(keys.map(async (k) => ((await storage.exists(k)) ? k : null)));
      return found.filter((k): k is string => k !== null);
    }

    /** The object's ETag, as S3 gives it: a multipart object's ends in "-<parts>". */
    async function s3ETag(key: string): Promise<string> {
      const { objectStore } = testStack();
      const client = new S3Client({ endpoint: objectStore.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: objectStore.accessKey, secretAccessKey: objectStore.secretKey } });
      try {
        const head = await client.send(new HeadObjectCommand({ Bucket: objectStore.bucket, Key: `contract-${path.basename(dir)}/${key}` }));
        return head.ETag ?? '';
      } finally {
        client.destroy();
      }
    }
  });
}

describe('the S3 storage while its object store is down', function () {
  this.timeout(60_000);

  it('every operation rejects with ServiceUnavailable (what the workflows wait out and the API answers with 503), and moveIn keeps the local file', async () => {
    const { objectStore } = testStack();
    const down = new S3FileStorage({
      url: `s3://${objectStore.bucket}/down`,
      bucket: objectStore.bucket,
      prefix: 'down',
      endpoint: `http://127.0.0.1:${await freePort()}`,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: objectStore.accessKey, secretAccessKey: objectStore.secretKey },
    });
    const dir = fs.mkdtempSync(path.join(testStack().workDir, 'storage-down-'));
    try {
      const upload = path.join(dir, 'upload.txt');
      fs.writeFileSync(upload, 'kept for the retry');
      const unavailable = (err: unknown) => err instanceof ServiceUnavailable && /file storage \(the object store\) is unavailable: ECONNREFUSED/.test(err.message);
      await assert.rejects(down.moveIn('documents/x/original.txt', upload), unavailable);
      assert.equal(fs.readFileSync(upload, 'utf8'), 'kept for the retry', 'the upload is still there for the retry');
      await assert.rejects(down.write('documents/x/extracted.md', 'x'), unavailable);
      await assert.rejects(down.read('documents/x/extracted.md'), unavailable);
      await assert.rejects(down.download('documents/x/original.txt', path.join(dir, 'copy')), unavailable);
      await assert.rejects(down.stream('documents/x/original.txt'), unavailable);
      await assert.rejects(down.exists('documents/x/original.txt'), unavailable);
      await assert.rejects(down.copy('documents/x/original.txt', 'documents/y/original.txt'), unavailable);
      await assert.rejects(down.removePrefix('documents/x'), unavailable);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
