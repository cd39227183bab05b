import { open, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { runTool, ToolFailed } from '../../platform/child-process.js';
import { libreOfficeModules } from '../../platform/system-tools.js';
import { runConverter } from './converters.js';
import { extractOfficeOpenXml } from './documents.js';
import { UnreadableDocument, type Extracted } from './types.js';
import { makeScratchDir } from '../../platform/scratch.js';

/**
 * Office 97-2003 files (.doc, .xls, .ppt): converted by LibreOffice (headless, Debian's `-nogui`
 * packages) into the Office Open XML format of the same kind, which the OOXML extractors read.
 * LibreOffice reads what the old command-line readers cannot (e.g. a .ppt saved by LibreOffice,
 * from which catppt reads nothing). Conversions run one at a time per worker process, each with a
 * time limit (its whole process group is killed past it) and in a profile directory of this
 * process's own, which is thrown away after a failed conversion. When LibreOffice is missing or
 * fails, antiword / catdoc / xls2csv / catppt are tried as before; when they read nothing either,
 * the reason LibreOffice gave is the document's (a missing LibreOffice stays a server problem,
 * retried, never "contains no text").
 */
const kinds = {
  doc: { what: 'the Word 97-2003 document (.doc)', ...libreOfficeModules.doc },
  xls: { what: 'the Excel 97-2003 workbook (.xls)', ...libreOfficeModules.xls },
  ppt: { what: 'the PowerPoint 97-2003 presentation (.ppt)', ...libreOfficeModules.ppt },
} as const;
export type LegacyOfficeKind = keyof typeof kinds;

/** `readConverted` reads LibreOffice's Office Open XML copy (extractors/index.ts: in the bounded thread). */
export async function extractLegacyOffice(
  filePath: string,
  kind: LegacyOfficeKind,
  timeoutMs: number,
  readConverted: (copy: string, target: 'docx' | 'xlsx' | 'pptx') => Promise<Extracted> = (copy, target) => extractOfficeOpenXml(copy, target),
): Promise<Extracted> {
  const { what, target } = kinds[kind];
  await requireOle2(filePath, what);
  let converted: Extracted | null = null;
  let conversionError: unknown = null;
  try {
    converted = await withConvertedCopy(filePath, kind, timeoutMs, (copy) => readConverted(copy, target));
  } catch (err) {
    conversionError = err;
  }
  if (converted && converted.text.trim()) return converted;
  let fallback: Extracted;
  try {
    fallback = await fallbackReader(filePath, kind, what);
  } catch (fallbackError) {
    // Say what LibreOffice said when it failed; it reads more than the fallback does.
    throw conversionError instanceof UnreadableDocument || isLibreOfficeFailure(conversionError) ? conversionError : fallbackError;
  }
  if (fallback.text.trim() || !isLibreOfficeFailure(conversionError)) return fallback;
  // The fallback read nothing, and LibreOffice did not get to read the file: its reason is the one.
  throw conversionError;
}

/** LibreOffice did not convert the file (it failed, could not open it, or ran out of time): the reason is for the user. */
class ConversionFailed extends UnreadableDocument {}

/** A conversion that did not happen (LibreOffice missing, failing, too slow), as opposed to one that found no text. */
const isLibreOfficeFailure = (err: unknown): err is Error => err instanceof ConversionFailed || (err instanceof ToolFailed && err.kind === 'missing');

/** The old command-line readers (Debian `antiword`, `catdoc`). */
async function fallbackReader(filePath: string, kind: LegacyOfficeKind, what: string): Promise<Extracted> {
  switch (kind) {
    case 'doc':
      try {
        return { text: await runConverter('antiword', ['-m', 'UTF-8.txt', '-w', '0', filePath], what) };
      } catch (err) {
        // antiword refuses some files (Word 6/95, "fast saved", RTF renamed .doc); catdoc reads more.
        try {
          return { text: await runConverter('catdoc', ['-d', 'utf-8', '-w', filePath], what) };
        } catch {
          throw err;
        }
      }
    case 'xls':
      return { text: await runConverter('xls2csv', ['-d', 'utf-8', filePath], what) };
    case 'ppt':
      return { text: await runConverter('catppt', ['-d', 'utf-8', filePath], what) };
  }
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

let queue: Promise<unknown> = Promise.resolve();
let profileDir: string | null = null;

/** Runs `read` on a converted copy of the file; conversions of this process wait for each other. */
function withConvertedCopy<T>(filePath: string, kind: LegacyOfficeKind, timeoutMs: number, read: (copy: string) => Promise<T>): Promise<T> {
  const run = queue.then(() => convert(filePath, kind, timeoutMs)).then(async ({ dir, copy }) => {
    try {
      return await read(copy);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
  queue = run.catch(() => undefined);
  return run;
}

async function convert(filePath: string, kind: LegacyOfficeKind, timeoutMs: number): Promise<{ dir: string; copy: string }> {
  const { what, target, exportFilter } = kinds[kind];
  profileDir ??= await makeScratchDir('kb-libreoffice-profile-');
  const dir = await makeScratchDir('kb-libreoffice-');
  try {
    await runTool(
      'soffice',
      [`-env:UserInstallation=${pathToFileURL(profileDir).href}`, '--headless', '--norestore', '--nolockcheck', '--convert-to', `${target}:${exportFilter}`, '--outdir', dir, filePath],
      { timeoutMs, killProcessGroup: true },
    );
    const [copy] = (await readdir(dir)).filter((name) => name.endsWith(`.${target}`));
    if (!copy) throw new ConversionFailed(`${what} cannot be read: LibreOffice could not open it (damaged, encrypted or not really that format)`);
    return { dir, copy: path.join(dir, copy) };
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    // A killed or failed LibreOffice may leave its profile locked or damaged: the next one starts fresh.
    if (profileDir) await rm(profileDir, { recursive: true, force: true });
    profileDir = null;
    throw conversionFailure(err, kind, timeoutMs);
  }
}

/** The reason a failed conversion gives: the time limit, LibreOffice's own complaint, or the package the server lacks. */
function conversionFailure(err: unknown, kind: LegacyOfficeKind, timeoutMs: number): unknown {
  if (err instanceof ConversionFailed || !(err instanceof ToolFailed)) return err;
  const { what, package: debianPackage } = kinds[kind];
  switch (err.kind) {
    case 'timeout':
      return new ConversionFailed(`${what} took too long to convert (LibreOffice, over ${Math.round(timeoutMs / 1000)} s)`);
    case 'missing':
      return new ToolFailed(`${what} cannot be read here: the server lacks LibreOffice (soffice, Debian package ${debianPackage})`, 'missing');
    case 'memory_limit':
    case 'cpu_limit':
    case 'file_too_large':
      return new ConversionFailed(`${what} cannot be read: LibreOffice stopped at a resource limit (${err.message}); it may be a decompression bomb`);
    case 'failed':
    case 'output_too_large': {
      // LibreOffice warns on stderr about things that do not matter here (javaldx, fonts): its last other line says why.
      const said = err.stderr.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('Warning:'));
      const detail = said.at(-1)?.slice(0, 300) ?? (err.kind === 'failed' ? 'it stopped with an error' : 'it printed too much');
      return new ConversionFailed(`${what} cannot be read: LibreOffice failed (${detail})`);
    }
  }
}
