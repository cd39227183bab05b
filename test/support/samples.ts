import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/** Small real sample files that tests generate instead of shipping binaries. */

/** A page of a generated PDF: lines drawn with Helvetica (none: no text), or a scanned image (JPEG). */
export type PdfPage = { lines: string[] } | { jpeg: Buffer; width: number; height: number };

/** A one-page PDF; `lines` drawn with Helvetica (none: a page without text). */
export function pdf(lines: string[], title?: string): Buffer {
  return pdfOf([{ lines }], title);
}

/**
 * A PDF of the given pages, with a correct xref table: text pages have a text layer, image pages
 * are what a scanner makes (one JPEG filling the page, no text layer).
 */
export function pdfOf(pages: PdfPage[], title?: string): Buffer {
  const esc = (s: string) => s.replace(/[\\()]/g, (c) => `\\${c}`);
  const objects: Buffer[] = [];
  const add = (body: string | Buffer) => objects.push(typeof body === 'string' ? Buffer.from(body, 'latin1') : body) + 0;
  const stream = (dict: string, data: Buffer) => Buffer.concat([Buffer.from(`${dict.replace('%LEN%', String(data.length))}\nstream\n`, 'latin1'), data, Buffer.from('\nendstream', 'latin1')]);
  add('<< /Type /Catalog /Pages 2 0 R >>');
  add(''); // the page tree, once the page objects are known
  add('<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>');
  add(`<< /Title (${esc(title ?? '')}) >>`);
  const kids: number[] = [];
  for (const page of pages) {
    if ('lines' in page) {
      const content = page.lines.length ? `BT /F1 12 Tf 72 720 Td 14 TL ${page.lines.map((l) => `(${esc(l)}) Tj T*`).join(' ')} ET` : '0 0 1 rg 10 10 50 50 re f';
      const contents = add(stream('<< /Length %LEN% >>', Buffer.from(content, 'latin1')));
      kids.push(add(`<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents ${contents} 0 R /Resources << /Font << /F1 3 0 R >> >> >>`));
    } else {
      const image = add(stream(`<< /Type /XObject /Subtype /Image /Width ${page.width} /Height ${page.height} /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /DCTDecode /Length %LEN% >>`, page.jpeg));
      const contents = add(stream('<< /Length %LEN% >>', Buffer.from('q 612 0 0 792 0 0 cm /Im0 Do Q', 'latin1')));
      kids.push(add(`<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents ${contents} 0 R /Resources << /XObject << /Im0 ${image} 0 R >> >> >>`));
    }
  }
  objects[1] = Buffer.from(`<< /Type /Pages /Kids [${kids.map((k) => `${k} 0 R`).join(' ')}] /Count ${kids.length} >>`, 'latin1');
  const parts: Buffer[] = [Buffer.from('%PDF-1.4\n', 'latin1')];
  const offsets: number[] = [];
  let length = parts[0]!.length;
  objects.forEach((body, i) => {
    offsets.push(length);
    const obj = Buffer.concat([Buffer.from(`${i + 1} 0 obj\n`, 'latin1'), body, Buffer.from('\nendobj\n', 'latin1')]);
    parts.push(obj);
    length += obj.length;
  });
  let trailer = `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const o of offsets) trailer += `${String(o).padStart(10, '0')} 00000 n \n`;
  trailer += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R /Info 4 0 R >>\nstartxref\n${length}\n%%EOF\n`;
  parts.push(Buffer.from(trailer, 'latin1'));
  return Buffer.concat(parts);
}

function run(cmd: string, args: string[], cwd?: string): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile(cmd, args, { timeout: 180_000, cwd }, (err, _stdout, stderr) => (err ? reject(new Error(`${cmd}: ${stderr || err.message}`)) : resolve())),
  );
}

const FONT = '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf';

/** What a scanner makes of a page with these lines: a JPEG (ffmpeg drawtext, DejaVu Sans), 1240x1754 (150 dpi A4). */
export async function scannedPage(lines: string[]): Promise<{ jpeg: Buffer; width: number; height: number }> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sample-scan-'));
  try {
    const textFiles = await Promise.all(lines.map(async (line, i) => {
      const file = path.join(dir, `line-${i}.txt`);
      await fs.writeFile(file, line);
      return file;
    }));
    const draw = textFiles.map((file, i) => `drawtext=fontfile=${FONT}:textfile=${file}:fontsize=34:fontcolor=black:x=90:y=${140 + i * 70}`).join(',');
    const out = path.join(dir, 'page.jpg');
    await run('ffmpeg', ['-nostdin', '-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'color=c=white:s=1240x1754', '-frames:v', '1', '-vf', draw, '-q:v', '3', out]);
    return { jpeg: await fs.readFile(out), width: 1240, height: 1754 };
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/**
 * A real Office 97-2003 file made by LibreOffice from content the test knows: a .doc from text, a
 * .xls from CSV, a .ppt from a presentation with one text box per slide (flat ODF XML).
 */
export async function legacyOfficeFile(kind: 'doc' | 'xls' | 'ppt', content: string | string[], dir: string): Promise<string> {
  const work = await fs.mkdtemp(path.join(dir, `office-${kind}-`));
  const xml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const source =
    kind === 'doc' ? { name: 'source.txt', data: content as string }
    : kind === 'xls' ? { name: 'source.csv', data: content as string }
    : {
        name: 'source.fodp',
        data: `<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.presentation">
<office:body><office:presentation>${(content as string[]).map((slide, i) => `<draw:page draw:name="s${i + 1}"><draw:frame svg:x="2cm" svg:y="2cm" svg:width="20cm" svg:height="3cm"><draw:text-box><text:p>${xml(slide)}</text:p></draw:text-box></draw:frame></draw:page>`).join('')}</office:presentation></office:body>
</office:document>`,
      };
  await fs.writeFile(path.join(work, source.name), source.data);
  const profile = pathToFileURL(path.join(work, 'profile')).href;
  await run('soffice', [`-env:UserInstallation=${profile}`, '--headless', '--norestore', '--convert-to', kind, '--outdir', work, source.name], work);
  return path.join(work, `source.${kind}`);
}

/**
 * Deterministic prose of at least `chars` characters: paragraphs in several scripts with headings,
 * numbers, code, quotes, contractions, lists and indentation (what a large uploaded document holds).
 */
export function longProse(chars: number): string {
  const sentences = [
    'Rivers carry sediment to the sea, and deltas grow where the current slows.',
    "It's the farmers' oldest rule: don't plant before the floods have passed!",
    '"Why," she asked, "would anyone measure 1,250 metres twice?"',
    'Der Fluss trägt Schlamm ins Meer; die Ärzte überprüfen 42 Proben.',
    'El río lleva sedimentos al mar, y los deltas crecen cada año.',
    '河流把泥沙带到海里，三角洲每年都在增长。',
    'Реки несут осадки в море, и дельты растут.',
    'Run `npm install` then /usr/bin/env node script.js -- see https://example.com/a?b=1.',
    '...and then, after 3.5 hours, the gauge read 12.75 m (a record).',
    'Ünïcödé letters, emoji 😀 and symbols (±5 %) all appear here.',
  ];
  const out: string[] = [];
  let length = 0;
  for (let i = 0; length < chars; i++) {
    const picked = Array.from({ length: 3 + (i % 5) }, (_, k) => sentences[(i * 7 + k * 3) % sentences.length]!);
    const paragraph =
      i % 11 === 0 ? `## Section ${i / 11 + 1}` : i % 7 === 0 ? picked.map((s) => `- ${s}`).join('\n') : i % 13 === 0 ? `    ${picked.join('\n    ')}` : picked.join(i % 2 ? ' ' : '\n');
    out.push(paragraph);
    length += paragraph.length + 2;
  }
  return out.join('\n\n');
}
