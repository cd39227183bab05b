import { execFile } from 'node:child_process';

/**
 * A command-line tool that failed: `missing` when it is not installed (a server problem), else it
 * ran and refused its input (often the input's fault).
 */
export class ToolFailed extends Error {
  constructor(
    message: string,
    readonly stderr: string,
    readonly missing: boolean,
  ) {
    super(message);
  }
}

/** Runs a tool with a time bound (killed with SIGKILL past it) and bounded output. */
export function runTool(cmd: string, args: string[], timeoutMs: number): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      { timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' },
      (err, stdout, stderr) => {
        if (!err) return resolve({ stdout, stderr });
        const e = err as NodeJS.ErrnoException & { killed?: boolean };
        if (e.code === 'ENOENT') return reject(new ToolFailed(`${cmd} is not installed`, '', true));
        if (e.killed) return reject(new Error(`${cmd} did not finish within ${Math.round(timeoutMs / 1000)} s`));
        const tail = String(stderr).trim().split('\n').slice(-3).join(' ');
        reject(new ToolFailed(`${cmd} failed: ${tail || e.message}`, String(stderr), false));
      },
    );
  });
}
