import { spawn } from 'node:child_process';
import fs from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import type { SystemTool } from './system-tools.js';

/**
 * A command-line tool that did not do its job:
 * - `missing`: not installed (a server problem, worth retrying elsewhere);
 * - `timeout`: killed (SIGKILL) after its time bound;
 * - `output_too_large`: printed more than its output bound;
 * - `memory_limit`: needed more memory than a tool may have (TOOL_MAX_MEMORY_MB);
 * - `cpu_limit`: used more CPU time than its time bound (a tool running on several cores);
 * - `file_too_large`: wrote a file larger than a tool may write (TOOL_MAX_FILE_MB);
 * - `failed`: it ran and refused its input (often the input's fault); `stderr` says why.
 * The three limits are the input's fault too (a decompression bomb, a page of absurd size).
 */
export type ToolFailureKind = 'missing' | 'timeout' | 'output_too_large' | 'memory_limit' | 'cpu_limit' | 'file_too_large' | 'failed';

export class ToolFailed extends Error {
  override name = 'ToolFailed';
  constructor(
    message: string,
    readonly kind: ToolFailureKind,
    readonly stderr = '',
  ) {
    super(message);
  }
}

/** A failure that is the input's fault: the tool refused it, or the input drove it past a resource limit. */
export const isInputFailure = (err: unknown): err is ToolFailed =>
  err instanceof ToolFailed && (err.kind === 'failed' || err.kind === 'memory_limit' || err.kind === 'cpu_limit' || err.kind === 'file_too_large');

export interface ToolLimits {
  timeoutMs: number;
  /** Largest standard output accepted (default 64 MiB). */
  maxOutputBytes?: number;
  /**
   * Kill the tool's whole process group at the time bound: for tools that start helpers of their
   * own (LibreOffice), which would outlive a killed parent.
   */
  killProcessGroup?: boolean;
  /** Extra environment variables. */
  env?: Record<string, string>;
  /** Written to the tool's standard input, which is then closed (default: no input). */
  input?: string | Buffer;
  /** Aborting kills the tool (SIGKILL); the promise rejects with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * Resource limits of every child process, set by the kernel (setrlimit, through util-linux's
 * `prlimit`, which then executes the tool itself: same process, same pid): its address space
 * (RLIMIT_AS, `maxMemoryBytes`), the largest file it may write (RLIMIT_FSIZE), no core dumps, and
 * CPU time (RLIMIT_CPU) equal to its wall-time bound, so a tool busy on several cores cannot use
 * more processor time than its time bound either. cgroups are not needed (nor available here).
 */
export interface ToolResourceLimits {
  maxMemoryBytes: number;
  maxFileBytes: number;
}

let resourceLimits: ToolResourceLimits = { maxMemoryBytes: 2048 * 1024 * 1024, maxFileBytes: 2048 * 1024 * 1024 };

/** Sets the limits of every child process this process starts (lib/services.ts, from TOOL_MAX_MEMORY_MB and TOOL_MAX_FILE_MB). */
export function configureToolLimits(limits: ToolResourceLimits): void {
  resourceLimits = { ...limits };
}

/** prlimit by absolute path: a PATH narrowed for the tools (tests of missing tools) must not lose it. */
const prlimitPath = ['/usr/bin/prlimit', '/bin/prlimit'].find((p) => {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
});

/** Whether child processes run under the kernel limits (prlimit is installed: util-linux). */
export const toolLimitsEnforced = (): boolean => prlimitPath !== undefined;

/** The command line that starts `cmd` under its limits. */
function limitedCommand(cmd: string, args: string[], timeoutMs: number, limits: ToolResourceLimits = resourceLimits): { file: string; argv: string[] } {
  if (!prlimitPath) return { file: cmd, argv: args };
  const cpu = Math.max(1, Math.ceil(timeoutMs / 1000));
  return {
    file: prlimitPath,
    // soft < hard CPU limit: SIGXCPU at the soft one, which names the cause (SIGKILL at the hard one would not).
    argv: [`--as=${limits.maxMemoryBytes}`, `--fsize=${limits.maxFileBytes}`, `--cpu=${cpu}:${cpu + 1}`, '--core=0', '--', cmd, ...args],
  };
}

const memoryMessage = /out of memory|bad_alloc|cannot allocate|memory exhausted|not enough memory|failed to allocate|insufficient memory|enomem|malloc|alloc(?:ation)? fail|failed to map segment/i;

/**
 * Why a tool that ran under its limits stopped, when a limit stopped it: a limit's signal, or a
 * failed allocation (a tool that cannot get memory says so, aborts or crashes).
 */
function limitFailure(cmd: string, code: number | null, signal: NodeJS.Signals | null, stderr: string, timeoutMs: number): ToolFailed | null {
  if (!prlimitPath) return null;
  if (code === 127 && /failed to execute/i.test(stderr)) return new ToolFailed(`${cmd} is not installed`, 'missing');
  if (signal === 'SIGXCPU') {
    return new ToolFailed(`${cmd} used more than its ${Math.max(1, Math.ceil(timeoutMs / 1000))} s of CPU time`, 'cpu_limit', stderr);
  }
  if (signal === 'SIGXFSZ') return new ToolFailed(`${cmd} wrote a file larger than ${Math.round(resourceLimits.maxFileBytes / 1024 / 1024)} MiB`, 'file_too_large', stderr);
  if (signal === 'SIGABRT' || signal === 'SIGSEGV' || signal === 'SIGBUS' || ((code ?? 0) !== 0 && memoryMessage.test(stderr))) {
    return new ToolFailed(`${cmd} needed more than the ${Math.round(resourceLimits.maxMemoryBytes / 1024 / 1024)} MiB of memory a tool may use`, 'memory_limit', stderr);
  }
  return null;
}

/**
 * Runs a tool (one of lib/platform/system-tools.ts) with a time bound, bounded output and the
 * kernel limits above: the one way this code base starts a child process. Past its time bound the
 * tool is killed with SIGKILL (with `killProcessGroup`, its whole process group).
 */
export function runTool(cmd: SystemTool, args: string[], limits: ToolLimits): Promise<{ stdout: Buffer; stderr: string }> {
  const maxOutput = limits.maxOutputBytes ?? 64 * 1024 * 1024;
  const command = limitedCommand(cmd, args, limits.timeoutMs);
  return new Promise((resolve, reject) => {
    const child = spawn(command.file, command.argv, {
      stdio: [limits.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      detached: limits.killProcessGroup ?? false,
      ...(limits.env ? { env: { ...process.env, ...limits.env } } : {}),
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outBytes = 0;
    let errBytes = 0;
    let failure: unknown = null;
    const kill = () => {
      try {
        if (limits.killProcessGroup && child.pid) process.kill(-child.pid, 'SIGKILL');
        else child.kill('SIGKILL');
      } catch {
        // already gone
      }
    };
    const stderrText = () => Buffer.concat(err).toString('utf8');
    const timer = setTimeout(() => {
      failure ??= new ToolFailed(`${cmd} did not finish within ${Math.round(limits.timeoutMs / 1000)} s`, 'timeout', stderrText());
      kill();
    }, Math.ceil(limits.timeoutMs));
    const onAbort = () => {
      failure ??= limits.signal!.reason;
      kill();
    };
    if (limits.signal?.aborted) onAbort();
    else limits.signal?.addEventListener('abort', onAbort, { once: true });
    const finish = () => {
      clearTimeout(timer);
      limits.signal?.removeEventListener('abort', onAbort);
    };
    child.stdout!.on('data', (chunk: Buffer) => {
      outBytes += chunk.length;
      if (outBytes > maxOutput) {
        failure ??= new ToolFailed(`${cmd} printed more than its output limit`, 'output_too_large', stderrText());
        kill();
      } else out.push(chunk);
    });
    child.stderr!.on('data', (chunk: Buffer) => {
      // Only the end of stderr is ever shown; keep a bounded amount.
      errBytes += chunk.length;
      err.push(chunk);
      while (errBytes > 1024 * 1024 && err.length > 1) errBytes -= err.shift()!.length;
    });
    child.on('error', (e: NodeJS.ErrnoException) => {
      finish();
      reject(e.code === 'ENOENT' ? new ToolFailed(`${cmd} is not installed`, 'missing') : e);
    });
    child.on('close', (code, signal) => {
      finish();
      if (failure) return reject(failure);
      const stderr = stderrText();
      if (code === 0) return resolve({ stdout: Buffer.concat(out), stderr });
      const limited = limitFailure(cmd, code, signal, stderr, limits.timeoutMs);
      if (limited) return reject(limited);
      reject(new ToolFailed(`${cmd} failed: ${stderrTail(stderr) || (signal ? `killed by ${signal}` : `exit code ${code}`)}`, 'failed', stderr));
    });
    if (child.stdin) {
      // A tool that exits without reading all of its input closes the pipe: that is its answer, not ours.
      child.stdin.on('error', () => undefined);
      child.stdin.end(limits.input);
    }
  });
}

const stderrTail = (stderr: string) => stderr.trim().split('\n').slice(-3).join(' ');

/** A tool started by streamTool: its pipes, and how it ended. */
export interface StreamingTool {
  /** Standard input (ended by the caller). */
  stdin: Writable;
  /** Standard output, read as it is produced. */
  stdout: Readable;
  /** Resolves when the tool exited with 0; rejects with a ToolFailed (or the abort reason) otherwise. */
  done: Promise<void>;
  /** Kills the tool (SIGKILL); `done` then rejects unless it had already ended. */
  kill(): void;
}

/**
 * Starts a tool whose output is consumed while it runs (audio encoders and decoders, speech
 * engines): the streaming sibling of runTool, with the same time bound (SIGKILL), an abort
 * signal, and the same failure kinds. Standard error is kept (its last 64 KiB) for the message.
 */
export function streamTool(cmd: SystemTool, args: string[], limits: { timeoutMs: number; signal?: AbortSignal }): StreamingTool {
  const command = limitedCommand(cmd, args, limits.timeoutMs);
  const child = spawn(command.file, command.argv, { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString('utf8')).slice(-65536);
  });
  child.stdin.on('error', () => undefined);
  let timedOut = false;
  let killed = false;
  const kill = () => {
    killed = true;
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  const timer = setTimeout(() => {
    timedOut = true;
    kill();
  }, limits.timeoutMs);
  const onAbort = () => kill();
  limits.signal?.addEventListener('abort', onAbort, { once: true });
  const done = new Promise<void>((resolve, reject) => {
    child.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      limits.signal?.removeEventListener('abort', onAbort);
      reject(err.code === 'ENOENT' ? new ToolFailed(`${cmd} is not installed`, 'missing') : new ToolFailed(`${cmd} failed: ${err.message}`, 'failed'));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      limits.signal?.removeEventListener('abort', onAbort);
      if (code === 0) return resolve();
      if (limits.signal?.aborted) return reject(limits.signal.reason);
      if (timedOut) return reject(new ToolFailed(`${cmd} did not finish within ${Math.round(limits.timeoutMs / 1000)} s`, 'timeout', stderr));
      const limited = killed ? null : limitFailure(cmd, code, signal, stderr, limits.timeoutMs);
      if (limited) return reject(limited);
      reject(new ToolFailed(`${cmd} failed: ${stderrTail(stderr) || `exit ${code ?? signal}`}`, 'failed', stderr));
    });
  });
  // Callers that stop listening early must not crash the process with an unhandled rejection.
  done.catch(() => undefined);
  return { stdin: child.stdin, stdout: child.stdout, done, kill };
}

/** Whether a process with this pid runs (one of another user's, which we may not signal, included). */
export function processRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
