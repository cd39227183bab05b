import { redactSecrets } from './redact.js';

/**
 * Structured JSON logs, one object per line on stdout, so that any collector can index them. No
 * secret reaches a line: each is passed through redactSecrets (lib/platform/redact.ts).
 *
 * The lines of one event-loop turn go out in one write: at 200 streams the API ends several in a
 * turn, and a write to a file or pipe is a system call each (synchronous on Linux). What a turn
 * leaves pending is written on exit too, so a process that exits or crashes loses no line.
 */
type Level = 'debug' | 'info' | 'warn' | 'error';
const rank: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

export function createLogger(base: Record<string, unknown> = {}, minLevel: Level = 'info'): Logger {
  const emit = (level: Level, msg: string, fields?: Record<string, unknown>) => {
    if (rank[level] < (rank[minLevel] ?? 20)) return;
    const line = { time: new Date().toISOString(), level, msg, ...base, ...fields };
    pendingLines.push(redactSecrets(JSON.stringify(line, errorReplacer)));
    if (pendingLines.length === 1) setImmediate(writePendingLines);
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => createLogger({ ...base, ...fields }, minLevel),
  };
}

let pendingLines: string[] = [];

/** Writes the lines logged so far in one write. */
function writePendingLines(): void {
  if (pendingLines.length === 0) return;
  const lines = pendingLines;
  pendingLines = [];
  process.stdout.write(lines.join('\n') + '\n');
}
process.on('exit', writePendingLines);

function errorReplacer(_key: string, value: unknown) {
  if (value instanceof Error) return { name: value.name, message: value.message, stack: value.stack };
  if (typeof value === 'bigint') return value.toString();
  return value;
}
