import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { ConfigError } from './config.js';

/**
 * Where originals, content versions, samples and audio live, by key ("documents/<id>/original.pdf").
 * The local directory (STORAGE_DIR) is the default; an S3-compatible object store (STORAGE_URL,
 * lib/providers/object-storage.ts) is the choice for several hosts. Every path that reads or writes
 * a stored file goes through here. Files of any size are streamed (moveIn, download, stream);
 * only small ones (Markdown, JSON, a sample) are written or read whole.
 */
export interface FileStorage {
  /**
   * The start-up check of both entry points: files can be stored. Throws a ConfigError naming the
   * setting at fault (a missing bucket, refused credentials, an endpoint that stays unreachable).
   */
  verify(): Promise<void>;
  /** Moves a local file (a finished upload, a cut segment) into storage under `key`, streamed; the local file is gone afterwards. */
  moveIn(key: string, sourcePath: string): Promise<void>;
  /** Stores small content whole (replacing what is there). */
  write(key: string, data: string | Buffer): Promise<void>;
  /** Copies a stored file to another key (replacing what is there). */
  copy(fromKey: string, toKey: string): Promise<void>;
  /** A small stored file whole (Markdown, JSON): anything that may be large is streamed with download() or stream(). */
  read(key: string): Promise<Buffer>;
  readText(key: string): Promise<string>;
  /** Copies a stored file to a local path (replacing it), streamed. */
  download(key: string, localPath: string): Promise<void>;
  /** Whether a stored file (not a prefix) exists. */
  exists(key: string): Promise<boolean>;
  /** Opens a stored file for reading; its content arrives as it is read. */
  stream(key: string): Promise<Readable>;
  /**
   * Removes the file named exactly `prefix` and everything under `prefix/` ("documents/<id>"), never
   * `prefixX...`; a trailing slash means the same. Missing keys are not an error.
   */
  removePrefix(prefix: string): Promise<void>;
}

/** A stored file that is not there (read, download, stream or copy of a missing key), whichever storage. */
export class MissingStoredFile extends Error {
  override name = 'MissingStoredFile';
  readonly code = 'ENOENT';
  constructor(readonly key: string) {
    super(`no stored file ${JSON.stringify(key)}`);
  }
}

const isMissing = (err: unknown) => (err as NodeJS.ErrnoException).code === 'ENOENT';

export class LocalFileStorage implements FileStorage {
  constructor(private readonly root: string) {}

  private resolve(key: string): string {
    const full = path.resolve(this.root, key);
    if (!full.startsWith(path.resolve(this.root) + path.sep)) throw new Error(`storage key escapes the storage root: ${key}`);
    return full;
  }

  /** `op` on a stored file, a missing one reported as MissingStoredFile. */
  private async existing<T>(key: string, op: (file: string) => Promise<T>): Promise<T> {
    try {
      return await op(this.resolve(key));
    } catch (err) {
      throw isMissing(err) ? new MissingStoredFile(key) : err;
    }
  }

  async verify(): Promise<void> {
    try {
      await fsp.mkdir(this.root, { recursive: true });
      await fsp.access(this.root, fs.constants.W_OK);
    } catch (err) {
      throw new ConfigError(`STORAGE_DIR ${this.root} cannot hold the stored files: ${(err as Error).message}`);
    }
  }

  async moveIn(key: string, sourcePath: string): Promise<void> {
    const target = this.resolve(key);
    await fsp.mkdir(path.dirname(target), { recursive: true });
    try {
      await fsp.rename(sourcePath, target);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
      await fsp.copyFile(sourcePath, target);
      await fsp.rm(sourcePath, { force: true });
    }
  }

  async write(key: string, data: string | Buffer): Promise<void> {
    const target = this.resolve(key);
    await fsp.mkdir(path.dirname(target), { recursive: true });
    // Write then rename, so that a reader never sees half a file after a crash.
    const tmp = `${target}.${process.pid}.${Date.now()}.tmp`;
    await fsp.writeFile(tmp, data);
    await fsp.rename(tmp, target);
  }

  async copy(fromKey: string, toKey: string): Promise<void> {
    const target = this.resolve(toKey);
    await fsp.mkdir(path.dirname(target), { recursive: true });
    // Through a temporary name like write(): a reader never sees half a copy.
    const tmp = `${target}.${process.pid}.${Date.now()}.tmp`;
    await this.existing(fromKey, (from) => fsp.copyFile(from, tmp, fs.constants.COPYFILE_FICLONE));
    await fsp.rename(tmp, target);
  }

  read(key: string): Promise<Buffer> {
    return this.existing(key, (file) => fsp.readFile(file));
  }

  async readText(key: string): Promise<string> {
    return (await this.read(key)).toString('utf8');
  }

  download(key: string, localPath: string): Promise<void> {
    return this.existing(key, (file) => fsp.copyFile(file, localPath, fs.constants.COPYFILE_FICLONE));
  }

  async exists(key: string): Promise<boolean> {
    return fsp.stat(this.resolve(key)).then(
      (s) => s.isFile(),
      () => false,
    );
  }

  async stream(key: string): Promise<Readable> {
    // Opened here, so that a missing file rejects now rather than fail the stream later.
    const handle = await this.existing(key, (file) => fsp.open(file));
    return handle.createReadStream();
  }

  async removePrefix(prefix: string): Promise<void> {
    await fsp.rm(this.resolve(prefix), { recursive: true, force: true });
  }
}

/** Storage keys of a document's files. */
export const documentFiles = {
  prefix: (documentId: string) => `documents/${documentId}`,
  original: (documentId: string, extension: string) => `documents/${documentId}/original.${extension}`,
  /** Extraction cache: kept so that resumed work never calls the extraction provider again. */
  extracted: (documentId: string) => `documents/${documentId}/extracted.md`,
  digitized: (documentId: string) => `documents/${documentId}/digitized.md`,
  rewrittenDraft: (documentId: string) => `documents/${documentId}/rewritten_draft.md`,
  rewritten: (documentId: string) => `documents/${documentId}/rewritten.md`,
  /** Transcripts of a recording's pieces, kept while its extraction is unfinished (an outage midway loses none). */
  mediaPieces: (documentId: string) => `documents/${documentId}/media-pieces`,
  /** Work files of one rewrite attempt: its plan, each call's answer, each accepted part. */
  rewriteAttempt: (documentId: string, attemptId: string) => `documents/${documentId}/rewrite/${attemptId}`,
};
