import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { libreOfficeModules, systemTools, type SystemTool } from '../../lib/platform/system-tools.js';
import { ocrLanguages, osdDebianPackage } from '../../lib/digitization/ocr.js';
import { supportedBm25Languages } from '../../lib/retrieval/language-analysis.js';

/**
 * The production image installs exactly scripts/runtime-packages.txt (test/deploy/compose.test.ts
 * checks the Dockerfile). Here: every tool the code may run, every OCR language, and the LibreOffice
 * module of every Office 97-2003 kind comes from a package of that list, and on this machine (set up
 * from the same list) the tool's file really belongs to that package or to one it depends on, and
 * the module's package really declares the filters the conversion uses.
 */
const runtimePackages = fs
  .readFileSync(fileURLToPath(new URL('../../scripts/runtime-packages.txt', import.meta.url)), 'utf8')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'));

const sh = (cmd: string, args: string[]) => execFileSync(cmd, args, { encoding: 'utf8' });

const dependencyClosure = new Map<string, Set<string>>();
function providedBy(pkg: string): Set<string> {
  let closure = dependencyClosure.get(pkg);
  if (!closure) {
    const out = sh('apt-cache', ['depends', '--recurse', '--no-recommends', '--no-suggests', '--no-conflicts', '--no-breaks', '--no-replaces', '--no-enhances', '--installed', pkg]);
    closure = new Set(out.split('\n').filter((l) => l && !l.startsWith(' ')).map((l) => l.trim()));
    dependencyClosure.set(pkg, closure);
  }
  return closure;
}

function installedPath(tool: string): string | null {
  try {
    return fs.realpathSync(sh('which', [tool]).trim());
  } catch {
    return null;
  }
}

describe('system tools and the runtime package list', function () {
  this.timeout(60_000);

  for (const [tool, entry] of Object.entries(systemTools) as Array<[SystemTool, { package: string; alternativeTo?: SystemTool }]>) {
    it(`${tool} comes from ${entry.package}, which the runtime list installs`, () => {
      assert.ok(runtimePackages.includes(entry.package), `${entry.package} (for ${tool}) is missing from scripts/runtime-packages.txt`);
      const file = installedPath(tool);
      if (!file) {
        assert.ok(entry.alternativeTo && installedPath(entry.alternativeTo), `${tool} is not installed, nor an alternative to it`);
        return;
      }
      const owner = sh('dpkg', ['-S', file]).split(':')[0]!.trim();
      assert.ok(providedBy(entry.package).has(owner), `${file} belongs to ${owner}, which ${entry.package} does not bring`);
    });
  }

  for (const [kind, module] of Object.entries(libreOfficeModules)) {
    it(`LibreOffice converts .${kind} with the filters of ${module.package}, which the runtime list installs`, () => {
      assert.ok(runtimePackages.includes(module.package), `${module.package} (LibreOffice's filters for .${kind}) is missing from scripts/runtime-packages.txt`);
      // The package's own configuration registry (share/.registry/*.xcd) is where LibreOffice finds the filters it brings.
      const registries = sh('dpkg', ['-L', module.package]).split('\n').filter((f) => f.endsWith('.xcd'));
      assert.ok(registries.length > 0, `${module.package} brings no LibreOffice registry`);
      const declared = registries.map((f) => fs.readFileSync(f, 'utf8')).join('\n');
      for (const filter of [module.importFilter, module.exportFilter]) {
        assert.ok(declared.includes(`oor:name="${filter}"`), `${module.package} does not declare the filter "${filter}" that converting .${kind} to .${module.target} needs`);
      }
    });
  }

  it('every BM25 language has OCR data, from a package of the runtime list, installed here', () => {
    const installed = new Set(sh('tesseract', ['--list-langs']).split('\n').slice(1).map((l) => l.trim()));
    for (const { code } of supportedBm25Languages) {
      const ocr = ocrLanguages[code];
      assert.ok(ocr, `no OCR language for ${code}`);
      assert.ok(runtimePackages.includes(ocr.debianPackage), `${ocr.debianPackage} is missing from scripts/runtime-packages.txt`);
      assert.ok(installed.has(ocr.tesseract), `tesseract has no ${ocr.tesseract} data`);
    }
    assert.ok(runtimePackages.includes(osdDebianPackage));
    assert.ok(installed.has('osd'), 'script detection needs the osd data');
  });
});
