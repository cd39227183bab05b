import fsp, { type FileHandle } from 'node:fs/promises';
import { trimOf } from '../platform/text.js';
import { isFtypBox, isId3Header, isMp3FrameHeader, sniffAudioContainer } from '../audio/signatures.js';

/**
 * Content checks for uploads (spec knowledge-base.md §4.3: "by file extension and file
 * signature"). The file's leading bytes, and for container formats a little of their structure,
 * decide what the file really is; that must agree with its extension.
 *
 * What is read:
 * - the first 64 KiB of every file (signatures, the first ZIP entry, the OLE2 header);
 * - PDF: the last 4 KiB, which must hold `%%EOF` (otherwise the file was cut short);
 * - ZIP (DOCX/XLSX/PPTX/EPUB): the end-of-central-directory record and the central directory's
 *   entry names; without a readable end record the file is truncated or damaged;
 * - OLE2 (DOC/XLS/PPT): the directory, to find the main stream (WordDocument, Workbook/Book,
 *   PowerPoint Document) among the root's children;
 * - ISO media (MP4/MOV/M4V/M4A): the top-level box headers, to notice a box running past the end;
 * - text formats: the whole file, in 1 MiB pieces, for NUL bytes and for any non-whitespace.
 *
 * Text formats are not required to be valid UTF-8 here: a Latin-1 file is still text, and the
 * digitizer reports its encoding when it reads it. A light shape check applies to three of them:
 * .json must start with `{` or `[` (so JSON Lines passes and a bare scalar does not), .xml must
 * start with `<`, and .html/.htm must contain a tag somewhere in their first 64 KiB.
 */

/** What a file's content was recognised as. */
export type FileKind =
  | 'pdf'
  | 'doc' | 'xls' | 'ppt' | 'encrypted-office' | 'ole2'
  | 'docx' | 'xlsx' | 'pptx' | 'ooxml' | 'epub' | 'opendocument' | 'zip'
  | 'gzip' | 'bzip2' | 'xz' | '7z' | 'rar' | 'tar' | 'zstd'
  | 'jpeg' | 'png' | 'gif' | 'tiff' | 'webp' | 'heif'
  | 'mp3' | 'wav' | 'avi' | 'riff' | 'iso-media' | 'ogg' | 'flac' | 'webm' | 'matroska'
  | 'text';

export type SignatureResult = { ok: true; kind: FileKind } | { ok: false; reason: string };

const labels: Record<FileKind, string> = {
  pdf: 'a PDF',
  doc: 'a Word 97-2003 document (DOC)',
  xls: 'an Excel 97-2003 workbook (XLS)',
  ppt: 'a PowerPoint 97-2003 presentation (PPT)',
  'encrypted-office': 'a password-protected (encrypted) Office document',
  ole2: 'an OLE2 compound file of another kind (it has no Word, Excel or PowerPoint stream)',
  docx: 'a Word document (DOCX)',
  xlsx: 'an Excel workbook (XLSX)',
  pptx: 'a PowerPoint presentation (PPTX)',
  ooxml: 'an Office Open XML package of another kind (it has no Word, Excel or PowerPoint part)',
  epub: 'an EPUB e-book',
  opendocument: 'an OpenDocument (ODF) file',
  zip: 'a ZIP archive',
  gzip: 'a GZIP archive',
  bzip2: 'a BZIP2 archive',
  xz: 'an XZ archive',
  '7z': 'a 7-Zip archive',
  rar: 'a RAR archive',
  tar: 'a TAR archive',
  zstd: 'a Zstandard archive',
  jpeg: 'a JPEG image',
  png: 'a PNG image',
  gif: 'a GIF image',
  tiff: 'a TIFF image',
  webp: 'a WebP image',
  heif: 'a HEIF/AVIF image',
  mp3: 'an MP3 audio file',
  wav: 'a WAV audio file',
  avi: 'an AVI video',
  riff: 'a RIFF file of another kind (not WAV, AVI or WebP)',
  'iso-media': 'an MP4/QuickTime media file',
  ogg: 'an Ogg audio file',
  flac: 'a FLAC audio file',
  webm: 'a WebM media file',
  matroska: 'a Matroska (MKV) media file',
  text: 'a text file',
};

const archiveKinds = new Set<FileKind>(['zip', 'gzip', 'bzip2', 'xz', '7z', 'rar', 'tar', 'zstd']);

/** Extensions whose content must be text. */
const textExtensions = ['txt', 'md', 'markdown', 'html', 'htm', 'py', 'js', 'css', 'csv', 'json', 'xml', 'yaml', 'yml'];

/** The content each binary extension must have. */
const binaryExpectations: Record<string, FileKind> = {
  pdf: 'pdf',
  doc: 'doc', xls: 'xls', ppt: 'ppt',
  docx: 'docx', xlsx: 'xlsx', pptx: 'pptx', epub: 'epub',
  jpg: 'jpeg', jpeg: 'jpeg', png: 'png', gif: 'gif', tif: 'tiff', tiff: 'tiff', webp: 'webp',
  mp3: 'mp3', wav: 'wav', avi: 'avi',
  mp4: 'iso-media', mov: 'iso-media', m4v: 'iso-media', m4a: 'iso-media',
};

/** Whether checkFileSignature knows what content an extension must have. */
export function knowsExtension(extension: string): boolean {
  const ext = extension.toLowerCase();
  return textExtensions.includes(ext) || ext in binaryExpectations;
}

/** The container a kind lives in, so that damage to a DOCX's ZIP is reported as damage, not as a mismatch. */
function containerOf(kind: FileKind): string {
  if (['docx', 'xlsx', 'pptx', 'ooxml', 'epub', 'opendocument', 'zip'].includes(kind)) return 'zip';
  if (['doc', 'xls', 'ppt', 'encrypted-office', 'ole2'].includes(kind)) return 'ole2';
  return kind;
}

const HEAD_BYTES = 64 * 1024;
const PDF_TAIL_BYTES = 4096;
const TEXT_CHUNK_BYTES = 1024 * 1024;
/** Central directories beyond this are read only in part (names of the first entries suffice). */
const MAX_CENTRAL_DIRECTORY_BYTES = 32 * 1024 * 1024;

/** Random access to the uploaded file: on disk, or held in memory (a small upload). */
interface Probe {
  readonly size: number;
  /** Up to `length` bytes from `offset`; shorter at the end of the file, empty beyond it. */
  read(offset: number, length: number): Promise<Buffer>;
}

class FileProbe implements Probe {
  constructor(
    private readonly handle: FileHandle,
    readonly size: number,
  ) {}

  async read(offset: number, length: number): Promise<Buffer> {
    if (offset < 0 || offset >= this.size || length <= 0) return Buffer.alloc(0);
    const want = Math.min(length, this.size - offset);
    const buf = Buffer.alloc(want);
    let done = 0;
    while (done < want) {
      const { bytesRead } = await this.handle.read(buf, done, want - done, offset + done);
      if (bytesRead === 0) break;
      done += bytesRead;
    }
    return buf.subarray(0, done);
  }
}

class BytesProbe implements Probe {
  constructor(private readonly bytes: Buffer) {}

  get size(): number {
    return this.bytes.length;
  }

  async read(offset: number, length: number): Promise<Buffer> {
    if (offset < 0 || length <= 0) return Buffer.alloc(0);
    return this.bytes.subarray(offset, offset + length);
  }
}

/** What identify() found: the kind and, when the structure is broken, what is wrong with it. */
interface Identified {
  kind: FileKind;
  /** A phrase that completes "<name> is …", e.g. "truncated: it does not end with %%EOF". */
  problem?: string;
}

const startsWith = (buf: Buffer, bytes: number[] | string, at = 0) => {
  const sig = typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : Buffer.from(bytes);
  return buf.length >= at + sig.length && buf.subarray(at, at + sig.length).equals(sig);
};
const ascii = (buf: Buffer, start: number, end: number) => buf.toString('latin1', start, end);
const isPrintableFourCC = (buf: Buffer, at: number) => {
  if (buf.length < at + 4) return false;
  for (let i = at; i < at + 4; i++) if (buf[i]! < 0x20 || buf[i]! > 0x7e) return false;
  return true;
};

/** A POSIX or GNU tar header: "ustar" at 257 and a correct header checksum. */
function isTarHeader(head: Buffer): boolean {
  if (head.length < 512 || ascii(head, 257, 262) !== 'ustar' || (head[262] !== 0x00 && head[262] !== 0x20)) return false;
  const stored = parseInt(trimOf(ascii(head, 148, 156), '\0 '), 8);
  if (!Number.isFinite(stored)) return false;
  let sum = 0;
  for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 0x20 : head[i]!;
  return sum === stored;
}

/** Boxes a QuickTime movie may start with instead of `ftyp`. */
const quickTimeLeadingBoxes = new Set(['moov', 'wide', 'mdat', 'free', 'skip', 'pnot']);
function isQuickTimeStart(head: Buffer): boolean {
  if (head.length < 8 || !quickTimeLeadingBoxes.has(ascii(head, 4, 8))) return false;
  const size = head.readUInt32BE(0);
  return size === 0 || size === 1 || size >= 8;
}

/** Major brands of still-image files that share the ISO media container. */
const imageBrands = new Set(['heic', 'heix', 'heim', 'heis', 'hevc', 'hevx', 'mif1', 'msf1', 'avif', 'avis']);

/**
 * Recognises the content from its first bytes, and for containers from a little of their
 * structure. Null when nothing is recognised (which for a text extension is what is wanted).
 * `expected` breaks ties (an Office package holding parts of two kinds) and allows a MOV to start
 * with a box other than `ftyp`.
 */
async function identify(probe: Probe, head: Buffer, expected?: FileKind, extension?: string): Promise<Identified | null> {
  if (isTarHeader(head)) return { kind: 'tar' };
  if (startsWith(head, '%PDF-')) return analysePdf(probe);
  if (startsWith(head, [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1])) return analyseOle2(probe, head, expected);
  if (startsWith(head, [0x50, 0x4b, 0x03, 0x04])) return analyseZip(probe, head, expected);
  if (startsWith(head, [0x50, 0x4b, 0x05, 0x06]) || startsWith(head, [0x50, 0x4b, 0x07, 0x08])) return { kind: 'zip' };
  if (startsWith(head, [0x1f, 0x8b])) return { kind: 'gzip' };
  if (startsWith(head, 'BZh') && head.length >= 10 && head[3]! >= 0x31 && head[3]! <= 0x39
    && (startsWith(head, [0x31, 0x41, 0x59, 0x26, 0x53, 0x59], 4) || startsWith(head, [0x17, 0x72, 0x45, 0x38, 0x50, 0x90], 4))) {
    return { kind: 'bzip2' };
  }
  if (startsWith(head, [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00])) return { kind: 'xz' };
  if (startsWith(head, [0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c])) return { kind: '7z' };
  if (startsWith(head, 'Rar!\x1a\x07')) return { kind: 'rar' };
  if (startsWith(head, [0x28, 0xb5, 0x2f, 0xfd])) return { kind: 'zstd' };
  if (startsWith(head, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) {
    return ascii(head, 12, 16) === 'IHDR' ? { kind: 'png' } : { kind: 'png', problem: 'truncated or damaged: its PNG header chunk (IHDR) is missing' };
  }
  if (startsWith(head, [0xff, 0xd8, 0xff])) return { kind: 'jpeg' };
  if (startsWith(head, 'GIF87a') || startsWith(head, 'GIF89a')) return { kind: 'gif' };
  if (startsWith(head, 'II*\0') || startsWith(head, 'MM\0*') || startsWith(head, 'II+\0') || startsWith(head, 'MM\0+')) return { kind: 'tiff' };
  if ((startsWith(head, 'RIFF') || startsWith(head, 'RF64')) && head.length >= 12) return analyseRiff(probe, head);
  if (isFtypBox(head)) {
    if (imageBrands.has(ascii(head, 8, 12))) return { kind: 'heif' };
    return analyseIsoMedia(probe);
  }
  if (extension === 'mov' && isQuickTimeStart(head)) return analyseIsoMedia(probe);
  if (isId3Header(head) || isMp3FrameHeader(head)) return { kind: 'mp3' };
  const container = sniffAudioContainer(head);
  if (container === 'ogg' || container === 'flac' || container === 'webm' || container === 'matroska') return { kind: container };
  return null;
}

async function analysePdf(probe: Probe): Promise<Identified> {
  const tail = await probe.read(Math.max(0, probe.size - PDF_TAIL_BYTES), PDF_TAIL_BYTES);
  if (!tail.includes('%%EOF', 0, 'latin1')) return { kind: 'pdf', problem: 'truncated: a PDF ends with %%EOF and this one does not, so it was cut short or damaged' };
  return { kind: 'pdf' };
}

function analyseRiff(probe: Probe, head: Buffer): Identified {
  const form = ascii(head, 8, 12);
  if (form === 'WAVE') return { kind: 'wav' };
  if (form === 'AVI ') return { kind: 'avi' };
  if (form === 'WEBP') {
    // WebP writers always fill in the RIFF size; a file shorter than it says was cut short.
    const declared = head.readUInt32LE(4) + 8;
    if (startsWith(head, 'RIFF') && declared > probe.size) return { kind: 'webp', problem: `truncated: its header announces ${declared} bytes but the file has ${probe.size}` };
    return { kind: 'webp' };
  }
  return { kind: 'riff' };
}

/** Walks the top-level boxes of an ISO media file; a box running past the end means a cut-short file. */
async function analyseIsoMedia(probe: Probe): Promise<Identified> {
  let offset = 0;
  // Capped: a long fragmented movie has many boxes; past the cap it is accepted unchecked.
  for (let i = 0; i < 10_000 && offset + 8 <= probe.size; i++) {
    const h = await probe.read(offset, 16);
    // Trailing bytes that are not a box (padding, junk) end the walk without complaint.
    if (!isPrintableFourCC(h, 4)) break;
    const type = ascii(h, 4, 8);
    let size = h.readUInt32BE(0);
    if (size === 0) break; // the box extends to the end of the file
    if (size === 1) {
      if (h.length < 16) return { kind: 'iso-media', problem: `truncated: its "${type}" box header is cut short` };
      size = Number(h.readBigUInt64BE(8));
      if (size < 16) return { kind: 'iso-media', problem: `damaged: its "${type}" box has an impossible size` };
    } else if (size < 8) {
      return { kind: 'iso-media', problem: `damaged: its "${type}" box has an impossible size` };
    }
    if (offset + size > probe.size) {
      return { kind: 'iso-media', problem: `truncated: its "${type}" box needs ${offset + size - probe.size} more bytes than the file has` };
    }
    offset += size;
  }
  return { kind: 'iso-media' };
}

const damagedZip = (why: string): Identified => ({ kind: 'zip', problem: `truncated or damaged: ${why}` });

/** Reads a ZIP's central directory and tells an Office package or EPUB from a plain archive. */
async function analyseZip(probe: Probe, head: Buffer, expected?: FileKind): Promise<Identified> {
  // The end-of-central-directory record: 22 bytes plus a comment of up to 65535 bytes at the end.
  const tailLength = Math.min(probe.size, 22 + 0xffff);
  const tailStart = probe.size - tailLength;
  const tail = await probe.read(tailStart, tailLength);
  let eocd = -1;
  for (let i = tail.length - 22; i >= 0; i--) {
    if (tail[i] === 0x50 && tail[i + 1] === 0x4b && tail[i + 2] === 0x05 && tail[i + 3] === 0x06 && i + 22 + tail.readUInt16LE(i + 20) <= tail.length) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) return damagedZip('its ZIP structure has no end-of-central-directory record');
  if (tail.readUInt16LE(eocd + 4) !== 0 || tail.readUInt16LE(eocd + 6) !== 0) return damagedZip('it is one part of a split (multi-volume) ZIP');
  let entryCount = tail.readUInt16LE(eocd + 10);
  let cdSize = tail.readUInt32LE(eocd + 12);
  let cdOffset = tail.readUInt32LE(eocd + 16);
  let cdLimit = tailStart + eocd;
  if (entryCount === 0xffff || cdSize === 0xffffffff || cdOffset === 0xffffffff) {
    const locator = await probe.read(cdLimit - 20, 20);
    if (cdLimit < 20 || locator.length < 20 || locator.readUInt32LE(0) !== 0x07064b50) return damagedZip('its ZIP64 end-of-central-directory locator is missing');
    const recordOffset = Number(locator.readBigUInt64LE(8));
    const record = await probe.read(recordOffset, 56);
    if (record.length < 56 || record.readUInt32LE(0) !== 0x06064b50) return damagedZip('its ZIP64 end-of-central-directory record is missing');
    entryCount = Number(record.readBigUInt64LE(32));
    cdSize = Number(record.readBigUInt64LE(40));
    cdOffset = Number(record.readBigUInt64LE(48));
    cdLimit = recordOffset;
  }
  if (cdOffset + cdSize > cdLimit) return damagedZip('its central directory lies beyond the end of the file');

  const cd = await probe.read(cdOffset, Math.min(cdSize, MAX_CENTRAL_DIRECTORY_BYTES));
  const names: string[] = [];
  let p = 0;
  while (names.length < entryCount && p + 46 <= cd.length) {
    if (cd.readUInt32LE(p) !== 0x02014b50) return damagedZip('its central directory is corrupt');
    const nameLength = cd.readUInt16LE(p + 28);
    if (p + 46 + nameLength > cd.length) break;
    names.push(cd.toString('utf8', p + 46, p + 46 + nameLength));
    p += 46 + nameLength + cd.readUInt16LE(p + 30) + cd.readUInt16LE(p + 32);
  }
  if (entryCount > 0 && names.length === 0) return damagedZip('its central directory is corrupt');

  // EPUB and OpenDocument: the first entry is an uncompressed "mimetype" naming the format.
  const firstNameLength = head.length >= 30 ? head.readUInt16LE(26) : 0;
  const firstName = head.length >= 30 + firstNameLength ? ascii(head, 30, 30 + firstNameLength) : '';
  if (firstName === 'mimetype' && head.readUInt16LE(8) === 0) {
    const dataStart = 30 + firstNameLength + head.readUInt16LE(28);
    const mimetype = ascii(head, dataStart, Math.min(head.length, dataStart + 80));
    if (mimetype.startsWith('application/epub+zip')) return { kind: 'epub' };
    if (mimetype.startsWith('application/vnd.oasis.opendocument.')) return { kind: 'opendocument' };
  }
  const lower = new Set(names.map((n) => n.toLowerCase()));
  // Tolerated: an EPUB whose mimetype entry is present but not first.
  if (lower.has('mimetype') && lower.has('meta-inf/container.xml')) return { kind: 'epub' };

  if (lower.has('[content_types].xml')) {
    const parts: Array<[FileKind, string, string]> = [
      ['docx', 'word/document.xml', 'word/'],
      ['xlsx', 'xl/workbook.xml', 'xl/'],
      ['pptx', 'ppt/presentation.xml', 'ppt/'],
    ];
    const found = parts.filter(([, main, prefix]) => lower.has(main) || [...lower].some((n) => n.startsWith(prefix)));
    const withMain = found.filter(([, main]) => lower.has(main));
    const pick = found.find(([kind]) => kind === expected) ?? withMain[0] ?? found[0];
    return { kind: pick ? pick[0] : 'ooxml' };
  }
  return { kind: 'zip' };
}

const ENDOFCHAIN = 0xfffffffe;
const MAXREGSECT = 0xfffffffa;
const NOSTREAM = 0xffffffff;

/** Reads an OLE2 compound file's directory and names the application its main stream belongs to. */
async function analyseOle2(probe: Probe, head: Buffer, expected?: FileKind): Promise<Identified> {
  const damaged = (why: string): Identified => ({ kind: 'ole2', problem: `truncated or damaged: ${why}` });
  if (head.length < 512) return damaged('it is shorter than an OLE2 header');
  const sectorShift = head.readUInt16LE(0x1e);
  if (head.readUInt16LE(0x1c) !== 0xfffe || (sectorShift !== 9 && sectorShift !== 12)) return damaged('its OLE2 header is corrupt');
  const sectorSize = 1 << sectorShift;
  const perSector = sectorSize / 4;

  const readSector = async (sector: number): Promise<Buffer | null> => {
    const data = await probe.read((sector + 1) * sectorSize, sectorSize);
    return data.length > 0 ? data : null;
  };
  // The DIFAT lists the FAT's sectors: 109 in the header, the rest in a chain of DIFAT sectors.
  const difat: number[] = [];
  for (let i = 0; i < 109; i++) difat.push(head.readUInt32LE(0x4c + 4 * i));
  let nextDifat = head.readUInt32LE(0x44);
  let difatSectorsRead = 0;
  const fatCache = new Map<number, Buffer>();
  const nextSector = async (sector: number): Promise<number | string> => {
    const fatIndex = Math.floor(sector / perSector);
    while (difat.length <= fatIndex) {
      if (nextDifat > MAXREGSECT || difatSectorsRead++ > probe.size / sectorSize) return 'its sector allocation table is incomplete';
      const s = await readSector(nextDifat);
      if (!s || s.length < sectorSize) return 'its sector allocation table lies beyond the end of the file';
      for (let j = 0; j < perSector - 1; j++) difat.push(s.readUInt32LE(4 * j));
      nextDifat = s.readUInt32LE(sectorSize - 4);
    }
    const fatSector = difat[fatIndex]!;
    if (fatSector > MAXREGSECT) return 'its sector allocation table is incomplete';
    let fat = fatCache.get(fatSector);
    if (!fat) {
      const s = await readSector(fatSector);
      if (!s || s.length < sectorSize) return 'its sector allocation table lies beyond the end of the file';
      fat = s;
      fatCache.set(fatSector, fat);
    }
    return fat.readUInt32LE((sector % perSector) * 4);
  };

  interface Entry { name: string; type: number; left: number; right: number; child: number }
  const entries: Entry[] = [];
  const visited = new Set<number>();
  let sector = head.readUInt32LE(0x30);
  while (sector !== ENDOFCHAIN) {
    if (sector > MAXREGSECT || visited.has(sector) || visited.size >= 16_384) return damaged('its directory chain is corrupt');
    visited.add(sector);
    const data = await readSector(sector);
    if (!data) return damaged('its directory lies beyond the end of the file');
    for (let at = 0; at + 128 <= data.length; at += 128) {
      const nameLength = Math.min(data.readUInt16LE(at + 0x40), 64);
      entries.push({
        name: data.toString('utf16le', at, at + Math.max(0, nameLength - 2)),
        type: data[at + 0x42]!,
        left: data.readUInt32LE(at + 0x44),
        right: data.readUInt32LE(at + 0x48),
        child: data.readUInt32LE(at + 0x4c),
      });
    }
    const next = await nextSector(sector);
    if (typeof next === 'string') return damaged(next);
    sector = next;
  }
  const root = entries[0];
  if (!root || root.type !== 5) return damaged('its directory has no root entry');

  // The root's children form a tree through their left and right siblings.
  const topLevel = new Set<string>();
  const stack = [root.child];
  const seen = new Set<number>();
  while (stack.length > 0) {
    const id = stack.pop()!;
    if (id === NOSTREAM || id >= entries.length || seen.has(id)) continue;
    seen.add(id);
    const entry = entries[id]!;
    if (entry.type === 1 || entry.type === 2) topLevel.add(entry.name.toLowerCase());
    stack.push(entry.left, entry.right);
  }
  const kinds: FileKind[] = [];
  if (topLevel.has('worddocument')) kinds.push('doc');
  if (topLevel.has('workbook') || topLevel.has('book')) kinds.push('xls');
  if (topLevel.has('powerpoint document')) kinds.push('ppt');
  if (topLevel.has('encryptedpackage')) kinds.push('encrypted-office');
  return { kind: kinds.find((k) => k === expected) ?? kinds[0] ?? 'ole2' };
}

/** No NUL byte and valid UTF-8 (a sequence cut by the end of the sample is fine). */
function looksLikeText(sample: Buffer): boolean {
  if (sample.includes(0)) return false;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(sample, { stream: true });
    return true;
  } catch {
    return false;
  }
}

const isWhitespaceByte = (b: number) => b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d || b === 0x0b || b === 0x0c;

function mismatch(name: string, extension: string, found: FileKind): string {
  if (found === 'encrypted-office') return `${name} is ${labels[found]}, not a readable .${extension} file; remove the password and upload it again`;
  const sentence = `${name} is ${labels[found]}, not a .${extension} file`;
  return archiveKinds.has(found) ? `${sentence}; archives are not accepted` : sentence;
}

/** Text formats: not a known binary, no NUL byte, something other than whitespace, and the light shape checks. */
async function checkText(probe: Probe, head: Buffer, name: string, extension: string): Promise<SignatureResult> {
  if (startsWith(head, [0xff, 0xfe, 0, 0]) || startsWith(head, [0, 0, 0xfe, 0xff])) {
    return { ok: false, reason: `${name} is UTF-32 text; save it as UTF-8 and upload it again` };
  }
  if (startsWith(head, [0xff, 0xfe]) || startsWith(head, [0xfe, 0xff])) {
    return { ok: false, reason: `${name} is UTF-16 text; save it as UTF-8 and upload it again` };
  }
  const found = await identify(probe, head);
  if (found) return { ok: false, reason: mismatch(name, extension, found.kind) };

  let first: number | undefined;
  for (let offset = 0; offset < probe.size; offset += TEXT_CHUNK_BYTES) {
    const chunk = offset === 0 && head.length === Math.min(probe.size, TEXT_CHUNK_BYTES) ? head : await probe.read(offset, TEXT_CHUNK_BYTES);
    if (chunk.length === 0) break;
    if (chunk.includes(0)) return { ok: false, reason: `${name} is binary data (it contains NUL bytes), not a .${extension} text file` };
    if (first === undefined) {
      const skip = offset === 0 && startsWith(chunk, [0xef, 0xbb, 0xbf]) ? 3 : 0;
      for (let i = skip; i < chunk.length; i++) {
        if (!isWhitespaceByte(chunk[i]!)) {
          first = chunk[i]!;
          break;
        }
      }
    }
  }
  if (first === undefined) return { ok: false, reason: `${name} is empty: it contains only whitespace` };
  if (extension === 'json' && first !== 0x7b && first !== 0x5b) return { ok: false, reason: `${name} does not look like JSON: it must start with { or [` };
  if (extension === 'xml' && first !== 0x3c) return { ok: false, reason: `${name} does not look like XML: it must start with <` };
  if ((extension === 'html' || extension === 'htm') && !/<[a-z!?/]/i.test(ascii(head, 0, head.length))) {
    return { ok: false, reason: `${name} does not look like HTML: it contains no tags` };
  }
  return { ok: true, kind: 'text' };
}

/**
 * Decides whether the file's content matches its extension. The reason of a refusal is a sentence
 * that names the file and the problem, meant to be shown to the uploader as is. `bytes`: the whole
 * content when the upload is held in memory (read from there instead of opening the file).
 */
export async function checkFileSignature(file: { path: string; name: string; extension: string; bytes?: Buffer }): Promise<SignatureResult> {
  const extension = file.extension.toLowerCase();
  if (file.bytes) return verdict(new BytesProbe(file.bytes), file.name, extension);
  const handle = await fsp.open(file.path, 'r');
  try {
    const { size } = await handle.stat();
    return await verdict(new FileProbe(handle, size), file.name, extension);
  } finally {
    await handle.close();
  }
}

async function verdict(probe: Probe, name: string, extension: string): Promise<SignatureResult> {
  if (probe.size === 0) return { ok: false, reason: `${name} is empty` };
  const head = await probe.read(0, HEAD_BYTES);
  if (textExtensions.includes(extension)) return checkText(probe, head, name, extension);

  const expected = binaryExpectations[extension];
  if (!expected) return { ok: false, reason: `${name}: .${extension} files are not supported` };
  let found = await identify(probe, head, expected, extension);
  // A PDF may carry a few bytes of junk before its header; readers look in the first 1 KiB.
  if (!found && expected === 'pdf' && head.subarray(0, 1024).includes('%PDF-', 0, 'latin1')) found = await analysePdf(probe);
  if (!found) {
    if (looksLikeText(head)) return { ok: false, reason: `${name} is a text file, not a .${extension} file` };
    return { ok: false, reason: `${name} is not ${labels[expected]}: its content does not start with the signature of that format` };
  }
  if (found.kind === expected) return found.problem ? { ok: false, reason: `${name} is ${found.problem}` } : { ok: true, kind: expected };
  if (found.problem && containerOf(found.kind) === containerOf(expected)) return { ok: false, reason: `${name} is ${found.problem}` };
  return { ok: false, reason: mismatch(name, extension, found.kind) };
}
