import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';

/**
 * Where originals and content versions live. The local directory is the default; an
 * S3-compatible implementation of this interface is the production choice for several hosts.
 */
export interface FileStorage {
  /** Moves a file (e.g. a finished upload) into storage under `key`. */
  moveIn(key: string, sourcePath: string): Promise<void>;
  write(key: string, data: string | Buffer): Promise<void>;
  /** Copies a stored file to another key (replacing what is there). */
  copy(fromKey: string, toKey: string): Promise<void>;
  read(key: string): Promise<Buffer>;
  readText(key: string): Promise<string>;
  exists(key: string): Promise<boolean>;
  stream(key: string): NodeJS.ReadableStream;
  /** Removes everything under a key prefix ("documents/<id>/"). Missing keys are not an error. */
  removePrefix(prefix: string): Promise<void>;
}

export class LocalFileStorage implements FileStorage {
  constructor(private readonly root: string) {}

  private resolve(key: string): string {
    const full = path.resolve(this.root, key);
    if (!full.startsWith(path.resolve(this.root) + path.sep)) throw new Error(`storage key escapes the storage root: ${key}`);
    return full;
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
    await fsp.copyFile(this.resolve(fromKey), tmp, fs.constants.COPYFILE_FICLONE);
    await fsp.rename(tmp, target);
  }

  read(key: string): Promise<Buffer> {
    return fsp.readFile(this.resolve(key));
  }

  async readText(key: string): Promise<string> {
    return (await this.read(key)).toString('utf8');
  }

  async exists(key: string): Promise<boolean> {
    return fsp.access(this.resolve(key)).then(
      () => true,
      () => false,
    );
  }

  stream(key: string): NodeJS.ReadableStream {
    return fs.createReadStream(this.resolve(key));
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
