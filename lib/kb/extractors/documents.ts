/**
 * Plain text of an uploaded document, by file kind (its extension, lower case, without the dot).
 *
 * - PDF: Debian `poppler-utils` `pdftotext -layout -enc UTF-8` (bounded time); pages separated by
 *   blank lines.
 * - DOCX: `mammoth` raw text (paragraphs separated by blank lines).
 * - PPTX / XLSX / EPUB: the ZIP is read with `fflate`, the XML parts with `fast-xml-parser`:
 *   PPTX as `## Slide N` plus the text of each paragraph of the slide (and its notes);
 *   XLSX as `## <sheet name>` plus one line per row, cells joined by ` | `;
 *   EPUB as its spine's XHTML chapters in reading order, each through `extractArticle`.
 * - HTML: `extractArticle` of `lib/kb/article.ts` (charset from BOM or `<meta charset>`).
 * - CSV: `csv-parse` (quotes, embedded newlines), delimiter `,` `;` or tab sniffed from the first
 *   line; rows as lines with cells joined by ` | `.
 * - JSON: parsed and pretty-printed. XML: one line per element, indented by depth, `name: text`.
 *   YAML: validated with `yaml`, text as is.
 * - TXT / MD / MARKDOWN / PY / JS / CSS: as is.
 * - Legacy Office: DOC via `antiword` (falling back to `catdoc`), XLS via `xls2csv`, PPT via
 *   `catppt` (Debian `antiword` and `catdoc`).
 *
 * All text comes back as UTF-8 with the BOM dropped and LF line ends. A file that cannot be read,
 * or that holds no text, throws `UnreadableDocument` with a reason meant for the user.
 */
import { execFile } from 'node:child_process';
import { open, readFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { unzipSync } from 'fflate';
import mammoth from 'mammoth';
import { parseAllDocuments } from 'yaml';
import { decodeBody, extractArticle } from '../article.js';
import { UnreadableDocument, type Extracted } from './types.js';

export { UnreadableDocument, type Extracted } from './types.js';

/** Time a command-line converter may take on one file. */
const TOOL_TIMEOUT_MS = 120_000;
/** Largest text a converter may print, and largest uncompressed part read from a ZIP. */
const MAX_OUTPUT_BYTES = 256 * 1024 * 1024;

export const documentExtensions = [
  'pdf', 'docx', 'pptx', 'xlsx', 'epub', 'html', 'htm', 'csv', 'json', 'xml', 'yaml', 'yml',
  'txt', 'md', 'markdown', 'py', 'js', 'css', 'doc', 'xls', 'ppt',
] as const;

const plainTextExtensions = new Set(['txt', 'md', 'markdown', 'py', 'js', 'css']);

/** The text of a document; `extension` may carry a leading dot and any case. */
export async function extractDocument(filePath: string, extension: string): Promise<Extracted> {
  const ext = extension.replace(/^\./, '').toLowerCase();
  const result = await extractByKind(filePath, ext);
  // Text and code are digitized exactly as written (only the BOM and CR line ends go), so that
  // their character counts are what the user uploaded; extracted formats are tidied.
  const text = plainTextExtensions.has(ext) ? result.text.replace(/^\uFEFF/, '').replace(/\r\n?/g, '\n') : normalizeText(result.text);
  if (text.trim() === '') throw new UnreadableDocument(emptyReason(ext));
  const title = result.title?.replace(/\s+/g, ' ').trim() || null;
  return { text, title };
}

async function extractByKind(filePath: string, ext: string): Promise<Extracted> {
  switch (ext) {
    case 'pdf': return extractPdf(filePath);
    case 'docx': return extractDocx(filePath);
    case 'pptx': return extractPptx(await readZip(filePath, 'PowerPoint (.pptx)'));
    case 'xlsx': return extractXlsx(await readZip(filePath, 'Excel (.xlsx)'));
    case 'epub': return extractEpub(await readZip(filePath, 'EPUB'));
    case 'html':
    case 'htm': return extractHtml(filePath);
    case 'csv': return { text: csvText(decodeText(await readFile(filePath))) };
    case 'json': return { text: jsonText(decodeText(await readFile(filePath))) };
    case 'xml': return { text: xmlText(decodeText(await readFile(filePath))) };
    case 'yaml':
    case 'yml': return { text: yamlText(decodeText(await readFile(filePath))) };
    case 'doc': return extractLegacyDoc(filePath);
    case 'xls':
      await requireOle2(filePath, 'the Excel 97-2003 (.xls) file');
      return { text: await runTool('xls2csv', ['-d', 'utf-8', filePath], 'the Excel 97-2003 (.xls) file', 'catdoc') };
    case 'ppt':
      await requireOle2(filePath, 'the PowerPoint 97-2003 (.ppt) file');
      return { text: await runTool('catppt', ['-d', 'utf-8', filePath], 'the PowerPoint 97-2003 (.ppt) file', 'catdoc') };
    default:
      if (plainTextExtensions.has(ext)) return { text: decodeText(await readFile(filePath)) };
      throw new UnreadableDocument(`files of type .${ext || '(none)'} are not supported`);
  }
}

function emptyReason(ext: string): string {
  switch (ext) {
    case 'pdf': return 'the PDF contains no extractable text (scanned pages need OCR)';
    case 'docx': return 'the Word document (.docx) contains no text';
    case 'doc': return 'the Word 97-2003 document (.doc) contains no text';
    case 'pptx': return 'the PowerPoint presentation (.pptx) contains no text';
    case 'ppt': return 'the PowerPoint 97-2003 presentation (.ppt) contains no text';
    case 'xlsx': return 'the Excel workbook (.xlsx) contains no cell values';
    case 'xls': return 'the Excel 97-2003 workbook (.xls) contains no cell values';
    case 'epub': return 'the EPUB book contains no text';
    case 'html':
    case 'htm': return 'the HTML page contains no readable text';
    case 'csv': return 'the CSV file contains no values';
    case 'json': return 'the JSON file is empty';
    case 'xml': return 'the XML file contains no text';
    case 'yaml':
    case 'yml': return 'the YAML file is empty';
    default: return `the .${ext} file is empty`;
  }
}

// ---- text helpers -------------------------------------------------------------------------------

/** LF line ends, no BOM, no trailing spaces, at most one blank line in a row, no outer blank lines. */
function normalizeText(text: string): string {
  return text
    .replace(/^\uFEFF/, '')
    .replace(/\r\n?/g, '\n')
    .replace(/\f/g, '\n\n')
    .replace(/[ \t]+$/gm, '')
    .replace(/\n{3,}/g, '\n\n')
    .replace(/^\n+|\n+$/g, '');
}

/** UTF-8 (or UTF-16 with a BOM); the BOM is dropped. Invalid UTF-8 is read as Windows-1252. */
function decodeText(buf: Buffer): string {
  if (buf[0] === 0xff && buf[1] === 0xfe) return new TextDecoder('utf-16le').decode(buf);
  if (buf[0] === 0xfe && buf[1] === 0xff) return new TextDecoder('utf-16be').decode(buf);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(buf); // drops a UTF-8 BOM
  } catch {
    return new TextDecoder('windows-1252').decode(buf);
  }
}

const errorMessage = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0]!.slice(0, 300);

// ---- command-line converters ----------------------------------------------------------------

/** Runs a converter and returns its standard output; failure → UnreadableDocument naming `what`. */
function runTool(command: string, args: string[], what: string, debianPackage: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      { timeout: TOOL_TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: MAX_OUTPUT_BYTES, encoding: 'buffer' },
      (err, stdout, stderr) => {
        if (!err) return resolve(decodeText(stdout));
        const e = err as NodeJS.ErrnoException & { killed?: boolean; code?: unknown };
        if (e.code === 'ENOENT') {
          return reject(new UnreadableDocument(`${what} cannot be read: the server lacks ${command} (Debian package ${debianPackage})`));
        }
        if (e.killed) return reject(new UnreadableDocument(`${what} took too long to read (over ${TOOL_TIMEOUT_MS / 1000} s)`));
        if (e.code === 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER') return reject(new UnreadableDocument(`${what} holds too much text`));
        const detail = stderr.toString('utf8').trim().split('\n')[0]?.slice(0, 300) || `${command} exited with code ${String(e.code)}`;
        reject(new UnreadableDocument(`${what} cannot be read (damaged, encrypted or not really that format): ${detail}`));
      },
    );
  });
}

async function extractPdf(filePath: string): Promise<Extracted> {
  const what = 'the PDF';
  const text = await runTool('pdftotext', ['-layout', '-enc', 'UTF-8', '-q', filePath, '-'], what, 'poppler-utils');
  let title: string | null = null;
  try {
    const info = await runTool('pdfinfo', ['-enc', 'UTF-8', filePath], what, 'poppler-utils');
    title = /^Title:\s*(.*)$/m.exec(info)?.[1]?.trim() || null;
  } catch {
    // the title is optional
  }
  return { text, title };
}

/** Legacy Office files are OLE2 compound files; anything else would be misread (catdoc prints it as is). */
async function requireOle2(filePath: string, what: string): Promise<void> {
  const head = Buffer.alloc(8);
  const handle = await open(filePath, 'r');
  try {
    await handle.read(head, 0, 8, 0);
  } finally {
    await handle.close();
  }
  if (!head.equals(Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]))) {
    throw new UnreadableDocument(`${what} cannot be read: it is not an Office 97-2003 file (damaged, or saved in another format under this name)`);
  }
}

async function extractLegacyDoc(filePath: string): Promise<Extracted> {
  const what = 'the Word 97-2003 document (.doc)';
  await requireOle2(filePath, what);
  try {
    return { text: await runTool('antiword', ['-m', 'UTF-8.txt', '-w', '0', filePath], what, 'antiword') };
  } catch (err) {
    // antiword refuses some files (Word 6/95, "fast saved", RTF renamed .doc); catdoc reads more.
    try {
      return { text: await runTool('catdoc', ['-d', 'utf-8', '-w', filePath], what, 'catdoc') };
    } catch {
      throw err;
    }
  }
}

// ---- DOCX ---------------------------------------------------------------------------------------

async function extractDocx(filePath: string): Promise<Extracted> {
  const buf = await readFile(filePath);
  const zip = unzipOrThrow(buf, 'Word (.docx)');
  if (!zip.has('word/document.xml')) throw new UnreadableDocument('the Word (.docx) file has no document part (word/document.xml); it is damaged or not a Word document');
  let text: string;
  try {
    text = (await mammoth.extractRawText({ buffer: buf })).value;
  } catch (err) {
    throw new UnreadableDocument(`the Word (.docx) file cannot be read: ${errorMessage(err)}`);
  }
  return { text, title: coreTitle(zip) };
}

// ---- ZIP and XML --------------------------------------------------------------------------------

/** Parts of a ZIP file, read lazily as text. */
class ZipParts {
  constructor(private readonly files: Record<string, Uint8Array>, readonly kind: string) {}
  has(name: string): boolean { return name in this.files; }
  names(): string[] { return Object.keys(this.files); }
  text(name: string): string | null {
    const data = this.files[name];
    return data ? decodeText(Buffer.from(data.buffer, data.byteOffset, data.byteLength)) : null;
  }
  xml(name: string): XmlNode[] | null {
    const text = this.text(name);
    if (text === null) return null;
    try {
      return parseXml(text);
    } catch (err) {
      throw new UnreadableDocument(`the ${this.kind} file has a damaged part ${name}: ${errorMessage(err)}`);
    }
  }
}

function unzipOrThrow(buf: Buffer, kind: string, wanted?: (name: string) => boolean): ZipParts {
  let tooLarge: string | null = null;
  let files: Record<string, Uint8Array>;
  try {
    files = unzipSync(new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength), {
      filter: (f) => {
        if (wanted && !wanted(f.name)) return false;
        if (f.originalSize > MAX_OUTPUT_BYTES) { tooLarge = f.name; return false; }
        return true;
      },
    });
  } catch (err) {
    throw new UnreadableDocument(`the ${kind} file is not a readable ZIP package (damaged or not that format): ${errorMessage(err)}`);
  }
  if (tooLarge) throw new UnreadableDocument(`the ${kind} file has a part too large to read (${tooLarge})`);
  return new ZipParts(files, kind);
}

async function readZip(filePath: string, kind: string): Promise<ZipParts> {
  // Only XML/HTML parts matter; images and fonts are skipped before inflating.
  return unzipOrThrow(await readFile(filePath), kind, (name) => /\.(xml|rels|x?html?|opf|ncx)$/i.test(name) || name === 'mimetype');
}

/** fast-xml-parser's ordered form: `{ tag: children, ':@'?: attributes }` or `{ '#text': text }`. */
type XmlNode = Record<string, unknown>;

const xmlParser = new XMLParser({
  preserveOrder: true,
  ignoreAttributes: false,
  attributeNamePrefix: '',
  trimValues: false,
  parseTagValue: false,
  parseAttributeValue: false,
  processEntities: true,
  htmlEntities: true,
  commentPropName: '#comment',
  cdataPropName: '#cdata',
});

function parseXml(text: string): XmlNode[] {
  return xmlParser.parse(text) as XmlNode[];
}

function tagOf(node: XmlNode): string | null {
  for (const key of Object.keys(node)) if (key !== ':@') return key;
  return null;
}
function childrenOf(node: XmlNode): XmlNode[] {
  const tag = tagOf(node);
  const value = tag ? node[tag] : undefined;
  return Array.isArray(value) ? (value as XmlNode[]) : [];
}
function attrsOf(node: XmlNode): Record<string, string> {
  return (node[':@'] as Record<string, string> | undefined) ?? {};
}
/** Name without a namespace prefix. */
const localName = (tag: string) => tag.slice(tag.indexOf(':') + 1);

/** Text of a text or CDATA node, else null. */
function leafText(node: XmlNode): string | null {
  if ('#text' in node) return String(node['#text']);
  if ('#cdata' in node) return childrenOf(node).map((c) => leafText(c) ?? '').join('');
  return null;
}

/** Every element (depth first, document order) whose local name is `name`. */
function findAll(nodes: XmlNode[], name: string, out: XmlNode[] = []): XmlNode[] {
  for (const node of nodes) {
    const tag = tagOf(node);
    if (!tag || tag.startsWith('#') || tag.startsWith('?')) continue;
    if (localName(tag) === name) out.push(node);
    else findAll(childrenOf(node), name, out);
  }
  return out;
}
function findFirst(nodes: XmlNode[], name: string): XmlNode | null {
  return findAll(nodes, name)[0] ?? null;
}

/** Concatenated text of the descendants whose local name is in `textTags` (all text if omitted). */
function textOf(nodes: XmlNode[], textTags?: Set<string>, skipTags?: Set<string>): string {
  let out = '';
  const visit = (list: XmlNode[], inside: boolean) => {
    for (const node of list) {
      const leaf = leafText(node);
      if (leaf !== null) {
        if (inside) out += leaf;
        continue;
      }
      const tag = tagOf(node);
      if (!tag || tag.startsWith('?') || tag === '#comment') continue;
      const local = localName(tag);
      if (skipTags?.has(local)) continue;
      if (local === 'tab' && inside) out += '\t';
      if (local === 'br' && inside) out += '\n';
      visit(childrenOf(node), inside || (textTags?.has(local) ?? false));
    }
  };
  visit(nodes, !textTags);
  return out;
}

/** `dc:title` of an Office package's docProps/core.xml. */
function coreTitle(zip: ZipParts): string | null {
  const core = zip.xml('docProps/core.xml');
  const title = core ? findFirst(core, 'title') : null;
  return title ? textOf([title]).trim() || null : null;
}

/** Relationship id → part path, for the part `partPath` (e.g. `xl/workbook.xml`). */
function relationships(zip: ZipParts, partPath: string): Map<string, string> {
  const dir = path.posix.dirname(partPath);
  const relsPath = path.posix.join(dir, '_rels', `${path.posix.basename(partPath)}.rels`);
  const map = new Map<string, string>();
  for (const rel of findAll(zip.xml(relsPath) ?? [], 'Relationship')) {
    const { Id, Target, TargetMode } = attrsOf(rel);
    if (!Id || !Target || TargetMode === 'External') continue;
    map.set(Id, Target.startsWith('/') ? Target.slice(1) : path.posix.normalize(path.posix.join(dir, Target)));
  }
  return map;
}

// ---- PPTX ---------------------------------------------------------------------------------------

const drawingText = new Set(['t']);

/** Each `a:p` paragraph of a slide part as one line. */
function slideParagraphs(nodes: XmlNode[]): string[] {
  return findAll(nodes, 'p')
    .map((p) => textOf([p], drawingText).replace(/[ \t]+/g, ' ').trim())
    .filter((line) => line !== '');
}

function extractPptx(zip: ZipParts): Extracted {
  const presentation = zip.xml('ppt/presentation.xml');
  if (!presentation) throw new UnreadableDocument('the PowerPoint (.pptx) file has no presentation part; it is damaged or not a presentation');
  const rels = relationships(zip, 'ppt/presentation.xml');
  let slides = findAll(presentation, 'sldId')
    .map((s) => rels.get(attrsOf(s)['r:id'] ?? Object.entries(attrsOf(s)).find(([k]) => localName(k) === 'id' && k.includes(':'))?.[1] ?? ''))
    .filter((p): p is string => !!p && zip.has(p));
  if (slides.length === 0) {
    // No usable slide list: the slide parts in numeric order.
    slides = zip.names()
      .filter((n) => /^ppt\/slides\/slide\d+\.xml$/.test(n))
      .sort((a, b) => Number(/(\d+)\.xml$/.exec(a)![1]) - Number(/(\d+)\.xml$/.exec(b)![1]));
  }
  const sections: string[] = [];
  slides.forEach((slidePath, i) => {
    const lines = slideParagraphs(zip.xml(slidePath) ?? []);
    const notesPath = [...relationships(zip, slidePath).values()].find((p) => /notesSlide\d*\.xml$/.test(p));
    const notes = notesPath ? slideParagraphs(zip.xml(notesPath) ?? []).filter((l) => !/^\d+$/.test(l)) : [];
    if (lines.length === 0 && notes.length === 0) return;
    let section = `## Slide ${i + 1}\n\n${lines.join('\n')}`;
    if (notes.length) section += `\n\nNotes:\n${notes.join('\n')}`;
    sections.push(section);
  });
  return { text: sections.join('\n\n'), title: coreTitle(zip) };
}

// ---- XLSX ---------------------------------------------------------------------------------------

/** Zero-based column of a cell reference such as `C7`, or null. */
function columnOf(ref: string | undefined): number | null {
  const letters = /^([A-Z]+)\d*$/i.exec(ref ?? '')?.[1];
  if (!letters) return null;
  let n = 0;
  for (const ch of letters.toUpperCase()) n = n * 26 + (ch.charCodeAt(0) - 64);
  return n - 1;
}

function extractXlsx(zip: ZipParts): Extracted {
  const workbook = zip.xml('xl/workbook.xml');
  if (!workbook) throw new UnreadableDocument('the Excel (.xlsx) file has no workbook part; it is damaged or not a workbook');
  const rels = relationships(zip, 'xl/workbook.xml');
  const sharedPath = [...rels.values()].find((p) => /sharedStrings\.xml$/i.test(p)) ?? 'xl/sharedStrings.xml';
  // Shared strings: the text of each `si`, rich-text runs joined, phonetic hints (`rPh`) left out.
  const shared = findAll(zip.xml(sharedPath) ?? [], 'si').map((si) => textOf([si], drawingText, new Set(['rPh'])));

  const sections: string[] = [];
  for (const sheet of findAll(workbook, 'sheet')) {
    const attrs = attrsOf(sheet);
    const rid = Object.entries(attrs).find(([k]) => k.includes(':') && localName(k) === 'id')?.[1];
    const sheetPath = rid ? rels.get(rid) : undefined;
    if (!sheetPath) continue;
    const rows: string[] = [];
    for (const row of findAll(zip.xml(sheetPath) ?? [], 'row')) {
      const cells: string[] = [];
      for (const cell of childrenOf(row).filter((c) => localName(tagOf(c) ?? '') === 'c')) {
        const { r, t } = attrsOf(cell);
        const kids = childrenOf(cell);
        const v = kids.find((k) => localName(tagOf(k) ?? '') === 'v');
        const raw = v ? textOf([v]) : '';
        let value: string;
        if (t === 's') value = shared[Number(raw)] ?? '';
        else if (t === 'inlineStr') value = textOf(kids.filter((k) => localName(tagOf(k) ?? '') === 'is'), drawingText, new Set(['rPh']));
        else if (t === 'b') value = raw === '1' ? 'TRUE' : raw === '0' ? 'FALSE' : raw;
        else value = raw;
        const col = columnOf(r) ?? cells.length;
        while (cells.length < col) cells.push('');
        cells[col] = value.replace(/\s*\n\s*/g, ' ').trim();
      }
      while (cells.length && cells[cells.length - 1] === '') cells.pop();
      if (cells.length) rows.push(cells.join(' | '));
    }
    if (rows.length) sections.push(`## ${attrs.name ?? `Sheet ${sections.length + 1}`}\n\n${rows.join('\n')}`);
  }
  return { text: sections.join('\n\n'), title: coreTitle(zip) };
}

// ---- EPUB ---------------------------------------------------------------------------------------

function extractEpub(zip: ZipParts): Extracted {
  const container = zip.xml('META-INF/container.xml');
  const rootfile = container ? findFirst(container, 'rootfile') : null;
  const opfPath = rootfile ? attrsOf(rootfile)['full-path'] : zip.names().find((n) => n.endsWith('.opf'));
  const opf = opfPath ? zip.xml(opfPath) : null;
  if (!opfPath || !opf) throw new UnreadableDocument('the EPUB has no package document (.opf); it is damaged or not an EPUB book');
  const dir = path.posix.dirname(opfPath);
  const manifest = new Map<string, { href: string; type: string }>();
  for (const item of findAll(opf, 'item')) {
    const { id, href, 'media-type': type } = attrsOf(item);
    if (id && href) manifest.set(id, { href: path.posix.normalize(path.posix.join(dir, decodeURIComponent(href.split('#')[0]!))), type: type ?? '' });
  }
  const titleNode = findFirst(opf, 'title');
  const title = titleNode ? textOf([titleNode]).trim() || null : null;
  const chapters: string[] = [];
  for (const ref of findAll(opf, 'itemref')) {
    const item = manifest.get(attrsOf(ref).idref ?? '');
    if (!item || !/html|xml/.test(item.type) && !/\.x?html?$/i.test(item.href)) continue;
    const html = zip.text(item.href);
    if (!html) continue;
    const { text } = extractArticle(html, pathToFileURL(`/${item.href}`).href);
    if (text.trim()) chapters.push(text.trim());
  }
  return { text: chapters.join('\n\n'), title };
}

// ---- HTML and structured text -------------------------------------------------------------------

async function extractHtml(filePath: string): Promise<Extracted> {
  const source = decodeBody(await readFile(filePath), '', 'html').replace(/^\uFEFF/, '');
  return extractArticle(source, pathToFileURL(filePath).href);
}

/** The delimiter (`,`, `;` or tab) that occurs most often outside quotes on the first line. */
function sniffDelimiter(text: string): string {
  const counts = new Map<string, number>([[',', 0], [';', 0], ['\t', 0]]);
  let quoted = false;
  for (const ch of text) {
    if (ch === '"') quoted = !quoted;
    else if (!quoted && (ch === '\n' || ch === '\r')) break;
    else if (!quoted && counts.has(ch)) counts.set(ch, counts.get(ch)! + 1);
  }
  let best = ',';
  for (const [d, n] of counts) if (n > counts.get(best)!) best = d;
  return best;
}

function csvText(text: string): string {
  let rows: string[][];
  try {
    rows = parseCsv(text, {
      bom: true,
      delimiter: sniffDelimiter(text),
      relax_column_count: true,
      relax_quotes: true,
      skip_empty_lines: true,
    }) as string[][];
  } catch (err) {
    throw new UnreadableDocument(`the CSV file cannot be parsed: ${errorMessage(err)}`);
  }
  return rows
    .map((row) => row.map((cell) => cell.replace(/\s*\r?\n\s*/g, ' ').trim()))
    .filter((row) => row.some((cell) => cell !== ''))
    .map((row) => row.join(' | '))
    .join('\n');
}

function jsonText(text: string): string {
  if (text.trim() === '') return '';
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new UnreadableDocument(`the JSON file is not valid JSON: ${errorMessage(err)}`);
  }
  if (value === null || (typeof value === 'object' && Object.keys(value).length === 0) || value === '') return '';
  return JSON.stringify(value, null, 2);
}

function yamlText(text: string): string {
  const docs = parseAllDocuments(text);
  const list = Array.isArray(docs) ? docs : [docs];
  for (const doc of list) {
    const first = doc.errors[0];
    if (first) throw new UnreadableDocument(`the YAML file is not valid YAML: ${first.message.split('\n')[0]}`);
  }
  if (list.every((doc) => doc.contents === null)) return '';
  return text;
}

/** One line per element: `name: text` (attributes in brackets), children indented below. */
function xmlText(text: string): string {
  let nodes: XmlNode[];
  try {
    const valid = xmlValidity(text);
    if (valid !== true) throw new Error(valid);
    nodes = parseXml(text);
  } catch (err) {
    throw new UnreadableDocument(`the XML file is not well-formed XML: ${errorMessage(err)}`);
  }
  const lines: string[] = [];
  let anyText = false;
  const visit = (list: XmlNode[], depth: number) => {
    for (const node of list) {
      const tag = tagOf(node);
      if (!tag || tag.startsWith('?') || tag.startsWith('#') || tag.startsWith('!')) continue;
      const kids = childrenOf(node);
      const own = kids.map((k) => leafText(k) ?? '').join('').replace(/\s+/g, ' ').trim();
      const attrs = Object.entries(attrsOf(node))
        .filter(([k]) => k !== 'xmlns' && !k.startsWith('xmlns:'))
        .map(([k, v]) => `${k}=${v}`);
      const hasElements = kids.some((k) => { const t = tagOf(k); return !!t && !t.startsWith('#'); });
      if (own || attrs.length) anyText = true;
      if (!own && !attrs.length && !hasElements) continue;
      const label = attrs.length ? `${tag} (${attrs.join(', ')})` : tag;
      lines.push(`${'  '.repeat(depth)}${label}${own ? `: ${own}` : ''}`);
      visit(kids, depth + 1);
    }
  };
  visit(nodes, 0);
  return anyText ? lines.join('\n') : '';
}

/** True, or why the text is not well-formed XML. */
function xmlValidity(text: string): true | string {
  const result = XMLValidator.validate(text);
  return result === true ? true : `${result.err.msg} (line ${result.err.line})`;
}
