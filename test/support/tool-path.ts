import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { systemTools, type SystemTool } from '../../lib/platform/system-tools.js';

/**
 * A PATH for a worker process on which one system tool is different, for testing what the code
 * does when a tool is missing, fails or is too slow (LibreOffice's fallbacks and time limit):
 * - `without`: the PATH is `dir` alone, holding links to every other tool of
 *   lib/platform/system-tools.ts that is installed here (as on a server lacking that package);
 * - `standIns`: scripts under the tools' names in `dir`, which comes first on the usual PATH.
 */
export function toolPath(dir: string, options: { without?: SystemTool[]; standIns?: Partial<Record<SystemTool, string>> }): string {
  fs.mkdirSync(dir, { recursive: true });
  for (const [tool, script] of Object.entries(options.standIns ?? {})) {
    fs.writeFileSync(path.join(dir, tool), script, { mode: 0o755 });
  }
  if (!options.without?.length) return `${dir}:${process.env.PATH ?? ''}`;
  for (const tool of Object.keys(systemTools) as SystemTool[]) {
    if (options.without.includes(tool) || options.standIns?.[tool] !== undefined) continue;
    let installed: string;
    try {
      installed = execFileSync('which', [tool], { encoding: 'utf8' }).trim();
    } catch {
      continue; // not installed here either (e.g. the pocketsphinx 5 CLI)
    }
    fs.symlinkSync(installed, path.join(dir, tool));
  }
  return dir;
}

/** Whether a process is still running (a zombie waiting for its parent is not). */
export function processRunning(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}
