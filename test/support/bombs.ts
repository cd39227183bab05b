import zlib from 'node:zlib';

/**
 * Files that try to make the service do unbounded work, built cheaply in the tests themselves:
 * a deflate stream of N identical blocks is one compressed block repeated (each block is flushed
 * with Z_FULL_FLUSH, so it is byte-aligned and needs nothing before it), so gigabytes of content
 * cost megabytes of file and milliseconds to build.
 */
const MIB = 1024 * 1024;

/** A raw deflate stream inflating to `chunk` repeated `times` times. */
export function repeatedDeflate(chunk: Buffer, times: number): Buffer {
  const block = zlib.deflateRawSync(chunk, { level: 9, finishFlush: zlib.constants.Z_FULL_FLUSH });
  // An empty final block of fixed Huffman codes ends the stream.
  return Buffer.concat([...Array.from({ length: times }, () => block), Buffer.from([0x03, 0x00])]);
}

export interface ZipEntry {
  name: string;
  /** Stored as is (method 0) unless `deflated` is given. */
  data?: Buffer | string;
  /** A raw deflate stream (method 8) and what it claims to inflate to. */
  deflated?: { stream: Buffer; declaredSize: number };
}

/** A ZIP file written by hand, so that its headers can say anything (lying sizes included). */
export function zipFile(entries: ZipEntry[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const name = Buffer.from(e.name, 'utf8');
    const stored = e.deflated ? null : Buffer.isBuffer(e.data) ? e.data : Buffer.from(e.data ?? '', 'utf8');
    const body = e.deflated ? e.deflated.stream : stored!;
    const size = e.deflated ? e.deflated.declaredSize : stored!.length;
    const crc = stored ? zlib.crc32(stored) : 0;
    const method = e.deflated ? 8 : 0;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6); // UTF-8 names
    local.writeUInt16LE(method, 8);
    local.writeUInt32LE(crc >>> 0, 14);
    local.writeUInt32LE(body.length, 18);
    local.writeUInt32LE(size >>> 0, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x0800, 8);
    central.writeUInt16LE(method, 10);
    central.writeUInt32LE(crc >>> 0, 16);
    central.writeUInt32LE(body.length, 20);
    central.writeUInt32LE(size >>> 0, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, body);
    centrals.push(central, name);
    offset += local.length + name.length + body.length;
  }
  const cd = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(Math.min(entries.length, 0xffff), 8);
  end.writeUInt16LE(Math.min(entries.length, 0xffff), 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, end]);
}

const contentTypes = (main: string, type: string) =>
  `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/${main}" ContentType="${type}"/></Types>`;

/**
 * An Excel workbook whose one sheet inflates to `gib` GiB of spaces inside a cell (about 1 MiB of
 * file per GiB). `declare: 'truth'` states the real size in the header (at most 4 GiB - 1);
 * `'lie'` claims 1 KiB, so only counting what really comes out can stop it.
 */
export function xlsxBomb(options: { mib: number; declare: 'truth' | 'lie' }): Buffer {
  const chunk = Buffer.alloc(MIB, 0x20);
  const head = '<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>';
  const stream = Buffer.concat([
    zlib.deflateRawSync(Buffer.from(head), { finishFlush: zlib.constants.Z_FULL_FLUSH }),
    repeatedDeflate(chunk, options.mib),
  ]);
  const declaredSize = options.declare === 'truth' ? Math.min(0xffffffff, head.length + options.mib * MIB) : 1024;
  return zipFile([
    { name: '[Content_Types].xml', data: contentTypes('xl/workbook.xml', 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml') },
    { name: '_rels/.rels', data: '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>' },
    { name: 'xl/workbook.xml', data: '<?xml version="1.0"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Bomb" sheetId="1" r:id="rId1"/></sheets></workbook>' },
    { name: 'xl/_rels/workbook.xml.rels', data: '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>' },
    { name: 'xl/worksheets/sheet1.xml', deflated: { stream, declaredSize } },
  ]);
}

/** A Word document whose body part inflates to `mib` MiB of spaces while its header claims 1 KiB. */
export function docxBomb(mib: number): Buffer {
  const head = '<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>';
  const stream = Buffer.concat([zlib.deflateRawSync(Buffer.from(head), { finishFlush: zlib.constants.Z_FULL_FLUSH }), repeatedDeflate(Buffer.alloc(MIB, 0x20), mib)]);
  return zipFile([
    { name: '[Content_Types].xml', data: contentTypes('word/document.xml', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml') },
    { name: '_rels/.rels', data: '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>' },
    { name: 'word/document.xml', deflated: { stream, declaredSize: 1024 } },
  ]);
}

/** An EPUB whose one chapter inflates to `mib` MiB. */
export function epubBomb(mib: number): Buffer {
  const head = '<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>c</title></head><body><p>';
  const stream = Buffer.concat([zlib.deflateRawSync(Buffer.from(head), { finishFlush: zlib.constants.Z_FULL_FLUSH }), repeatedDeflate(Buffer.alloc(MIB, 0x61), mib)]);
  return zipFile([
    { name: 'mimetype', data: 'application/epub+zip' },
    { name: 'META-INF/container.xml', data: '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>' },
    { name: 'OEBPS/content.opf', data: '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Bomb</dc:title></metadata><manifest><item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/></manifest><spine><itemref idref="c1"/></spine></package>' },
    { name: 'OEBPS/c1.xhtml', deflated: { stream, declaredSize: 4096 } },
  ]);
}

/** An Excel workbook of `count` entries (tiny ones), past any sane number of parts. */
export function manyEntriesXlsx(count: number): Buffer {
  const entries: ZipEntry[] = [
    { name: '[Content_Types].xml', data: contentTypes('xl/workbook.xml', 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml') },
    { name: 'xl/workbook.xml', data: '<?xml version="1.0"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheets/></workbook>' },
  ];
  for (let i = 0; i < count; i++) entries.push({ name: `xl/media/p${i}.xml`, data: '<a/>' });
  return zipFile(entries);
}

/** An Excel workbook whose shared strings are an XML entity bomb (each entity ten of the one before). */
export function entityBombXlsx(levels = 9): Buffer {
  let dtd = '<!ENTITY e0 "ha! ha! ha! ha! ha! ha! ha! ha! ha! ha!">';
  for (let i = 1; i <= levels; i++) dtd += `<!ENTITY e${i} "${`&e${i - 1};`.repeat(10)}">`;
  const sheet = `<?xml version="1.0"?><!DOCTYPE worksheet [${dtd}]><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>&e${levels};</t></is></c></row></sheetData></worksheet>`;
  return zipFile([
    { name: '[Content_Types].xml', data: contentTypes('xl/workbook.xml', 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml') },
    { name: 'xl/workbook.xml', data: '<?xml version="1.0"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Bomb" sheetId="1" r:id="rId1"/></sheets></workbook>' },
    { name: 'xl/_rels/workbook.xml.rels', data: '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>' },
    { name: 'xl/worksheets/sheet1.xml', data: sheet },
  ]);
}

/**
 * A one-page PDF whose content stream is `mib` MiB of text operators deflated to about a
 * thousandth of that: every reader must inflate and interpret all of it.
 */
export function pdfBomb(mib: number): Buffer {
  const line = Buffer.from('BT /F1 1 Tf 10 10 Td (bomb) Tj ET\n');
  const chunk = Buffer.alloc(MIB);
  for (let i = 0; i + line.length <= chunk.length; i += line.length) line.copy(chunk, i);
  const zstream = Buffer.concat([Buffer.from([0x78, 0x9c]), repeatedDeflate(chunk, mib), Buffer.from([0, 0, 0, 0])]);
  return pdfWith([`<< /Length ${zstream.length} /Filter /FlateDecode >>\nstream\n`, zstream, '\nendstream'], '612 792');
}

/** A one-page PDF whose page is `inches` inches square with no text layer: rendering it for OCR needs gigabytes. */
export function hugePagePdf(inches: number): Buffer {
  const content = Buffer.from('0 0 m 10 10 l S\n');
  return pdfWith([`<< /Length ${content.length} >>\nstream\n`, content, '\nendstream'], `${inches * 72} ${inches * 72}`);
}

function pdfWith(contents: Array<string | Buffer>, size: string): Buffer {
  const objects: Array<Array<string | Buffer>> = [
    ['<< /Type /Catalog /Pages 2 0 R >>'],
    ['<< /Type /Pages /Kids [3 0 R] /Count 1 >>'],
    [`<< /Type /Page /Parent 2 0 R /MediaBox [0 0 ${size}] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>`],
    contents,
    ['<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>'],
  ];
  const parts: Buffer[] = [Buffer.from('%PDF-1.4\n%\xe2\xe3\xcf\xd3\n', 'latin1')];
  const offsets: number[] = [];
  let length = parts[0]!.length;
  objects.forEach((body, i) => {
    offsets.push(length);
    const obj = Buffer.concat([Buffer.from(`${i + 1} 0 obj\n`), ...body.map((b) => (Buffer.isBuffer(b) ? b : Buffer.from(b, 'latin1'))), Buffer.from('\nendobj\n')]);
    parts.push(obj);
    length += obj.length;
  });
  const xref = `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${length}\n%%EOF\n`;
  parts.push(Buffer.from(xref, 'latin1'));
  return Buffer.concat(parts);
}

/**
 * A WAV file whose header claims a data chunk of almost 4 GiB at 8 kHz, 8-bit mono (about 149
 * hours) while the file holds one second: its header is all a reader has to go by.
 */
export function longHeaderWav(): Buffer {
  const rate = 8000;
  const data = Buffer.alloc(rate, 0x80);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(0xfffffff0, 4);
  header.write('WAVE', 8, 'ascii');
  header.write('fmt ', 12, 'ascii');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate, 28);
  header.writeUInt16LE(1, 32);
  header.writeUInt16LE(8, 34);
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(0xffffffd0, 40);
  return Buffer.concat([header, data]);
}
