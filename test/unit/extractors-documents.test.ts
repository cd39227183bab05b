import { legacyOfficeFile, pdf, pdfOf, scannedPage } from '../support/samples.js';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as samples from '../support/office-samples.js';
import { extractFile, type ExtractOptions } from '../../lib/digitization/extractors/index.js';
import { defaultExtractionLimits, UnreadableDocument } from '../../lib/digitization/extractors/types.js';
import { runningExtractionThreads } from '../../lib/digitization/extractors/isolated.js';
import { ToolFailed } from '../../lib/platform/child-process.js';
import { toolPath } from '../support/tool-path.js';
import { PocketSphinxEngine } from '../../lib/providers/speech-to-text.js';

/** The production defaults (lib/platform/config.ts), OCR languages detected. */
export const extractOptions: ExtractOptions = { ocrLanguages: null, pdfOcr: { maxPages: 100, concurrency: 2, dpi: 300 }, libreOfficeTimeoutMs: 120_000, speechToText: new PocketSphinxEngine() };
const extractDocument = (file: string, ext: string) => extractFile(file, ext, extractOptions);

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

const docx = async (paragraphs: string[]) => write('sample.docx', await samples.docx(paragraphs));
const pptx = async (slides: string[][]) => write('sample.pptx', await samples.pptx(slides));
const xlsx = async (sheets: Array<{ name: string; rows: string }>, shared: string[]) => write('sample.xlsx', await samples.xlsx(sheets, shared));
const epub = async (chapters: Array<{ id: string; html: string }>, spine: string[]) => write('sample.epub', await samples.epub(chapters, spine));
const zip = async (name: string, parts: Record<string, string>) => write(name, await samples.zip(parts));

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
    it('a PDF whose only page has neither text nor anything OCR can read is unreadable', async () => {
      await rejectsUnreadable(write('b.pdf', pdf([])), 'pdf', /the PDF contains no text, and OCR recognised none on its 1 scanned page/);
    });
    it('a damaged PDF is unreadable', async () => {
      await rejectsUnreadable(write('c.pdf', '%PDF-1.4\ngarbage'), 'pdf', /PDF cannot be read/);
    });

    describe('scanned pages (OCR)', function () {
      this.timeout(180_000);
      let english: Awaited<ReturnType<typeof scannedPage>>;
      before(async () => {
        english = await scannedPage(['The lighthouse keeper wrote in the logbook', 'every evening before the storm arrived']);
      });

      it('keeps the text pages of a mixed PDF and reads its scanned page by OCR, recording which page that was', async () => {
        const file = write('mixed.pdf', pdfOf([{ lines: ['Chapter one is typed text'] }, english, { lines: ['Chapter three is typed as well'] }]));
        const { text } = await extractDocument(file, 'pdf');
        const [first, second, third] = text.split(/\n\n(?=Chapter|<!--)/);
        assert.match(first!, /^Chapter one is typed text$/m);
        assert.match(second!, /^<!-- page 2: OCR \(tesseract, eng\) -->$/m);
        assert.match(second!, /lighthouse keeper wrote in the logbook/i);
        assert.match(third!, /^Chapter three is typed as well$/m);
        assert.doesNotMatch(text, /page 1: OCR|page 3: OCR/);
      });

      it('detects the language of scanned pages: German is read with umlauts, Russian in Cyrillic', async () => {
        const german = await scannedPage(['Die Kündigungsfrist beträgt drei Monate zum Quartalsende.', 'Größere Schäden müssen schriftlich gemeldet werden.']);
        const de = await extractDocument(write('de.pdf', pdfOf([german])), 'pdf');
        assert.match(de.text, /page 1: OCR \(tesseract, deu\+eng\)/);
        assert.match(de.text, /Kündigungsfrist beträgt/);
        assert.match(de.text, /Größere Schäden müssen/);
        const russian = await scannedPage(['Мы сохраняем документы в базе знаний', 'и отвечаем на вопросы клиентов']);
        const ru = await extractDocument(write('ru.pdf', pdfOf([russian])), 'pdf');
        assert.match(ru.text, /page 1: OCR \(tesseract, rus\+eng\)/);
        assert.match(ru.text, /сохраняем документы в базе знаний/);
      });

      it('reads in the languages a document or knowledge base chose, without detecting', async () => {
        const french = await scannedPage(['Le gardien du phare écrivait chaque soir', 'avant que la tempête ne commence.']);
        const { text } = await extractFile(write('fr.pdf', pdfOf([french])), 'pdf', { ...extractOptions, ocrLanguages: ['fra'] });
        assert.match(text, /page 1: OCR \(tesseract, fra\+eng\)/);
        assert.match(text, /tempête/);
      });

      it('refuses more scanned pages than PDF_OCR_MAX_PAGES allows, saying so', async () => {
        const file = write('long.pdf', pdfOf([english, english, english]));
        await assert.rejects(extractFile(file, 'pdf', { ...extractOptions, pdfOcr: { ...extractOptions.pdfOcr, maxPages: 2 } }), (err: unknown) => {
          assert.ok(err instanceof UnreadableDocument);
          assert.match(err.message, /the PDF has 3 pages without a text layer that need OCR; at most 2 are read \(PDF_OCR_MAX_PAGES\)/);
          return true;
        });
      });
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
      assert.match(text, /## Costs\n\nItem \| Amount\nPaper \| {2}\| 42\.5/);
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
    it('documents beyond EXTRACT_MAX_THREADS wait for a thread instead of each starting one', async () => {
      const files = Array.from({ length: 10 }, (_, i) => write(`many-${i}.json`, JSON.stringify({ document: i })));
      let most = 0;
      const sampler = setInterval(() => (most = Math.max(most, runningExtractionThreads())), 1);
      try {
        const texts = await Promise.all(files.map((f) => extractFile(f, 'json', { ...extractOptions, limits: { ...defaultExtractionLimits, maxThreads: 2 } })));
        assert.deepEqual(texts.map((t) => t.text), files.map((_, i) => `{\n  "document": ${i}\n}`));
      } finally {
        clearInterval(sampler);
      }
      assert.ok(most >= 1 && most <= 2, `${most} threads ran at once`);
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

  describe('Office 97-2003 files made by LibreOffice (converted by LibreOffice to read them)', function () {
    this.timeout(180_000);

    it('reads a .doc that antiword cannot', async () => {
      const file = await legacyOfficeFile('doc', 'Lighthouse keepers log\n\nThe lamp was lit at dusk.\nStorms came from the west.\n', dir);
      const { text } = await extractDocument(file, 'doc');
      assert.match(text, /Lighthouse keepers log/);
      assert.match(text, /The lamp was lit at dusk\./);
      assert.match(text, /Storms came from the west\./);
    });

    it('reads a .xls as sheets of | separated cells', async () => {
      const file = await legacyOfficeFile('xls', 'Quarter,Revenue\nQ1,1200\nQ2,1350\n', dir);
      const { text } = await extractDocument(file, 'xls');
      assert.match(text, /^Quarter \| Revenue$/m);
      assert.match(text, /^Q2 \| 1350$/m);
    });

    it('reads a .ppt from which catppt reads nothing, slide by slide', async () => {
      const file = await legacyOfficeFile('ppt', ['The harbour opens at dawn', 'Fishing boats return by noon'], dir);
      const { text } = await extractDocument(file, 'ppt');
      assert.match(text, /## Slide 1\n+The harbour opens at dawn/);
      assert.match(text, /## Slide 2\n+Fishing boats return by noon/);
    });

    it('without LibreOffice on the server: a .doc is read by the old readers; a .ppt they read nothing from is a missing tool naming its package (retried), not "contains no text"', async () => {
      const doc = await legacyOfficeFile('doc', 'Lighthouse keepers log\n\nThe lamp was lit at dusk.\n', dir);
      const ppt = await legacyOfficeFile('ppt', ['The harbour opens at dawn'], dir);
      const saved = process.env.PATH;
      process.env.PATH = toolPath(path.join(dir, `no-soffice-${counter++}`), { without: ['soffice'] });
      try {
        assert.match((await extractDocument(doc, 'doc')).text, /The lamp was lit at dusk\./);
        await assert.rejects(extractDocument(ppt, 'ppt'), (err: unknown) => {
          assert.ok(err instanceof ToolFailed && !(err instanceof UnreadableDocument), `a server problem, not the file's: ${String(err)}`);
          assert.equal(err.kind, 'missing');
          assert.equal(err.message, 'the PowerPoint 97-2003 presentation (.ppt) cannot be read here: the server lacks LibreOffice (soffice, Debian package libreoffice-impress-nogui)');
          return true;
        });
      } finally {
        process.env.PATH = saved;
      }
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
