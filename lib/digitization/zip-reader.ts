import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { Writable } from 'node:stream';
import zlib from 'node:zlib';

/**
 * A ZIP reader for the archives in disguise among the uploads (DOCX, XLSX, PPTX, EPUB) that never
 * trusts what the archive says about itself:
 * - only the central directory is read first (from the end of the file, with file-handle reads:
 *   never the whole file into memory), and an archive with more than `maxEntries` entries, an
 *   encrypted entry, two entries of the same name or an unknown compression method is refused
 *   before anything is inflated;
 * - entries are inflated as streams from their byte range of the file, and every byte that comes
 *   out counts against one budget for the whole archive (`maxInflatedBytes`): a part that inflates
 *   past it, whatever its header claims, is stopped there. A part that declares more than what is
 *   left is refused before it is inflated.
 * So a 100 MiB upload declaring 100 GB of content costs at most `maxInflatedBytes` of work.
 */
export interface ZipLimits {
  maxEntries: number;
  maxInflatedBytes: number;
}

/** The archive is over a limit or not a readable ZIP; the message is a reason meant for the user. */
export class ZipRefused extends Error {
  override name = 'ZipRefused';
}

export interface ZipEntry {
  name: string;
  method: number;
  compressedSize: number;
  /** As the archive declares it (not trusted: inflation counts what really comes out). */
  declaredSize: number;
  localHeaderOffset: number;
}

const EOCD_SIGNATURE = 0x06054b50;
const ZIP64_LOCATOR_SIGNATURE = 0x07064b50;
const ZIP64_EOCD_SIGNATURE = 0x06064b50;
const CENTRAL_SIGNATURE = 0x02014b50;
const LOCAL_SIGNATURE = 0x04034b50;
/** Largest central directory read (a directory of `maxEntries` ordinary names is far smaller). */
const MAX_CENTRAL_DIRECTORY_BYTES = 64 * 1024 * 1024;

const mib = (bytes: number) => `${Math.round(bytes / 1024 / 1024)} MiB`;

async function readAt(fh: fsp.FileHandle, position: number, length: number): Promise<Buffer> {
  const buf = Buffer.alloc(length);
  const { bytesRead } = await fh.read(buf, 0, length, position);
  return buf.subarray(0, bytesRead);
}

export class BoundedZip {
  private inflated = 0;

  private constructor(
    private readonly filePath: string,
    private readonly entries: Map<string, ZipEntry>,
    private readonly limits: ZipLimits,
    private readonly what: string,
  ) {}

  /** Reads and checks the central directory of `filePath` (`what` names the file in messages, e.g. "the Excel (.xlsx) file"). */
  static async open(filePath: string, limits: ZipLimits, what: string): Promise<BoundedZip> {
    const fh = await fsp.open(filePath, 'r');
    try {
      const { size } = await fh.stat();
      const tailLength = Math.min(size, 22 + 65535);
      const tail = await readAt(fh, size - tailLength, tailLength);
      let eocd = -1;
      for (let i = tail.length - 22; i >= 0; i--) {
        if (tail.readUInt32LE(i) === EOCD_SIGNATURE) {
          eocd = i;
          break;
        }
      }
      if (eocd < 0) throw new ZipRefused(`${what} is not a readable ZIP package (no end of central directory); it is damaged or not that format`);
      let count = tail.readUInt16LE(eocd + 10);
      let cdSize = tail.readUInt32LE(eocd + 12);
      let cdOffset = tail.readUInt32LE(eocd + 16);
      if (count === 0xffff || cdSize === 0xffffffff || cdOffset === 0xffffffff) {
        // ZIP64: the locator stands just before the end record and names the ZIP64 end record.
        const locator = eocd - 20;
        if (locator < 0 || tail.readUInt32LE(locator) !== ZIP64_LOCATOR_SIGNATURE) throw new ZipRefused(`${what} is a damaged ZIP64 package`);
        const zip64 = await readAt(fh, Number(tail.readBigUInt64LE(locator + 8)), 56);
        if (zip64.length < 56 || zip64.readUInt32LE(0) !== ZIP64_EOCD_SIGNATURE) throw new ZipRefused(`${what} is a damaged ZIP64 package`);
        count = Number(zip64.readBigUInt64LE(32));
        cdSize = Number(zip64.readBigUInt64LE(40));
        cdOffset = Number(zip64.readBigUInt64LE(48));
      }
      if (count > limits.maxEntries) {
        throw new ZipRefused(`${what} has ${count} entries; at most ${limits.maxEntries} are read (EXTRACT_ZIP_MAX_ENTRIES)`);
      }
      if (cdSize > MAX_CENTRAL_DIRECTORY_BYTES || cdOffset + cdSize > size) throw new ZipRefused(`${what} has a damaged central directory`);
      const cd = await readAt(fh, cdOffset, cdSize);
      return new BoundedZip(filePath, parseCentralDirectory(cd, count, limits, what), limits, what);
    } finally {
      await fh.close();
    }
  }

  names(): string[] {
    return [...this.entries.keys()];
  }

  has(name: string): boolean {
    return this.entries.has(name);
  }

  /** Bytes inflated so far, all entries together. */
  get inflatedBytes(): number {
    return this.inflated;
  }

  /** The content of one entry, inflated within what is left of the archive's budget; null when there is no such entry. */
  async read(name: string): Promise<Buffer | null> {
    const entry = this.entries.get(name);
    if (!entry) return null;
    const left = this.limits.maxInflatedBytes - this.inflated;
    const bomb = () =>
      new ZipRefused(`${this.what} expands to more than ${mib(this.limits.maxInflatedBytes)} of content (EXTRACT_ZIP_MAX_INFLATED_MB, part ${name}); it may be a decompression bomb`);
    if (entry.declaredSize > left) throw bomb();
    const fh = await fsp.open(this.filePath, 'r');
    let dataStart: number;
    try {
      const header = await readAt(fh, entry.localHeaderOffset, 30);
      if (header.length < 30 || header.readUInt32LE(0) !== LOCAL_SIGNATURE) throw new ZipRefused(`${this.what} has a damaged part ${name}`);
      dataStart = entry.localHeaderOffset + 30 + header.readUInt16LE(26) + header.readUInt16LE(28);
    } finally {
      await fh.close();
    }
    if (entry.compressedSize === 0) return Buffer.alloc(0);
    const source = fs.createReadStream(this.filePath, { start: dataStart, end: dataStart + entry.compressedSize - 1 });
    const chunks: Buffer[] = [];
    let size = 0;
    const sink = new Writable({
      write: (chunk: Buffer, _enc, done) => {
        size += chunk.length;
        if (size > left) return done(bomb());
        chunks.push(chunk);
        done();
      },
    });
    try {
      if (entry.method === 8) await pipeline(source, zlib.createInflateRaw(), sink);
      else await pipeline(source, sink);
    } catch (err) {
      if (err instanceof ZipRefused) throw err;
      throw new ZipRefused(`${this.what} has a damaged part ${name}: ${(err as Error).message.split('\n')[0]}`);
    }
    this.inflated += size;
    return Buffer.concat(chunks, size);
  }
}

function parseCentralDirectory(cd: Buffer, declaredCount: number, limits: ZipLimits, what: string): Map<string, ZipEntry> {
  const entries = new Map<string, ZipEntry>();
  let at = 0;
  while (at + 46 <= cd.length && cd.readUInt32LE(at) === CENTRAL_SIGNATURE) {
    if (entries.size >= limits.maxEntries) throw new ZipRefused(`${what} has more than ${limits.maxEntries} entries (EXTRACT_ZIP_MAX_ENTRIES)`);
    const flags = cd.readUInt16LE(at + 8);
    const method = cd.readUInt16LE(at + 10);
    let compressedSize = cd.readUInt32LE(at + 20);
    let declaredSize = cd.readUInt32LE(at + 24);
    const nameLength = cd.readUInt16LE(at + 28);
    const extraLength = cd.readUInt16LE(at + 30);
    const commentLength = cd.readUInt16LE(at + 32);
    let localHeaderOffset = cd.readUInt32LE(at + 42);
    const end = at + 46 + nameLength + extraLength + commentLength;
    if (end > cd.length) throw new ZipRefused(`${what} has a damaged central directory`);
    const name = cd.toString('utf8', at + 46, at + 46 + nameLength);
    // ZIP64 extended information: the 0xffffffff fields, in order, as 64-bit values.
    for (let x = at + 46 + nameLength; x + 4 <= at + 46 + nameLength + extraLength; ) {
      const id = cd.readUInt16LE(x);
      const length = cd.readUInt16LE(x + 2);
      if (id === 0x0001) {
        let p = x + 4;
        const next = () => {
          const v = p + 8 <= x + 4 + length ? Number(cd.readBigUInt64LE(p)) : 0;
          p += 8;
          return v;
        };
        if (declaredSize === 0xffffffff) declaredSize = next();
        if (compressedSize === 0xffffffff) compressedSize = next();
        if (localHeaderOffset === 0xffffffff) localHeaderOffset = next();
      }
      x += 4 + length;
    }
    if (flags & 0x1) throw new ZipRefused(`${what} is encrypted (part ${name}); it cannot be read`);
    if (method !== 0 && method !== 8) throw new ZipRefused(`${what} uses a compression method this service does not read (${method}, part ${name})`);
    if (entries.has(name)) throw new ZipRefused(`${what} holds two parts named ${name}; it is damaged or crafted`);
    entries.set(name, { name, method, compressedSize, declaredSize, localHeaderOffset });
    at = end;
  }
  if (entries.size !== declaredCount && declaredCount !== 0xffff) {
    throw new ZipRefused(`${what} has a damaged central directory (${entries.size} entries found, ${declaredCount} declared)`);
  }
  return entries;
}
