import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sections, type SettingSpec } from '../lib/platform/config-schema.js';

/**
 * Writes docs/configuration.md from lib/platform/config-schema.ts (`npm run docs:config`);
 * `--check` only says whether the file is current (test/unit/config-schema.test.ts runs the same).
 */
export const configurationDocPath = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'docs', 'configuration.md');

const code = (value: string) => `\`${value}\``;
const count = (n: number) => (Math.abs(n) >= 10_000 ? n.toLocaleString('en-US') : String(n));

function defaultOf(spec: SettingSpec): string {
  if (spec.defaultText !== undefined) return spec.defaultText;
  if (spec.default !== undefined) return code(spec.default);
  return spec.required ? 'none (required)' : 'unset';
}

function allowedOf(spec: SettingSpec): string {
  const parts: string[] = [];
  switch (spec.type) {
    case 'integer':
      parts.push(spec.min !== undefined && spec.max !== undefined ? `whole number, ${count(spec.min)} .. ${count(spec.max)}` : 'whole number');
      break;
    case 'number':
      parts.push(spec.max === undefined ? 'number ≥ 0' : `number, 0 .. ${count(spec.max)}`);
      break;
    case 'boolean':
      parts.push('`true` or `false` (`1`/`0`, `yes`/`no`)');
      break;
    case 'url':
      parts.push(`URL (${(spec.protocols ?? ['http:', 'https:']).map((p) => p.replace(/:$/, '')).join(', ')})`);
      break;
    case 'enum':
      parts.push((spec.values ?? []).map(code).join(', ') + (spec.upperCase ? ' (any case)' : ''));
      break;
    case 'list':
      parts.push('comma-separated list');
      break;
    case 'string':
      if (spec.mustBe && !spec.allowed) parts.push(spec.mustBe);
      break;
    case 'json':
      break;
  }
  if (spec.allowed) parts.push(spec.allowed);
  return parts.join('; ') || 'text';
}

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

export function renderConfigurationDoc(): string {
  const lines = [
    '# Configuration',
    '',
    '<!-- Generated from lib/platform/config-schema.ts by `npm run docs:config`: edit the schema, not this file. -->',
    '',
    'Every setting is an environment variable. The API and the worker read and validate every service',
    'setting once at start-up (`lib/platform/config.ts`); a missing or invalid value stops the process',
    'with `configuration error: <NAME> ...` (exit code 78). An empty value counts as unset: the default',
    'applies. "Read by" names the processes that use a setting: `api`, `worker`, the operator `scripts`,',
    'the benchmarks (`bench`) or the tests (`test`).',
    '',
    'A new setting is declared once in `lib/platform/config-schema.ts` (type, default, bounds, meaning,',
    'readers), read in `lib/platform/config.ts` with `setting(env, NAME)`, and this page is rewritten by',
    '`npm run docs:config`. `test/unit/config-schema.test.ts` fails while this page is stale, or while',
    'any code reads an environment variable the schema does not declare.',
  ];
  for (const section of sections) {
    lines.push('', `## ${section.title}`, '', '| Variable | Default | Allowed | Read by | Meaning |', '|---|---|---|---|---|');
    for (const [name, spec] of Object.entries(section.settings) as Array<[string, SettingSpec]>) {
      lines.push(`| ${code(name)} | ${cell(defaultOf(spec))} | ${cell(allowedOf(spec))} | ${spec.readBy.join(', ')} | ${cell(spec.description)} |`);
    }
  }
  return lines.join('\n') + '\n';
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const wanted = renderConfigurationDoc();
  if (process.argv.includes('--check')) {
    const current = fs.existsSync(configurationDocPath) ? fs.readFileSync(configurationDocPath, 'utf8') : '';
    if (current !== wanted) {
      process.stderr.write('docs/configuration.md is stale: run `npm run docs:config`\n');
      process.exit(1);
    }
  } else {
    fs.writeFileSync(configurationDocPath, wanted);
  }
}
