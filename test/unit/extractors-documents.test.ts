import { pdf } from '../support/samples.js';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import yazl from 'yazl';
import { extractDocument } from '../../lib/kb/extractors/documents.js';
import { UnreadableDocument } from '../../lib/kb/extractors/types.js';

/**
 * Document text extraction. Every sample is generated here in a temp dir as a small but real file
 * of its format: a hand-written PDF with a correct xref table, OOXML/EPUB packages zipped with yazl
 * from minimal valid parts, and text formats as strings.
 */

let dir: string;
let counter = 0;

function write(name: string, data: string | Buffer): string {
  const file = path.join(dir, `${counter++}-${name}`);
  fs.writeFileSync(file, data);
  return file;
}

function zip(name: string, parts: Record<string, string>): Promise<string> {
  const file = path.join(dir, `${counter++}-${name}`);
  return new Promise((resolve, reject) => {
    const z = new yazl.ZipFile();
    for (const [partName, text] of Object.entries(parts)) z.addBuffer(Buffer.from(text), partName);
    z.end();
    z.outputStream.pipe(fs.createWriteStream(file)).on('close', () => resolve(file)).on('error', reject);
  });
}

const contentTypes = (overrides: Record<string, string>) =>
  `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
${Object.entries(overrides).map(([p, t]) => `<Override PartName="/${p}" ContentType="${t}"/>`).join('\n')}
</Types>`;

const rels = (list: Array<[string, string, string]>) =>
  `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
${list.map(([id, type, target]) => `<Relationship Id="${id}" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/${type}" Target="${target}"/>`).join('\n')}
</Relationships>`;

const core = (title: string) =>
  `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>${title}</dc:title></cp:coreProperties>`;

const W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"';
function docx(paragraphs: string[]): Promise<string> {
  return zip('sample.docx', {
    '[Content_Types].xml': contentTypes({ 'word/document.xml': 'application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml' }),
    '_rels/.rels': rels([['rId1', 'officeDocument', 'word/document.xml'], ['rId2', 'metadata/core-properties', 'docProps/core.xml']]),
    'docProps/core.xml': core('Docx Title'),
    'word/document.xml': `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document ${W}><w:body>${paragraphs.map((p) => `<w:p><w:r><w:t xml:space="preserve">${p}</w:t></w:r></w:p>`).join('')}<w:sectPr/></w:body></w:document>`,
  });
}

const P = 'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"';
function pptx(slides: string[][]): Promise<string> {
  const parts: Record<string, string> = {
    '[Content_Types].xml': contentTypes({ 'ppt/presentation.xml': 'application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml' }),
    '_rels/.rels': rels([['rId1', 'officeDocument', 'ppt/presentation.xml']]),
    'ppt/presentation.xml': `<?xml version="1.0" encoding="UTF-8"?><p:presentation ${P}><p:sldIdLst>${slides.map((_, i) => `<p:sldId id="${256 + i}" r:id="rId${i + 1}"/>`).join('')}</p:sldIdLst></p:presentation>`,
    'ppt/_rels/presentation.xml.rels': rels(slides.map((_, i) => [`rId${i + 1}`, 'slide', `slides/slide${i + 1}.xml`])),
  };
  slides.forEach((paras, i) => {
    parts[`ppt/slides/slide${i + 1}.xml`] = `<?xml version="1.0" encoding="UTF-8"?><p:sld ${P}><p:cSld><p:spTree><p:sp><p:txBody><a:bodyPr/>${paras
      .map((t) => `<a:p><a:r><a:rPr lang="en-US"/><a:t>${t}</a:t></a:r></a:p>`)
      .join('')}</p:txBody></p:sp></p:spTree></p:cSld></p:sld>`;
  });
  return zip('sample.pptx', parts);
}

const S = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"';
function xlsx(sheets: Array<{ name: string; rows: string }>, shared: string[]): Promise<string> {
  const parts: Record<string, string> = {
    '[Content_Types].xml': contentTypes({ 'xl/workbook.xml': 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml' }),
    '_rels/.rels': rels([['rId1', 'officeDocument', 'xl/workbook.xml'], ['rId2', 'metadata/core-properties', 'docProps/core.xml']]),
    'docProps/core.xml': core('Budget Book'),
    'xl/workbook.xml': `<?xml version="1.0" encoding="UTF-8"?><workbook ${S}><sheets>${sheets
      .map((s, i) => `<sheet name="${s.name}" sheetId="${i + 1}" r:id="rId${i + 1}"/>`)
      .join('')}</sheets></workbook>`,
    'xl/_rels/workbook.xml.rels': rels([
      ...sheets.map((_, i): [string, string, string] => [`rId${i + 1}`, 'worksheet', `worksheets/sheet${i + 1}.xml`]),
      ['rIdS', 'sharedStrings', 'sharedStrings.xml'],
    ]),
    'xl/sharedStrings.xml': `<?xml version="1.0" encoding="UTF-8"?><sst ${S} count="${shared.length}" uniqueCount="${shared.length}">${shared.map((s) => `<si>${s}</si>`).join('')}</sst>`,
  };
  sheets.forEach((s, i) => {
    parts[`xl/worksheets/sheet${i + 1}.xml`] = `<?xml version="1.0" encoding="UTF-8"?><worksheet ${S}><sheetData>${s.rows}</sheetData></worksheet>`;
  });
  return zip('sample.xlsx', parts);
}

function epub(chapters: Array<{ id: string; html: string }>, spine: string[]): Promise<string> {
  return zip('sample.epub', {
    mimetype: 'application/epub+zip',
    'META-INF/container.xml': `<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>`,
    'OEBPS/content.opf': `<?xml version="1.0" encoding="UTF-8"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">x</dc:identifier><dc:title>The Sample Book</dc:title><dc:language>en</dc:language></metadata><manifest>${chapters
      .map((c) => `<item id="${c.id}" href="text/${c.id}.xhtml" media-type="application/xhtml+xml"/>`)
      .join('')}</manifest><spine>${spine.map((id) => `<itemref idref="${id}"/>`).join('')}</spine></package>`,
    ...Object.fromEntries(chapters.map((c) => [`OEBPS/text/${c.id}.xhtml`, `<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>${c.id}</title></head><body>${c.html}</body></html>`])),
  });
}

async function rejectsUnreadable(file: string, ext: string, pattern: RegExp): Promise<void> {
  await assert.rejects(extractDocument(file, ext), (err: unknown) => {
    assert.ok(err instanceof UnreadableDocument, `expected UnreadableDocument, got ${String(err)}`);
    assert.match(err.message, pattern);
    return true;
  });
}

describe('document text extraction', () => {
  before(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'extract-docs-')); });
  after(() => { fs.rmSync(dir, { recursive: true, force: true }); });

  describe('pdf', () => {
    it('extracts the text and title of a PDF', async () => {
      const { text, title } = await extractDocument(write('a.pdf', pdf(['Quarterly revenue grew (strongly)', 'Second line here'], 'Report Title')), 'pdf');
      assert.match(text, /Quarterly revenue grew \(strongly\)/);
      assert.match(text, /Second line here/);
      assert.doesNotMatch(text, /Tj|BT|endobj/);
      assert.equal(title, 'Report Title');
    });
    it('a PDF without text needs OCR', async () => {
      await rejectsUnreadable(write('b.pdf', pdf([])), 'pdf', /PDF contains no extractable text.*OCR/);
    });
    it('a damaged PDF is unreadable', async () => {
      await rejectsUnreadable(write('c.pdf', '%PDF-1.4\ngarbage'), 'pdf', /PDF cannot be read/);
    });
  });

  describe('docx', () => {
    it('extracts paragraphs and the core title', async () => {
      const { text, title } = await extractDocument(await docx(['Hello Word &amp; friends', 'Second paragraph']), '.DOCX');
      assert.match(text, /Hello Word & friends/);
      assert.match(text, /Second paragraph/);
      assert.doesNotMatch(text, /<w:|w:t/);
      assert.equal(title, 'Docx Title');
    });
    it('an empty document is unreadable', async () => {
      await rejectsUnreadable(await docx([]), 'docx', /Word document \(\.docx\) contains no text/);
    });
    it('a non-ZIP file is unreadable', async () => {
      await rejectsUnreadable(write('x.docx', 'not a zip'), 'docx', /not a readable ZIP/);
    });
  });

  describe('pptx', () => {
    it('extracts slides in order under ## Slide N', async () => {
      const { text } = await extractDocument(await pptx([['Welcome deck', 'Agenda item'], ['Results &lt;2024&gt;']]), 'pptx');
      assert.match(text, /## Slide 1\n\nWelcome deck\nAgenda item/);
      assert.match(text, /## Slide 2\n\nResults <2024>/);
      assert.ok(text.indexOf('Slide 1') < text.indexOf('Slide 2'));
      assert.doesNotMatch(text, /a:t|<a:/);
    });
    it('slides without text are unreadable', async () => {
      await rejectsUnreadable(await pptx([[], []]), 'pptx', /presentation \(\.pptx\) contains no text/);
    });
  });

  describe('xlsx', () => {
    it('extracts sheets as ## name with rows of | separated cells', async () => {
      const file = await xlsx(
        [
          { name: 'Costs', rows: '<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c></row><row r="2"><c r="A2" t="s"><v>2</v></c><c r="C2"><v>42.5</v></c></row>' },
          { name: 'Notes', rows: '<row r="1"><c r="A1" t="inlineStr"><is><t>Inline note</t></is></c><c r="B1" t="b"><v>1</v></c></row>' },
        ],
        ['<t>Item</t>', '<r><t>Am</t></r><r><t>ount</t></r>', '<t>Paper</t>'],
      );
      const { text, title } = await extractDocument(file, 'xlsx');
      assert.match(text, /## Costs\n\nItem \| Amount\nPaper \|  \| 42\.5/);
      assert.match(text, /## Notes\n\nInline note \| TRUE/);
      assert.doesNotMatch(text, /<v>|<c /);
      assert.equal(title, 'Budget Book');
    });
    it('a workbook without values is unreadable', async () => {
      await rejectsUnreadable(await xlsx([{ name: 'Empty', rows: '' }], []), 'xlsx', /Excel workbook \(\.xlsx\) contains no cell values/);
    });
  });

  describe('epub', () => {
    it('extracts chapters in spine order with the book title', async () => {
      const file = await epub(
        [
          { id: 'ch2', html: '<h1>Chapter Two</h1><p>The second chapter text.</p>' },
          { id: 'ch1', html: '<h1>Chapter One</h1><p>It was a dark &amp; stormy night.</p>' },
        ],
        ['ch1', 'ch2'],
      );
      const { text, title } = await extractDocument(file, 'epub');
      assert.match(text, /dark & stormy night/);
      assert.match(text, /second chapter text/);
      assert.ok(text.indexOf('stormy') < text.indexOf('second chapter'), text);
      assert.doesNotMatch(text, /<p>|<h1>/);
      assert.equal(title, 'The Sample Book');
    });
    it('a book without text is unreadable', async () => {
      await rejectsUnreadable(await epub([{ id: 'c', html: '' }], ['c']), 'epub', /EPUB book contains no text/);
    });
    it('a ZIP that is not an EPUB is unreadable', async () => {
      await rejectsUnreadable(await zip('n.epub', { 'a.txt': 'x' }), 'epub', /no package document/);
    });
  });

  describe('html', () => {
    it('extracts the readable text and title', async () => {
      const file = write('p.html', '\uFEFF<!doctype html><html><head><title>Page T</title><script>var x=1</script></head><body><nav>Menu link</nav><h1>Heading</h1><p>Body &amp; soul paragraph.</p></body></html>');
      const { text, title } = await extractDocument(file, 'htm');
      assert.match(text, /Body & soul paragraph\./);
      assert.doesNotMatch(text, /<p>|var x|Menu link/);
      assert.equal(title, 'Page T');
    });
    it('a page without text is unreadable', async () => {
      await rejectsUnreadable(write('e.html', '<html><body><script>1</script></body></html>'), 'html', /HTML page contains no readable text/);
    });
  });

  describe('csv', () => {
    it('joins cells with | and handles quotes, BOM and semicolons', async () => {
      const { text } = await extractDocument(write('a.csv', '\uFEFFname,comment\r\n"Smith, J","said ""hi"""\r\n\r\nDoe,plain\r\n'), 'csv');
      assert.equal(text, 'name | comment\nSmith, J | said "hi"\nDoe | plain');
      const semi = await extractDocument(write('b.csv', 'a;b;c\n1;2;3\n'), 'csv');
      assert.equal(semi.text, 'a | b | c\n1 | 2 | 3');
    });
    it('an empty CSV is unreadable', async () => {
      await rejectsUnreadable(write('e.csv', ',,\n\n'), 'csv', /CSV file contains no values/);
    });
  });

  describe('json', () => {
    it('pretty-prints', async () => {
      const { text } = await extractDocument(write('a.json', '{"name":"Widget","tags":["x","y"]}'), 'json');
      assert.equal(text, '{\n  "name": "Widget",\n  "tags": [\n    "x",\n    "y"\n  ]\n}');
    });
    it('invalid or empty JSON is unreadable', async () => {
      await rejectsUnreadable(write('b.json', '{"a":'), 'json', /not valid JSON/);
      await rejectsUnreadable(write('c.json', '  {} '), 'json', /JSON file is empty/);
    });
  });

  describe('xml', () => {
    it('keeps element structure readable without markup', async () => {
      const xml = '<?xml version="1.0"?><catalog xmlns="urn:x"><book id="b1"><title>XML &amp; You</title><price>9.99</price></book><!-- c --></catalog>';
      const { text } = await extractDocument(write('a.xml', xml), 'xml');
      assert.equal(text, 'catalog\n  book (id=b1)\n    title: XML & You\n    price: 9.99');
    });
    it('malformed or text-free XML is unreadable', async () => {
      await rejectsUnreadable(write('b.xml', '<a><b></a>'), 'xml', /not well-formed XML/);
      await rejectsUnreadable(write('c.xml', '<a><b/></a>'), 'xml', /XML file contains no text/);
    });
  });

  describe('yaml', () => {
    it('returns valid YAML as is', async () => {
      const src = 'name: Widget\r\nitems:\r\n  - one\r\n  - two\r\n';
      const { text } = await extractDocument(write('a.yaml', src), 'yml');
      assert.equal(text, 'name: Widget\nitems:\n  - one\n  - two');
    });
    it('invalid or empty YAML is unreadable', async () => {
      await rejectsUnreadable(write('b.yaml', 'a: [1, 2\nb: }'), 'yaml', /not valid YAML/);
      await rejectsUnreadable(write('c.yaml', '# only a comment\n'), 'yaml', /YAML file is empty/);
    });
  });

  describe('plain text', () => {
    it('returns text as is, UTF-8, BOM dropped, LF line ends', async () => {
      for (const ext of ['txt', 'md', 'markdown', 'py', 'js', 'css']) {
        const { text, title } = await extractDocument(write(`a.${ext}`, '\uFEFF# Title é\r\n\r\n  indented line\r\n'), ext);
        assert.equal(text, '# Title é\n\n  indented line\n', 'kept as written, trailing newline included');
        assert.equal(title, null);
      }
    });
    it('an empty text file is unreadable', async () => {
      await rejectsUnreadable(write('e.txt', ' \n\n'), 'txt', /\.txt file is empty/);
    });
  });

  describe('legacy and unknown formats', () => {
    it('a file that is not really a .doc / .xls / .ppt is unreadable', async () => {
      await rejectsUnreadable(write('x.doc', 'plain words, not OLE2'), 'doc', /Word 97-2003 document \(\.doc\)/);
      await rejectsUnreadable(write('x.xls', Buffer.from([0, 1, 2, 3])), 'xls', /Excel 97-2003/);
      await rejectsUnreadable(write('x.ppt', Buffer.from([0, 1, 2, 3])), 'ppt', /PowerPoint 97-2003/);
    });
    it('a damaged OLE2 .doc is unreadable', async () => {
      const ole = Buffer.concat([Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]), Buffer.alloc(504)]);
      await rejectsUnreadable(write('y.doc', ole), 'doc', /Word 97-2003 document \(\.doc\)/);
    });
    it('an unknown extension is unsupported', async () => {
      await rejectsUnreadable(write('x.bin', 'x'), 'bin', /\.bin are not supported/);
    });
  });
});
