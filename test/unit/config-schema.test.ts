import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { settings } from '../../lib/platform/config-schema.js';
import { ConfigError, loadConfig, setting } from '../../lib/platform/config.js';
import { configurationDocPath, renderConfigurationDoc } from '../../scripts/config-docs.js';
import { repoRoot } from '../../scripts/stack.js';

/** The code whose environment reads must all be declared: every process, script and benchmark, and the test harness. */
const scanned = ['api', 'activities', 'workflows', 'workers', 'lib', 'scripts', 'bench', 'test/support'];
/** `process.env.NAME`, `env.NAME`, `env['NAME']`, and `const { NAME } = process.env`. */
const envRead = /\b(?:process\.)?env(?:\.([A-Z_][A-Z0-9_]*)\b|\[\s*['"`]([A-Z_][A-Z0-9_]*)['"`]\s*\])/g;
const envDestructuring = /\{([^{}]*)\}\s*=\s*(?:process\.)?env\b/g;

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sourceFiles(file);
    return /\.[cm]?[jt]s$/.test(entry.name) ? [file] : [];
  });
}

/** The variable names a source file reads. */
function namesRead(source: string): string[] {
  const names = [...source.matchAll(envRead)].map((m) => (m[1] ?? m[2])!);
  for (const m of source.matchAll(envDestructuring)) names.push(...m[1]!.split(',').map((part) => part.split(':')[0]!.trim()).filter((name) => /^[A-Z_][A-Z0-9_]*$/.test(name)));
  return names;
}

/** Every variable name the code reads, with the files that read it. */
function environmentReads(): Map<string, Set<string>> {
  const reads = new Map<string, Set<string>>();
  for (const file of scanned.flatMap((dir) => sourceFiles(path.join(repoRoot, dir)))) {
    for (const name of namesRead(fs.readFileSync(file, 'utf8'))) reads.set(name, (reads.get(name) ?? new Set()).add(path.relative(repoRoot, file)));
  }
  return reads;
}

describe('the configuration schema (lib/platform/config-schema.ts)', () => {
  it('docs/configuration.md is what `npm run docs:config` writes from it', () => {
    const current = fs.existsSync(configurationDocPath) ? fs.readFileSync(configurationDocPath, 'utf8') : '';
    assert.ok(current === renderConfigurationDoc(), 'docs/configuration.md is stale: run `npm run docs:config` and commit the result');
  });

  it('declares every environment variable the code reads', () => {
    const reads = environmentReads();
    assert.ok(reads.has('ADMIN_API_KEY') && reads.has('BENCH_RUNS'), 'the scan finds the reads of the config and of a benchmark');
    const undeclared = [...reads].filter(([name]) => !(name in settings)).map(([name, files]) => `${name} (${[...files].join(', ')})`);
    assert.deepEqual(undeclared, [], 'declare these in lib/platform/config-schema.ts (test-only ones with readBy test)');
  });

  it('the scan catches a read of an undeclared variable in each form', () => {
    const source = "process.env.NEW_KNOB; env.OTHER_KNOB; env['THIRD_KNOB']; const { FOURTH_KNOB, PORT: port } = process.env;";
    assert.deepEqual(namesRead(source), ['NEW_KNOB', 'OTHER_KNOB', 'THIRD_KNOB', 'FOURTH_KNOB', 'PORT']);
  });

  it('every fixed default passes its own validation, and every bound is ordered', () => {
    for (const [name, spec] of Object.entries(settings)) {
      if ('min' in spec && 'max' in spec) assert.ok(spec.min <= spec.max, `${name}: min above max`);
      if ('default' in spec) assert.doesNotThrow(() => setting({}, name as keyof typeof settings), `${name}'s default ${spec.default}`);
    }
  });

  it('an empty value takes the default, and a default computed from another setting follows it', () => {
    const valid = { ADMIN_API_KEY: 'a-long-enough-admin-key' };
    const empty = loadConfig({ ...valid, PORT: '', LOG_LEVEL: '', SCRAPER_BASE_URL: 'http://scraper.local', SCRAPER_COST_PER_CREDIT_USD: '', TEMPORAL_TASK_QUEUE: 'docs' });
    assert.equal(empty.port, 3000);
    assert.equal(empty.logLevel, 'info');
    assert.equal(empty.scraper?.costPerCreditUsd, 0.001, 'an empty SCRAPER_COST_PER_CREDIT_USD used to give 0');
    assert.equal(empty.transcription.audioTaskQueue, 'docs-audio');
    assert.equal(loadConfig({ ...valid, PORT: '4100' }).voices.jobFilesBaseUrl, 'http://127.0.0.1:4100');
    assert.equal(loadConfig({ ...valid, MESSAGING_SERVER_TIMING: 'yes' }).messaging.serverTiming, true);
    assert.throws(() => loadConfig({ ...valid, MESSAGING_SERVER_TIMING: 'maybe' }), (err: unknown) => err instanceof ConfigError && /MESSAGING_SERVER_TIMING must be true or false/.test(err.message));
  });
});
