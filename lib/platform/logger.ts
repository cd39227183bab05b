import { redactSecrets } from './redact.js';

/**
 * Structured JSON logs, one object per line on stdout, so that any collector can index them. No
 * secret reaches a line: each is passed through redactSecrets (lib/platform/redact.ts).
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
    process.stdout.write(redactSecrets(JSON.stringify(line, errorReplacer)) + '\n');
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => createLogger({ ...base, ...fields }, minLevel),
  };
}

function errorReplacer(_key: string, value: unknown) {
  if (value instanceof Error) return { name: value.name, message: value.message, stack: value.stack };
  if (typeof value === 'bigint') return value.toString();
  return value;
}
