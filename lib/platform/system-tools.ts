/**
 * Every command-line tool the services run, with the Debian package of scripts/runtime-packages.txt
 * that brings it. `runTool` accepts only these names, and test/deploy/system-tools.test.ts checks
 * that each package is in that list (which the production image installs) and really provides the
 * tool: a tool the code calls cannot be missing from a deployed image.
 */
export const systemTools = {
  pdftotext: { package: 'poppler-utils' },
  pdfinfo: { package: 'poppler-utils' },
  pdftoppm: { package: 'poppler-utils' },
  antiword: { package: 'antiword' },
  catdoc: { package: 'catdoc' },
  xls2csv: { package: 'catdoc' },
  catppt: { package: 'catdoc' },
  soffice: { package: 'libreoffice-writer-nogui' },
  tesseract: { package: 'tesseract-ocr' },
  ffmpeg: { package: 'ffmpeg' },
  ffprobe: { package: 'ffmpeg' },
  pocketsphinx_continuous: { package: 'pocketsphinx' },
  /** The CLI of pocketsphinx 5.x, used where it replaces pocketsphinx_continuous (not Debian bookworm). */
  pocketsphinx: { package: 'pocketsphinx', alternativeTo: 'pocketsphinx_continuous' },
  /** festival's synthesizer; the HTS voice it speaks with is festvox-us-slt-hts (else flite stands in). */
  text2wave: { package: 'festival' },
  flite: { package: 'flite' },
  'espeak-ng': { package: 'espeak-ng' },
  /** Japanese kanji to kana, which espeak-ng can then read. */
  kakasi: { package: 'kakasi' },
  /** Sets the memory, CPU-time and file-size limits every tool runs under (runTool starts each tool through it). */
  prlimit: { package: 'util-linux' },
} as const satisfies Record<string, { package: string; alternativeTo?: string }>;

export type SystemTool = keyof typeof systemTools;

/**
 * LibreOffice (`soffice`) converts each Office 97-2003 kind with the import filter of one of its
 * modules and saves it with that module's Office Open XML export filter; Debian ships each module,
 * with its filters, in a package of its own (`soffice` itself comes with the Writer one). The
 * conversion names the export filter; test/deploy/system-tools.test.ts checks that every package is
 * in the runtime list and that its registry declares both filters.
 */
export const libreOfficeModules = {
  doc: { package: 'libreoffice-writer-nogui', importFilter: 'MS Word 97', target: 'docx', exportFilter: 'MS Word 2007 XML' },
  xls: { package: 'libreoffice-calc-nogui', importFilter: 'MS Excel 97', target: 'xlsx', exportFilter: 'Calc MS Excel 2007 XML' },
  ppt: { package: 'libreoffice-impress-nogui', importFilter: 'MS PowerPoint 97', target: 'pptx', exportFilter: 'Impress MS PowerPoint 2007 XML' },
} as const satisfies Record<string, { package: string; importFilter: string; target: string; exportFilter: string }>;
