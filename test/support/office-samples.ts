import yazl from 'yazl';

/**
 * Office Open XML and EPUB packages built from minimal valid parts, as real files of their format
 * for the extractor and pipeline tests.
 */

/** A ZIP of text parts. */
export function zip(parts: Record<string, string>): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const z = new yazl.ZipFile();
    for (const [partName, text] of Object.entries(parts)) z.addBuffer(Buffer.from(text), partName);
    z.end();
    const chunks: Buffer[] = [];
    z.outputStream.on('data', (c: Buffer) => chunks.push(c)).on('end', () => resolve(Buffer.concat(chunks))).on('error', reject);
  });
}

export const contentTypes = (overrides: Record<string, string>) =>
  `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
${Object.entries(overrides).map(([p, t]) => `<Override PartName="/${p}" ContentType="${t}"/>`).join('\n')}
</Types>`;

export const rels = (list: Array<[string, string, string]>) =>
  `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
${list.map(([id, type, target]) => `<Relationship Id="${id}" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/${type}" Target="${target}"/>`).join('\n')}
</Relationships>`;

const core = (title: string) =>
  `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>${title}</dc:title></cp:coreProperties>`;

const W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"';
export function docx(paragraphs: string[]): Promise<Buffer> {
  return zip({
    '[Content_Types].xml': contentTypes({ 'word/document.xml': 'application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml' }),
    '_rels/.rels': rels([['rId1', 'officeDocument', 'word/document.xml'], ['rId2', 'metadata/core-properties', 'docProps/core.xml']]),
    'docProps/core.xml': core('Docx Title'),
    'word/document.xml': `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document ${W}><w:body>${paragraphs.map((p) => `<w:p><w:r><w:t xml:space="preserve">${p}</w:t></w:r></w:p>`).join('')}<w:sectPr/></w:body></w:document>`,
  });
}

const P = 'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"';
export function pptx(slides: string[][]): Promise<Buffer> {
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
  return zip(parts);
}

const S = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"';
export function xlsx(sheets: Array<{ name: string; rows: string }>, shared: string[]): Promise<Buffer> {
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
  return zip(parts);
}

export function epub(chapters: Array<{ id: string; html: string }>, spine: string[]): Promise<Buffer> {
  return zip({
    mimetype: 'application/epub+zip',
    'META-INF/container.xml': `<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>`,
    'OEBPS/content.opf': `<?xml version="1.0" encoding="UTF-8"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">x</dc:identifier><dc:title>The Sample Book</dc:title><dc:language>en</dc:language></metadata><manifest>${chapters
      .map((c) => `<item id="${c.id}" href="text/${c.id}.xhtml" media-type="application/xhtml+xml"/>`)
      .join('')}</manifest><spine>${spine.map((id) => `<itemref idref="${id}"/>`).join('')}</spine></package>`,
    ...Object.fromEntries(chapters.map((c) => [`OEBPS/text/${c.id}.xhtml`, `<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>${c.id}</title></head><body>${c.html}</body></html>`])),
  });
}
