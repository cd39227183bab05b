/**
 * Reads a V8 CPU profile (`node --cpu-prof`) and summarises where a process spent its CPU: self
 * time by component (HTTP and sockets, Express, node-postgres, Prisma, JSON, our own files, garbage
 * collection, ...) and the functions with the most self time, as Markdown for bench/RESULTS.md.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
}

interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

const packages: Array<[RegExp, string]> = [
  [/node_modules\/(pg|pg-protocol|pg-pool|pg-types|pgpass|pg-connection-string|postgres-\w+)\//, 'node-postgres (pg)'],
  [/node_modules\/(@prisma|\.prisma)\/|\/generated\/prisma\//, 'Prisma'],
  [/node_modules\/(express|router|body-parser|raw-body|finalhandler|send|serve-static|path-to-regexp|on-finished|type-is|content-type|iconv-lite|qs|accepts|negotiator|mime-types|media-typer|encodeurl|escape-html|parseurl|vary|statuses|depd|http-errors|cookie|fresh|range-parser|merge-descriptors|proxy-addr|forwarded|etag|content-disposition)\//, 'Express and its parsers'],
  [/node_modules\/(ajv|ajv-formats|fast-uri|fast-deep-equal|json-schema-traverse)\//, 'ajv (request validation)'],
  [/node_modules\/prom-client\//, 'prom-client (metrics)'],
  [/node_modules\/(tsx|esbuild|get-tsconfig)\//, 'tsx (TypeScript loader)'],
  [/node_modules\/js-tiktoken\//, 'js-tiktoken (token counts)'],
];

function componentOf(frame: ProfileNode['callFrame']): string {
  const { url, functionName } = frame;
  if (functionName === '(idle)') return '(idle)';
  if (functionName === '(garbage collector)') return 'garbage collection';
  if (functionName === '(program)') return 'V8 and native code outside JavaScript (program)';
  for (const [pattern, name] of packages) if (pattern.test(url)) return name;
  if (url.includes('/node_modules/')) return `other package: ${url.split('/node_modules/').pop()!.split('/').slice(0, url.includes('/node_modules/@') ? 2 : 1).join('/')}`;
  if (url.startsWith('node:')) {
    if (/_http_|node:https?\b/.test(url)) return 'Node HTTP (server, client, parser)';
    if (/net|stream|tls|dns|socket/.test(url)) return 'Node sockets and streams';
    if (/crypto/.test(url)) return 'Node crypto';
    if (/timers|async_hooks|task_queues|promise|process\/|events/.test(url)) return 'Node timers, events and promises';
    return 'Node core, other';
  }
  if (url.startsWith('file://') || url.startsWith('/')) {
    const file = url.replace(/^file:\/\//, '');
    if (file.startsWith(repoRoot)) return `ours: ${path.relative(repoRoot, file)}`;
  }
  if (!url) return `builtins (${/^JSON\.|stringify|parse/.test(functionName) ? 'JSON' : functionName || 'anonymous'})`;
  return `other: ${url}`;
}

export interface ProfileBreakdown {
  totalMs: number;
  idleMs: number;
  components: Array<{ name: string; ms: number }>;
  functions: Array<{ name: string; where: string; ms: number }>;
}

/** Self time by component and by function; `sinceUs`: only samples taken that many µs after the profile started (skips start-up). */
export function breakdown(file: string, sinceUs = 0): ProfileBreakdown {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  let at = 0;
  profile.samples.forEach((id, i) => {
    at += profile.timeDeltas[i] ?? 0;
    if (at < sinceUs) return;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i + 1] ?? profile.timeDeltas[i] ?? 0));
  });
  const components = new Map<string, number>();
  const functions = new Map<string, { name: string; where: string; ms: number }>();
  let idleMs = 0;
  let totalMs = 0;
  for (const [id, us] of self) {
    const node = byId.get(id)!;
    const ms = us / 1000;
    totalMs += ms;
    const component = componentOf(node.callFrame);
    if (component === '(idle)') {
      idleMs += ms;
      continue;
    }
    components.set(component, (components.get(component) ?? 0) + ms);
    const { functionName, url, lineNumber } = node.callFrame;
    const where = url ? `${url.replace(/^file:\/\//, '').replace(`${repoRoot}/`, '')}:${lineNumber + 1}` : '(native)';
    const key = `${functionName}@${where}`;
    const f = functions.get(key) ?? { name: functionName || '(anonymous)', where, ms: 0 };
    f.ms += ms;
    functions.set(key, f);
  }
  return {
    totalMs,
    idleMs,
    components: [...components].map(([name, ms]) => ({ name, ms })).sort((a, b) => b.ms - a.ms),
    functions: [...functions.values()].sort((a, b) => b.ms - a.ms),
  };
}

/** Markdown: busy time by component (components under 0.5 % folded together) and the top functions by self time. */
export function profileSummary(file: string, options: { topFunctions?: number; sinceUs?: number } = {}): string {
  const topFunctions = options.topFunctions ?? 20;
  const b = breakdown(file, options.sinceUs ?? 0);
  const busy = b.totalMs - b.idleMs;
  const pct = (ms: number) => `${((100 * ms) / Math.max(busy, 1e-9)).toFixed(1)} %`;
  const shown = b.components.filter((c) => c.ms / busy >= 0.005);
  const rest = b.components.filter((c) => c.ms / busy < 0.005).reduce((a, c) => a + c.ms, 0);
  return [
    `Profile: ${(b.totalMs / 1000).toFixed(1)} s sampled, ${(busy / 1000).toFixed(1)} s of it busy (the rest idle, waiting for the network or the database).`,
    '',
    '| Component (self time) | CPU (ms) | Share of busy time |',
    '|---|---:|---:|',
    ...shown.map((c) => `| ${c.name} | ${c.ms.toFixed(0)} | ${pct(c.ms)} |`),
    ...(rest > 0 ? [`| (${b.components.length - shown.length} more, each under 0.5 %) | ${rest.toFixed(0)} | ${pct(rest)} |`] : []),
    '',
    `| Function (top ${topFunctions} by self time) | Where | CPU (ms) | Share of busy time |`,
    '|---|---|---:|---:|',
    ...b.functions.slice(0, topFunctions).map((f) => `| \`${f.name}\` | ${f.where} | ${f.ms.toFixed(0)} | ${pct(f.ms)} |`),
  ].join('\n');
}

/** A process's profile and the streams it served while it was measured, for `comparisonTable`. */
export interface ProfiledProcess {
  title: string;
  file: string;
  streams: number;
  sinceUs: number;
}

/**
 * Markdown: busy self time per stream (µs) by component, one column per process, the components
 * where the last process spends most beyond the first at the top (the others folded together).
 */
export function comparisonTable(processes: ProfiledProcess[], rowsShown = 14): string {
  const perStream = processes.map((p) => {
    const b = breakdown(p.file, p.sinceUs);
    const us = new Map(b.components.map((c) => [c.name, (1000 * c.ms) / Math.max(p.streams, 1)]));
    return { us, busy: (1000 * (b.totalMs - b.idleMs)) / Math.max(p.streams, 1) };
  });
  const names = [...new Set(perStream.flatMap((p) => [...p.us.keys()]))];
  const gap = (name: string) => (perStream.at(-1)!.us.get(name) ?? 0) - (perStream[0]!.us.get(name) ?? 0);
  names.sort((a, b) => gap(b) - gap(a));
  const shown = names.slice(0, rowsShown);
  const rest = names.slice(rowsShown);
  const cell = (v: number) => v.toFixed(0);
  return [
    `| Component (self time, µs per stream) | ${processes.map((p) => p.title).join(' | ')} |`,
    `|---|${processes.map(() => '---:').join('|')}|`,
    ...shown.map((name) => `| ${name} | ${perStream.map((p) => cell(p.us.get(name) ?? 0)).join(' | ')} |`),
    `| (${rest.length} more) | ${perStream.map((p) => cell(rest.reduce((a, n) => a + (p.us.get(n) ?? 0), 0))).join(' | ')} |`,
    `| **all busy time** | ${perStream.map((p) => `**${cell(p.busy)}**`).join(' | ')} |`,
  ].join('\n');
}
