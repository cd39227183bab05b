/**
 * Text of the document formats that are read in this process (extractors/index.ts dispatches):
 * - DOCX: `mammoth` raw text (paragraphs separated by blank lines).
 * - PPTX / XLSX / EPUB: the ZIP is read with `fflate`, the XML parts with `fast-xml-parser`:
 *   PPTX as `## Slide N` plus the text of each paragraph of the slide (and its notes);
 *   XLSX as `## <sheet name>` plus one line per row, cells joined by ` | `;
 *   EPUB as its spine's XHTML chapters in reading order, each through `extractArticle`.
 * - HTML: `extractArticle` of `lib/digitization/article.ts` (charset from BOM or `<meta charset>`).
 * - CSV: `csv-parse` (quotes, embedded newlines), delimiter `,` `;` or tab sniffed from the first
 *   line; rows as lines with cells joined by ` | `.
 * - JSON: parsed and pretty-printed. XML: one line per element, indented by depth, `name: text`.
 *   YAML: validated with `yaml`, text as is.
 * - TXT / MD / MARKDOWN / PY / JS / CSS: as is.
 * A file that cannot be read throws `UnreadableDocument` with a reason meant for the user.
 */
import { readFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { zipSync } from 'fflate';
import mammoth from 'mammoth';
import { parseAllDocuments } from 'yaml';
import { decodeBody, extractArticle } from '../article.js';
import { isPlainText } from '../formats.js';
import { BoundedZip, ZipRefused } from '../zip-reader.js';
import { decodeText } from './converters.js';
import { defaultExtractionLimits, UnreadableDocument, type Extracted, type ZipBounds } from './types.js';


/**
 * The text of a document of a format read in this process, by its extension (lower case, no dot).
 * ZIP-based formats are read within `limits` (lib/digitization/zip-reader.ts); extractors/index.ts
 * runs this in a thread with a heap limit and a time limit (extractors/isolated.ts).
 */
export async function extractDocumentText(filePath: string, ext: string, limits: ZipBounds = defaultExtractionLimits): Promise<Extracted> {
  switch (ext) {
    case 'docx':
    case 'pptx':
    case 'xlsx': return extractOfficeOpenXml(filePath, ext, limits);
    case 'epub': return extractEpub(await readZip(filePath, 'EPUB', limits));
    case 'html':
    case 'htm': return extractHtml(filePath);
    case 'csv': return { text: csvText(decodeText(await readFile(filePath))) };
    case 'json': return { text: jsonText(decodeText(await readFile(filePath))) };
    case 'xml': return { text: xmlText(decodeText(await readFile(filePath))) };
    case 'yaml':
    case 'yml': return { text: yamlText(decodeText(await readFile(filePath))) };
    default:
      if (isPlainText(ext)) return { text: decodeText(await readFile(filePath)) };
      throw new UnreadableDocument(`files of type .${ext || '(none)'} are not supported`);
  }
}

// ---- text helpers -------------------------------------------------------------------------------

/** A cell's lines joined by single spaces, each trimmed (blank lines dropped). */
const joinLines = (value: string) =>
  value
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .join(' ');

/** N of `ppt/slides/slideN.xml`. */
const slideNumber = (name: string) => Number(name.slice(name.lastIndexOf('slide') + 5, -'.xml'.length));

const errorMessage = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0]!.slice(0, 300);

// ---- Office Open XML ------------------------------------------------------------------------------

/** A .docx, .pptx or .xlsx file (also what LibreOffice makes of an Office 97-2003 file). */
export async function extractOfficeOpenXml(filePath: string, kind: 'docx' | 'pptx' | 'xlsx', limits: ZipBounds = defaultExtractionLimits): Promise<Extracted> {
  switch (kind) {
    case 'docx': return extractDocx(filePath, limits);
    case 'pptx': return extractPptx(await readZip(filePath, 'PowerPoint (.pptx)', limits));
    case 'xlsx': return extractXlsx(await readZip(filePath, 'Excel (.xlsx)', limits));
  }
}

/**
 * mammoth inflates a DOCX again by itself, without bounds; so it is given a new package holding
 * only the parts already read within the limits, stored uncompressed: it cannot inflate anything.
 */
async function extractDocx(filePath: string, limits: ZipBounds): Promise<Extracted> {
  const zip = await readZip(filePath, 'Word (.docx)', limits);
  if (!zip.has('word/document.xml')) throw new UnreadableDocument('the Word (.docx) file has no document part (word/document.xml); it is damaged or not a Word document');
  const checked = zipSync(zip.files, { level: 0 });
  let text: string;
  try {
    text = (await mammoth.extractRawText({ buffer: Buffer.from(checked.buffer, checked.byteOffset, checked.byteLength) })).value;
  } catch (err) {
    throw new UnreadableDocument(`the Word (.docx) file cannot be read: ${errorMessage(err)}`);
  }
  return { text, title: coreTitle(zip) };
}

// ---- ZIP and XML --------------------------------------------------------------------------------

/** The parts of a ZIP file that were read (within the limits), as text or XML. */
class ZipParts {
  constructor(readonly files: Record<string, Uint8Array>, readonly kind: string) {}
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

/** Only XML/HTML parts matter; images, fonts and media are never inflated. */
const isTextPart = (name: string) => /\.(?:xml|rels|x?html?|opf|ncx)$/i.test(name) || name === 'mimetype';

async function readZip(filePath: string, kind: string, limits: ZipBounds): Promise<ZipParts> {
  const what = `the ${kind} file`;
  try {
    const zip = await BoundedZip.open(filePath, { maxEntries: limits.zipMaxEntries, maxInflatedBytes: limits.zipMaxInflatedBytes }, what);
    const files: Record<string, Uint8Array> = {};
    for (const name of zip.names().filter(isTextPart)) files[name] = (await zip.read(name))!;
    return new ZipParts(files, kind);
  } catch (err) {
    if (err instanceof ZipRefused) throw new UnreadableDocument(err.message);
    throw err;
  }
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
      .sort((a, b) => slideNumber(a) - slideNumber(b));
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
        cells[col] = joinLines(value);
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
    .map((row) => row.map(joinLines))
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
