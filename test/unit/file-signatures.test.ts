import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { AppError } from '../../lib/platform/errors.js';
import { checkFileSignature, knowsExtension, type FileKind } from '../../lib/digitization/file-signatures.js';
import { checkUpload, extensionOf } from '../../lib/digitization/uploads.js';
import { supportedExtensions } from '../../lib/digitization/formats.js';

/**
 * Upload validation by content (spec knowledge-base.md §4.3, issue 4). Every sample is generated
 * here, byte by byte, as a small but structurally real file of its format: ZIPs with local headers,
 * a central directory and an end record; an OLE2 compound file with a FAT and a directory; a PNG
 * with CRC'd chunks; ISO media with real boxes; RIFF files with consistent sizes. The compressed
 * archives that Node cannot write (BZIP2, XZ, 7z, RAR) are represented by their real headers.
 */

// ---- sample writers -------------------------------------------------------------------------

const u16 = (n: number) => { const b = Buffer.alloc(2); b.writeUInt16LE(n); return b; };
const u32 = (n: number) => { const b = Buffer.alloc(4); b.writeUInt32LE(n >>> 0); return b; };
const u64 = (n: number) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(n)); return b; };
const u32be = (n: number) => { const b = Buffer.alloc(4); b.writeUInt32BE(n >>> 0); return b; };
const bytes = (...parts: Array<string | number[] | Buffer>) =>
  Buffer.concat(parts.map((p) => (Buffer.isBuffer(p) ? p : typeof p === 'string' ? Buffer.from(p, 'latin1') : Buffer.from(p))));

interface ZipEntry { name: string; data: string | Buffer; store?: boolean }

/** A ZIP file: local headers and data, central directory, end record (optionally ZIP64 end records). */
function zipFile(entries: ZipEntry[], options: { zip64?: boolean; comment?: string } = {}): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const entry of entries) {
    const data = Buffer.isBuffer(entry.data) ? entry.data : Buffer.from(entry.data);
    const body = entry.store ? data : zlib.deflateRawSync(data);
    const name = Buffer.from(entry.name);
    const method = entry.store ? 0 : 8;
    const crc = zlib.crc32(data);
    const local = bytes(u32(0x04034b50), u16(20), u16(0x0800), u16(method), u16(0), u16(0x5a21), u32(crc), u32(body.length), u32(data.length), u16(name.length), u16(0), name, body);
    centrals.push(bytes(
      u32(0x02014b50), u16(0x031e), u16(20), u16(0x0800), u16(method), u16(0), u16(0x5a21), u32(crc), u32(body.length), u32(data.length),
      u16(name.length), u16(0), u16(0), u16(0), u16(0), u32(0), u32(offset), name,
    ));
    locals.push(local);
    offset += local.length;
  }
  const cd = Buffer.concat(centrals);
  const comment = Buffer.from(options.comment ?? '');
  const tail: Buffer[] = [];
  if (options.zip64) {
    const recordOffset = offset + cd.length;
    tail.push(bytes(u32(0x06064b50), u64(44), u16(45), u16(45), u32(0), u32(0), u64(entries.length), u64(entries.length), u64(cd.length), u64(offset)));
    tail.push(bytes(u32(0x07064b50), u32(0), u64(recordOffset), u32(1)));
    tail.push(bytes(u32(0x06054b50), u16(0), u16(0), u16(0xffff), u16(0xffff), u32(0xffffffff), u32(0xffffffff), u16(comment.length), comment));
  } else {
    tail.push(bytes(u32(0x06054b50), u16(0), u16(0), u16(entries.length), u16(entries.length), u32(cd.length), u32(offset), u16(comment.length), comment));
  }
  return Buffer.concat([...locals, cd, ...tail]);
}

const contentTypes = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>';
const rels = '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"/>';
const officeZip = (mainPart: string, extra: ZipEntry[] = []) =>
  zipFile([{ name: '[Content_Types].xml', data: contentTypes }, { name: '_rels/.rels', data: rels }, { name: mainPart, data: '<?xml version="1.0"?><root/>' }, ...extra]);
const docx = (options?: { zip64?: boolean }) =>
  options?.zip64
    ? zipFile([{ name: '[Content_Types].xml', data: contentTypes }, { name: 'word/document.xml', data: '<w:document/>' }], { zip64: true })
    : officeZip('word/document.xml', [{ name: 'word/styles.xml', data: '<w:styles/>' }]);
const xlsx = () => officeZip('xl/workbook.xml', [{ name: 'xl/worksheets/sheet1.xml', data: '<worksheet/>' }]);
const pptx = () => officeZip('ppt/presentation.xml', [{ name: 'ppt/slides/slide1.xml', data: '<p:sld/>' }]);
const epub = () => zipFile([
  { name: 'mimetype', data: 'application/epub+zip', store: true },
  { name: 'META-INF/container.xml', data: '<?xml version="1.0"?><container/>' },
  { name: 'OEBPS/content.opf', data: '<package/>' },
]);
const plainZip = () => zipFile([{ name: 'notes.txt', data: 'Tide tables for the northern harbour.' }, { name: 'more/readme.md', data: '# Readme' }]);

const ENDOFCHAIN = 0xfffffffe;
const FREESECT = 0xffffffff;
const NOSTREAM = 0xffffffff;

/** An OLE2 compound file (version 3, 512-byte sectors): header, one FAT sector, one directory sector. */
function ole2File(streams: string[]): Buffer {
  assert.ok(streams.length <= 3, 'one directory sector holds the root and three streams');
  const header = Buffer.alloc(512, 0);
  Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]).copy(header, 0);
  header.writeUInt16LE(0x3e, 0x18);
  header.writeUInt16LE(3, 0x1a);
  header.writeUInt16LE(0xfffe, 0x1c);
  header.writeUInt16LE(9, 0x1e);
  header.writeUInt16LE(6, 0x20);
  header.writeUInt32LE(1, 0x2c); // FAT sectors
  header.writeUInt32LE(1, 0x30); // first directory sector
  header.writeUInt32LE(4096, 0x38);
  header.writeUInt32LE(ENDOFCHAIN, 0x3c);
  header.writeUInt32LE(ENDOFCHAIN, 0x44);
  for (let i = 0; i < 109; i++) header.writeUInt32LE(i === 0 ? 0 : FREESECT, 0x4c + 4 * i);
  const fat = Buffer.alloc(512, 0xff);
  fat.writeUInt32LE(0xfffffffd, 0); // sector 0 is the FAT itself
  fat.writeUInt32LE(ENDOFCHAIN, 4); // sector 1, the directory, ends its chain
  const directory = Buffer.alloc(512, 0);
  const entry = (index: number, name: string, type: number, child: number, right: number) => {
    const at = index * 128;
    const encoded = Buffer.from(`${name}\0`, 'utf16le');
    encoded.copy(directory, at);
    directory.writeUInt16LE(encoded.length, at + 0x40);
    directory[at + 0x42] = type;
    directory[at + 0x43] = 1;
    directory.writeUInt32LE(NOSTREAM, at + 0x44);
    directory.writeUInt32LE(right, at + 0x48);
    directory.writeUInt32LE(child, at + 0x4c);
    directory.writeUInt32LE(ENDOFCHAIN, at + 0x74);
  };
  for (let i = 0; i < 4; i++) {
    directory.writeUInt32LE(NOSTREAM, i * 128 + 0x44);
    directory.writeUInt32LE(NOSTREAM, i * 128 + 0x48);
    directory.writeUInt32LE(NOSTREAM, i * 128 + 0x4c);
  }
  entry(0, 'Root Entry', 5, streams.length > 0 ? 1 : NOSTREAM, NOSTREAM);
  streams.forEach((name, i) => entry(i + 1, name, 2, NOSTREAM, i + 2 <= streams.length ? i + 2 : NOSTREAM));
  return Buffer.concat([header, fat, directory]);
}

const pdf = () => bytes(
  '%PDF-1.4\n%\xe2\xe3\xcf\xd3\n',
  '1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n',
  '2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\nendobj\n',
  '3 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >>\nendobj\n',
  'xref\n0 4\n0000000000 65535 f \n0000000015 00000 n \n0000000064 00000 n \n0000000121 00000 n \n',
  'trailer\n<< /Size 4 /Root 1 0 R >>\nstartxref\n199\n%%EOF\n',
);

function png(): Buffer {
  const chunk = (type: string, data: Buffer) => bytes(u32be(data.length), type, data, u32be(zlib.crc32(bytes(type, data))));
  const ihdr = bytes(u32be(1), u32be(1), [8, 2, 0, 0, 0]);
  return bytes([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], chunk('IHDR', ihdr), chunk('IDAT', zlib.deflateSync(Buffer.from([0, 255, 0, 0]))), chunk('IEND', Buffer.alloc(0)));
}
const jpeg = () => bytes([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10], 'JFIF\0', [1, 1, 0, 0, 1, 0, 1, 0, 0], [0xff, 0xdb, 0x00, 0x03, 0x00], [0xff, 0xd9]);
const gif = () => bytes('GIF89a', [1, 0, 1, 0, 0x80, 0, 0, 0xff, 0xff, 0xff, 0, 0, 0], [0x21, 0xf9, 4, 1, 0, 0, 0, 0], [0x2c, 0, 0, 0, 0, 1, 0, 1, 0, 0], [2, 2, 0x44, 1, 0], ';');
const tiffLittle = () => bytes('II', [0x2a, 0], u32(8), u16(0), u32(0));
const tiffBig = () => bytes('MM', [0, 0x2a], u32be(8), [0, 0], u32be(0));
const riff = (form: string, body: Buffer) => bytes('RIFF', u32(4 + body.length), form, body);
const webp = () => riff('WEBP', bytes('VP8L', u32(6), [0x2f, 0, 0, 0, 0, 0]));
const wav = () => riff('WAVE', bytes('fmt ', u32(16), u16(1), u16(1), u32(8000), u32(16000), u16(2), u16(16), 'data', u32(8), Buffer.alloc(8)));
const avi = () => riff('AVI ', bytes('LIST', u32(4 + 8 + 56), 'hdrl', 'avih', u32(56), Buffer.alloc(56)));
const mp3Frame = () => bytes([0xff, 0xfb, 0x90, 0x64], Buffer.alloc(413));
const mp3WithId3 = () => bytes('ID3', [4, 0, 0, 0, 0, 0, 0], mp3Frame(), mp3Frame());
const box = (type: string, payload: Buffer | string = Buffer.alloc(0)) => {
  const body = Buffer.isBuffer(payload) ? payload : Buffer.from(payload, 'latin1');
  return bytes(u32be(8 + body.length), type, body);
};
const isoMedia = (brand: string) => bytes(box('ftyp', bytes(brand, u32be(0x200), brand, 'isom')), box('free'), box('mdat', Buffer.alloc(64, 7)), box('moov', box('mvhd', Buffer.alloc(100))));
const quickTimeWithoutFtyp = () => bytes(box('wide'), box('mdat', Buffer.alloc(64, 7)), box('moov', box('mvhd', Buffer.alloc(100))));

function tarFile(name: string, content: string): Buffer {
  const header = Buffer.alloc(512, 0);
  header.write(name, 0, 'latin1');
  header.write('0000644\0', 100, 'latin1');
  header.write('0000000\0', 108, 'latin1');
  header.write('0000000\0', 116, 'latin1');
  header.write(`${content.length.toString(8).padStart(11, '0')}\0`, 124, 'latin1');
  header.write('00000000000\0', 136, 'latin1');
  header.write('        ', 148, 'latin1');
  header.write('0', 156, 'latin1');
  header.write('ustar\x0000', 257, 'latin1');
  let sum = 0;
  for (const b of header) sum += b;
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  const data = Buffer.alloc(Math.ceil(content.length / 512) * 512, 0);
  data.write(content, 'latin1');
  return Buffer.concat([header, data, Buffer.alloc(1024, 0)]);
}

const archives: Array<[string, () => Buffer, RegExp]> = [
  ['ZIP', plainZip, /a ZIP archive/],
  ['GZIP', () => zlib.gzipSync('Tide tables for the northern harbour.'), /a GZIP archive/],
  ['BZIP2', () => bytes('BZh9', [0x31, 0x41, 0x59, 0x26, 0x53, 0x59], [0x8e, 0x1a, 0x5c, 0x1e, 0, 0, 1, 0x41]), /a BZIP2 archive/],
  ['XZ', () => bytes([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00, 0x00, 0x04], u32(zlib.crc32(Buffer.from([0, 4]))), Buffer.alloc(24)), /an XZ archive/],
  ['7z', () => bytes([0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c, 0x00, 0x04], Buffer.alloc(24)), /a 7-Zip archive/],
  ['RAR', () => bytes('Rar!\x1a\x07\x01\x00', [0x33, 0x92, 0xb5, 0xe5, 0x0a, 0x01, 0x05, 0x06, 0x00, 0x05, 0x01, 0x01, 0x80, 0x80, 0x00]), /a RAR archive/],
  ['TAR', () => tarFile('notes.txt', 'Tide tables for the northern harbour.\n'), /a TAR archive/],
];

// ---- harness ------------------------------------------------------------------------------

let dir: string;
let counter = 0;
/** Writes a sample under its upload name, in a directory of its own so names may repeat. */
function sample(name: string, content: Buffer | string): { path: string; name: string; extension: string } {
  const own = path.join(dir, String(counter++));
  fs.mkdirSync(own);
  const file = path.join(own, name);
  fs.writeFileSync(file, content);
  return { path: file, name, extension: extensionOf(name) };
}
/** The verdict on the file as written to disk; a small upload is held in memory and checked from there, with the same verdict. */
async function check(name: string, content: Buffer | string) {
  const onDisk = sample(name, content);
  const result = await checkFileSignature(onDisk);
  const inMemory = await checkFileSignature({ ...onDisk, path: '/nonexistent/held-in-memory', bytes: Buffer.from(content) });
  assert.deepEqual(inMemory, result, `${name}: the same verdict from memory as from disk`);
  return result;
}

async function accepted(name: string, content: Buffer | string, kind: FileKind) {
  const result = await check(name, content);
  assert.deepEqual(result, { ok: true, kind }, `${name} should be accepted as ${kind}: ${JSON.stringify(result)}`);
}
async function rejected(name: string, content: Buffer | string, reason: RegExp) {
  const result = await check(name, content);
  assert.equal(result.ok, false, `${name} should be rejected`);
  if (result.ok) return;
  assert.ok(result.reason.includes(name), `the reason names the file: ${result.reason}`);
  assert.match(result.reason, reason);
}

describe('upload validation by file signature', () => {
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'file-signatures-'));
  });
  after(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const text = (s: string) => Buffer.from(s, 'utf8');
  const valid: Array<[string, () => Buffer, FileKind]> = [
    ['report.pdf', pdf, 'pdf'],
    ['letter.doc', () => ole2File(['WordDocument', '1Table', '\u0005SummaryInformation']), 'doc'],
    ['budget.xls', () => ole2File(['Workbook', '\u0005SummaryInformation']), 'xls'],
    ['old-budget.xls', () => ole2File(['Book']), 'xls'],
    ['slides.ppt', () => ole2File(['Current User', 'PowerPoint Document']), 'ppt'],
    ['letter.docx', () => docx(), 'docx'],
    ['letter64.docx', () => docx({ zip64: true }), 'docx'],
    ['sheet.xlsx', xlsx, 'xlsx'],
    ['deck.pptx', pptx, 'pptx'],
    ['novel.epub', epub, 'epub'],
    ['photo.jpg', jpeg, 'jpeg'],
    ['photo.jpeg', jpeg, 'jpeg'],
    ['icon.png', png, 'png'],
    ['scan.tif', tiffLittle, 'tiff'],
    ['scan.tiff', tiffBig, 'tiff'],
    ['anim.gif', gif, 'gif'],
    ['photo.webp', webp, 'webp'],
    ['clip.mp4', () => isoMedia('isom'), 'iso-media'],
    ['clip.mov', () => isoMedia('qt  '), 'iso-media'],
    ['old-clip.mov', quickTimeWithoutFtyp, 'iso-media'],
    ['clip.m4v', () => isoMedia('M4V '), 'iso-media'],
    ['voice.m4a', () => isoMedia('M4A '), 'iso-media'],
    ['clip.avi', avi, 'avi'],
    ['song.mp3', mp3WithId3, 'mp3'],
    ['raw-frames.mp3', () => bytes(mp3Frame(), mp3Frame()), 'mp3'],
    ['voice.wav', wav, 'wav'],
    ['notes.txt', () => text('Tide tables for the northern harbour.\n'), 'text'],
    ['bom.txt', () => bytes([0xef, 0xbb, 0xbf], 'Tide tables, with a byte order mark.'), 'text'],
    ['latin1.txt', () => Buffer.from('Caf\xe9 cr\xe8me br\xfbl\xe9e', 'latin1'), 'text'],
    ['notes.md', () => text('# Tides\n\nHigh water at *noon*.\n'), 'text'],
    ['notes.markdown', () => text('Tides\n=====\n'), 'text'],
    ['page.html', () => text('<!doctype html>\n<html><body><p>Tides</p></body></html>\n'), 'text'],
    ['fragment.htm', () => text('Tides for today:\n<ul><li>noon</li></ul>\n'), 'text'],
    ['script.py', () => text('def tide():\n    return "noon"\n'), 'text'],
    ['script.js', () => text('export const tide = () => "noon";\n'), 'text'],
    ['style.css', () => text('body { color: navy; }\n'), 'text'],
    ['table.csv', () => text('port,high water\nnorth,12:00\n'), 'text'],
    ['data.json', () => text('  {"port": "north", "high_water": "12:00"}\n'), 'text'],
    ['lines.json', () => text('[1, 2, 3]\n'), 'text'],
    ['feed.xml', () => text('<?xml version="1.0"?>\n<tides><tide>noon</tide></tides>\n'), 'text'],
    ['config.yaml', () => text('port: north\nhigh_water: "12:00"\n'), 'text'],
    ['config.yml', () => text('- north\n- south\n'), 'text'],
  ];

  describe('accepts a real sample of every supported extension', () => {
    it('has a sample for every extension the spec lists, and the checker knows each', () => {
      const covered = new Set(valid.map(([name]) => extensionOf(name)));
      for (const extension of supportedExtensions) {
        assert.ok(knowsExtension(extension), `checkFileSignature knows .${extension}`);
        assert.ok(covered.has(extension), `a sample for .${extension}`);
      }
    });
    for (const [name, make, kind] of valid) {
      it(`${name} is accepted as ${kind}`, async () => accepted(name, make(), kind));
    }
    it('accepts upper-case extensions the same way', async () => {
      await accepted('REPORT.PDF', pdf(), 'pdf');
      const result = await checkFileSignature({ ...sample('Letter.DOCX', docx()), extension: 'DOCX' });
      assert.deepEqual(result, { ok: true, kind: 'docx' });
    });
  });

  describe('refuses archives by signature, whatever the extension', () => {
    for (const [what, make, label] of archives) {
      for (const extension of ['txt', 'md', 'pdf', 'docx', 'png', 'mp4']) {
        it(`a ${what} archive named .${extension}`, async () => {
          await rejected(`bundle.${extension}`, make(), new RegExp(`${label.source}, not a \\.${extension} file; archives are not accepted`));
        });
      }
    }
  });

  describe('refuses content that does not match the extension', () => {
    const cases: Array<[string, string, () => Buffer, RegExp]> = [
      ['a PDF renamed .txt', 'report.txt', pdf, /^report\.txt is a PDF, not a \.txt file$/],
      ['a ZIP renamed .docx', 'report.docx', plainZip, /^report\.docx is a ZIP archive, not a \.docx file; archives are not accepted$/],
      ['a ZIP renamed .epub', 'novel.epub', plainZip, /ZIP archive, not a \.epub file; archives are not accepted/],
      ['a PNG renamed .pdf', 'scan.pdf', png, /^scan\.pdf is a PNG image, not a \.pdf file$/],
      ['text renamed .png', 'photo.png', () => text('just some words'), /^photo\.png is a text file, not a \.png file$/],
      ['unknown bytes as .png', 'photo.png', () => Buffer.from([0, 1, 2, 3, 4, 5, 0xfe, 0xfd, 0, 0]), /photo\.png is not a PNG image/],
      ['a DOCX renamed .xlsx', 'sheet.xlsx', () => docx(), /^sheet\.xlsx is a Word document \(DOCX\), not a \.xlsx file$/],
      ['a PPTX renamed .docx', 'letter.docx', pptx, /PowerPoint presentation \(PPTX\), not a \.docx file/],
      ['a DOCX renamed .epub', 'novel.epub', () => docx(), /Word document \(DOCX\), not a \.epub file/],
      ['an EPUB renamed .docx', 'letter.docx', epub, /EPUB e-book, not a \.docx file/],
      ['an Office package without a known part', 'drawing.docx', () => officeZip('visio/document.xml'), /Office Open XML package of another kind/],
      ['a DOCX renamed .md', 'notes.md', () => docx(), /^notes\.md is a Word document \(DOCX\), not a \.md file$/],
      ['an XLS renamed .doc', 'letter.doc', () => ole2File(['Workbook']), /^letter\.doc is an Excel 97-2003 workbook \(XLS\), not a \.doc file$/],
      ['a DOC renamed .docx', 'letter.docx', () => ole2File(['WordDocument']), /Word 97-2003 document \(DOC\), not a \.docx file/],
      ['a DOC renamed .ppt', 'slides.ppt', () => ole2File(['WordDocument']), /Word 97-2003 document \(DOC\), not a \.ppt file/],
      ['an OLE2 file of another kind as .doc', 'mail.doc', () => ole2File(['__nameid_version1.0']), /OLE2 compound file of another kind/],
      ['a password-protected DOCX', 'secret.docx', () => ole2File(['EncryptionInfo', 'EncryptedPackage']), /password-protected.*remove the password/],
      ['a JPEG renamed .png', 'icon.png', jpeg, /JPEG image, not a \.png file/],
      ['a PNG renamed .jpg', 'photo.jpg', png, /PNG image, not a \.jpg file/],
      ['a GIF renamed .webp', 'photo.webp', gif, /GIF image, not a \.webp file/],
      ['a WAV renamed .mp3', 'song.mp3', wav, /^song\.mp3 is a WAV audio file, not a \.mp3 file$/],
      ['an MP3 renamed .wav', 'voice.wav', mp3WithId3, /MP3 audio file, not a \.wav file/],
      ['an AVI renamed .m4a', 'voice.m4a', avi, /AVI video, not a \.m4a file/],
      ['an MP4 renamed .avi', 'clip.avi', () => isoMedia('isom'), /MP4\/QuickTime media file, not a \.avi file/],
      ['a HEIC photo renamed .mp4', 'clip.mp4', () => isoMedia('heic'), /HEIF\/AVIF image, not a \.mp4 file/],
      ['QuickTime boxes without ftyp as .mp4', 'clip.mp4', quickTimeWithoutFtyp, /clip\.mp4 is not an MP4\/QuickTime media file/],
      ['a PDF renamed .doc', 'letter.doc', pdf, /PDF, not a \.doc file/],
      ['a PNG renamed .json', 'data.json', png, /PNG image, not a \.json file/],
      ['a JPEG renamed .csv', 'table.csv', jpeg, /JPEG image, not a \.csv file/],
      ['an MP4 renamed .txt', 'notes.txt', () => isoMedia('isom'), /MP4\/QuickTime media file, not a \.txt file/],
    ];
    for (const [what, name, make, reason] of cases) {
      it(`${what}`, async () => rejected(name, make(), reason));
    }
  });

  describe('refuses empty, truncated and damaged files', () => {
    for (const name of ['empty.txt', 'empty.pdf', 'empty.docx', 'empty.mp4', 'empty.png']) {
      it(`an empty ${path.extname(name)}`, async () => rejected(name, Buffer.alloc(0), new RegExp(`^${name.replace('.', '\\.')} is empty$`)));
    }
    it('a text file holding only whitespace', async () => rejected('blank.md', ' \n\t\r\n  ', /^blank\.md is empty: it contains only whitespace$/));
    it('a truncated PDF (no %%EOF at the end)', async () => {
      const full = pdf();
      await rejected('cut.pdf', full.subarray(0, Math.floor(full.length * 0.6)), /^cut\.pdf is truncated: a PDF ends with %%EOF/);
    });
    it('a PDF with a few bytes of junk before its header is still a PDF', async () => accepted('junk.pdf', bytes('\r\n\r\n', pdf()), 'pdf'));
    it('a truncated DOCX (no end-of-central-directory record)', async () => {
      const full = docx();
      await rejected('cut.docx', full.subarray(0, Math.floor(full.length * 0.6)), /^cut\.docx is truncated or damaged: its ZIP structure has no end-of-central-directory record$/);
    });
    it('a DOCX cut inside its central directory', async () => {
      const full = docx();
      await rejected('cut.docx', full.subarray(0, full.length - 30), /cut\.docx is truncated or damaged/);
    });
    it('a DOCX whose central directory points past its end', async () => {
      const full = docx();
      const eocd = full.length - 22;
      const damaged = Buffer.from(full);
      damaged.writeUInt32LE(full.readUInt32LE(eocd + 16) + 1000, eocd + 16);
      await rejected('moved.docx', damaged, /moved\.docx is truncated or damaged: its central directory lies beyond the end of the file/);
    });
    it('a ZIP with a trailing comment is still read', async () => accepted('commented.xlsx', zipFile([{ name: '[Content_Types].xml', data: contentTypes }, { name: 'xl/workbook.xml', data: '<workbook/>' }], { comment: 'made by hand' }), 'xlsx'));
    it('a truncated XLSX renamed .md is still named a ZIP archive', async () => rejected('notes.md', xlsx().subarray(0, 40), /notes\.md is a ZIP archive, not a \.md file; archives are not accepted/));
    it('a truncated OLE2 file', async () => rejected('cut.doc', ole2File(['WordDocument']).subarray(0, 600), /^cut\.doc is truncated or damaged: its directory lies beyond the end of the file$/));
    it('an OLE2 file cut inside its header', async () => rejected('cut.xls', ole2File(['Workbook']).subarray(0, 100), /cut\.xls is truncated or damaged/));
    it('a truncated MP4 (a box runs past the end)', async () => {
      const full = isoMedia('isom');
      await rejected('cut.mp4', full.subarray(0, full.length - 40), /^cut\.mp4 is truncated: its "moov" box needs 40 more bytes than the file has$/);
    });
    it('an MP4 with padding after its last box is accepted', async () => accepted('padded.mp4', bytes(isoMedia('isom'), Buffer.alloc(5)), 'iso-media'));
    it('a truncated WebP', async () => rejected('cut.webp', webp().subarray(0, 20), /cut\.webp is truncated/));
    it('a PNG without its header chunk', async () => rejected('cut.png', png().subarray(0, 10), /cut\.png is truncated or damaged/));
  });

  describe('text formats', () => {
    it('NUL bytes in a .md file are binary data', async () => rejected('notes.md', bytes('# Hi', [0, 1, 2, 0], '\n'), /^notes\.md is binary data \(it contains NUL bytes\), not a \.md text file$/));
    it('a NUL byte far into a large .txt file is found', async () => {
      const big = Buffer.alloc(3 * 1024 * 1024, 0x61);
      big[big.length - 10] = 0;
      await rejected('big.txt', big, /big\.txt is binary data/);
    });
    it('UTF-16 text is refused with a hint', async () => rejected('windows.txt', bytes([0xff, 0xfe], Buffer.from('Tides', 'utf16le')), /^windows\.txt is UTF-16 text; save it as UTF-8/));
    it('.json must start with { or [', async () => rejected('data.json', 'port: north', /^data\.json does not look like JSON: it must start with \{ or \[$/));
    it('.xml must start with <', async () => rejected('feed.xml', 'tides at noon', /^feed\.xml does not look like XML/));
    it('.html must contain a tag', async () => rejected('page.html', 'tides at noon, 3 < 4', /^page\.html does not look like HTML/));
    it('text that merely starts with letters of a signature stays text', async () => {
      await accepted('id3.txt', 'ID3 tags explained: a short guide.', 'text');
      await accepted('bzh.md', 'BZh is not a bzip2 stream without its block magic.', 'text');
      await accepted('rar.txt', 'Rar! said the lion.', 'text');
    });
  });

  describe('real ZIP files from the zip command line tool', function () {
    // `zip` is one of the Debian packages scripts/setup.sh installs (scripts/dev-packages.txt).
    const zipWithCli = (name: string, files: Record<string, string>) => {
      const own = path.join(dir, `zip-${counter++}`);
      for (const [file, content] of Object.entries(files)) {
        fs.mkdirSync(path.dirname(path.join(own, file)), { recursive: true });
        fs.writeFileSync(path.join(own, file), content);
      }
      execFileSync('zip', ['-q', '-X', '-nw', '-r', path.join(own, name), ...Object.keys(files)], { cwd: own });
      return fs.readFileSync(path.join(own, name));
    };
    it('a DOCX zipped by the zip tool is a docx; the same files as .xlsx are refused', async () => {
      const made = zipWithCli('made.docx', { '[Content_Types].xml': contentTypes, '_rels/.rels': rels, 'word/document.xml': '<w:document/>' });
      await accepted('made.docx', made, 'docx');
      await rejected('made.xlsx', made, /Word document \(DOCX\), not a \.xlsx file/);
    });
    it('an EPUB zipped by the zip tool (mimetype first, stored)', async () => {
      const own = path.join(dir, `zip-${counter++}`);
      fs.mkdirSync(path.join(own, 'META-INF'), { recursive: true });
      fs.writeFileSync(path.join(own, 'mimetype'), 'application/epub+zip');
      fs.writeFileSync(path.join(own, 'META-INF/container.xml'), '<container/>');
      execFileSync('zip', ['-q', '-X', '-0', path.join(own, 'book.epub'), 'mimetype'], { cwd: own });
      execFileSync('zip', ['-q', '-X', '-r', path.join(own, 'book.epub'), 'META-INF'], { cwd: own });
      await accepted('book.epub', fs.readFileSync(path.join(own, 'book.epub')), 'epub');
    });
    it('a plain ZIP from the zip tool renamed .pptx is an archive', async () => {
      await rejected('deck.pptx', zipWithCli('plain.zip', { 'a.txt': 'one', 'b/c.txt': 'two' }), /ZIP archive, not a \.pptx file; archives are not accepted/);
    });
  });

  describe('checkUpload: 400 for invalid content, OK for valid files of every supported kind', () => {
    const upload = (name: string, content: Buffer | string) => {
      const file = sample(name, content);
      return checkUpload({ originalName: name, path: file.path, size: fs.statSync(file.path).size });
    };
    async function status(promise: Promise<unknown>): Promise<{ status: number; message: string }> {
      try {
        await promise;
        return { status: 200, message: '' };
      } catch (err) {
        assert.ok(err instanceof AppError, `an AppError: ${String(err)}`);
        return { status: err.status, message: err.message };
      }
    }

    it('a valid .txt or .md passes', async () => {
      assert.deepEqual(await upload('notes.txt', 'Tide tables.'), { extension: 'txt', kind: 'text' });
      assert.deepEqual(await upload('notes.md', '# Tides'), { extension: 'md', kind: 'text' });
    });
    it('a valid PDF, DOCX, PNG or MP4 passes', async () => {
      for (const [name, content] of [['report.pdf', pdf()], ['letter.docx', docx()], ['icon.png', png()], ['clip.mp4', isoMedia('isom')]] as const) {
        const result = await status(upload(name, content));
        assert.equal(result.status, 200, `${name}: ${result.message}`);
      }
    });
    it('an invalid PDF, DOCX or PNG is 400', async () => {
      const cases: Array<[string, Buffer | string, RegExp]> = [
        ['empty.pdf', '', /empty\.pdf is empty/],
        ['cut.pdf', pdf().subarray(0, 100), /cut\.pdf is truncated/],
        ['bundle.docx', plainZip(), /bundle\.docx is a ZIP archive, not a \.docx file; archives are not accepted/],
        ['photo.png', 'not a picture', /photo\.png is a text file, not a \.png file/],
      ];
      for (const [name, content, message] of cases) {
        const result = await status(upload(name, content));
        assert.equal(result.status, 400, `${name}: ${result.message}`);
        assert.match(result.message, message);
      }
    });
    it('a PDF renamed .txt and an archive by extension are 400', async () => {
      const renamed = await status(upload('report.txt', pdf()));
      assert.deepEqual(renamed, { status: 400, message: 'report.txt is a PDF, not a .txt file' });
      const archive = await status(upload('bundle.zip', plainZip()));
      assert.equal(archive.status, 400);
      assert.match(archive.message, /archives \(\.zip\) are not accepted/);
    });
  });
});
