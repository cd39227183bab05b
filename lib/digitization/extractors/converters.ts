import { runTool, ToolFailed, type ToolLimits } from '../../platform/child-process.js';
import { systemTools, type SystemTool } from '../../platform/system-tools.js';
import { UnreadableDocument } from './types.js';

/** Time a command-line converter may take on one file. */
export const TOOL_TIMEOUT_MS = 120_000;
/** Largest text a converter may print, and largest uncompressed part read from a ZIP. */
export const MAX_OUTPUT_BYTES = 256 * 1024 * 1024;

/** UTF-8 (or UTF-16 with a BOM); the BOM is dropped. Invalid UTF-8 is read as Windows-1252. */
export function decodeText(buf: Buffer): string {
  if (buf[0] === 0xff && buf[1] === 0xfe) return new TextDecoder('utf-16le').decode(buf);
  if (buf[0] === 0xfe && buf[1] === 0xff) return new TextDecoder('utf-16be').decode(buf);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(buf); // drops a UTF-8 BOM
  } catch {
    return new TextDecoder('windows-1252').decode(buf);
  }
}

/**
 * Runs a converter and returns its standard output as text. Its failures become UnreadableDocument
 * naming `what` (the reason a user reads in processing_error), except a missing tool, which is the
 * server's fault: that one is thrown as it is, so the step is retried on a worker that has it.
 */
export async function runConverter(tool: SystemTool, args: string[], what: string, limits: Partial<ToolLimits> = {}): Promise<string> {
  const timeoutMs = limits.timeoutMs ?? TOOL_TIMEOUT_MS;
  try {
    const { stdout } = await runTool(tool, args, { maxOutputBytes: MAX_OUTPUT_BYTES, ...limits, timeoutMs });
    return decodeText(stdout);
  } catch (err) {
    throw unreadable(err, what, tool, timeoutMs);
  }
}

/** The reason a tool's failure gives the user; a missing tool stays a (retryable) server error. */
export function unreadable(err: unknown, what: string, tool: SystemTool, timeoutMs: number): Error {
  if (!(err instanceof ToolFailed)) return err as Error;
  switch (err.kind) {
    case 'missing':
      return new ToolFailed(`${what} cannot be read here: the server lacks ${tool} (Debian package ${systemTools[tool].package})`, 'missing');
    case 'timeout':
      return new UnreadableDocument(`${what} took too long to read (over ${Math.round(timeoutMs / 1000)} s)`);
    case 'output_too_large':
      return new UnreadableDocument(`${what} holds too much text`);
    case 'memory_limit':
      return new UnreadableDocument(`${what} needs more memory to read than a converter may use (${err.message}); it may be a decompression bomb`);
    case 'cpu_limit':
      return new UnreadableDocument(`${what} needs more processing time to read than a converter may use (${err.message})`);
    case 'file_too_large':
      return new UnreadableDocument(`${what} expands to more data than a converter may write (${err.message}); it may be a decompression bomb`);
    case 'failed': {
      const detail = err.stderr.trim().split('\n')[0]?.slice(0, 300) || err.message;
      return new UnreadableDocument(`${what} cannot be read (damaged, encrypted or not really that format): ${detail}`);
    }
  }
}
