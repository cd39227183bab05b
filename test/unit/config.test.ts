import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { loadConfig, ConfigError } from '../../lib/config.js';
import { repoRoot } from '../../scripts/stack.js';

const valid = { ADMIN_API_KEY: 'a-long-enough-admin-key' };

describe('configuration, validated once at start-up', () => {
  it('fills every unset setting with its documented default', () => {
    const c = loadConfig(valid);
    assert.equal(c.databaseUrl, 'postgresql://postgres@127.0.0.1:5432/dwb_dev');
    assert.equal(c.temporalAddress, '127.0.0.1:7233');
    assert.equal(c.temporalNamespace, 'default');
    assert.equal(c.weaviateUrl, 'http://127.0.0.1:8080');
    assert.equal(c.port, 3000);
    assert.equal(c.openaiBaseUrl, null);
    assert.ok(c.storageDir.endsWith('.data/storage'));
  });

  const bad: Array<[string, Record<string, string>, RegExp]> = [
    ['a missing ADMIN_API_KEY', {}, /ADMIN_API_KEY is required/],
    ['a short ADMIN_API_KEY', { ADMIN_API_KEY: 'short' }, /ADMIN_API_KEY must be at least 16/],
    ['a DATABASE_URL that is not a URL', { ...valid, DATABASE_URL: 'not a url' }, /DATABASE_URL is not a valid URL/],
    ['a DATABASE_URL of another database kind', { ...valid, DATABASE_URL: 'mysql://x@y/z' }, /DATABASE_URL must use postgresql:/],
    ['a TEMPORAL_ADDRESS without a port', { ...valid, TEMPORAL_ADDRESS: 'localhost' }, /TEMPORAL_ADDRESS must be host:port/],
    ['a WEAVIATE_URL with another scheme', { ...valid, WEAVIATE_URL: 'ftp://x' }, /WEAVIATE_URL must use http: or https:/],
    ['a non-numeric PORT', { ...valid, PORT: 'eighty' }, /PORT must be a whole number/],
    ['a PORT out of range', { ...valid, PORT: '70000' }, /PORT must be between 0 and 65535/],
    ['an invalid OPENAI_BASE_URL', { ...valid, OPENAI_BASE_URL: '::' }, /OPENAI_BASE_URL is not a valid URL/],
    ['an unknown LOG_LEVEL', { ...valid, LOG_LEVEL: 'loud' }, /LOG_LEVEL must be one of/],
  ];
  for (const [what, env, message] of bad) {
    it(`rejects ${what}, naming the setting`, () => {
      assert.throws(() => loadConfig(env), (err: unknown) => err instanceof ConfigError && message.test(err.message));
    });
  }

  for (const entry of ['api/server.ts', 'workers/main.ts']) {
    it(`${entry} stops at start-up with a message naming a missing setting`, () => {
      const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' };
      const r = spawnSync(process.execPath, ['--import', 'tsx', entry], { cwd: repoRoot, env, encoding: 'utf8', timeout: 30_000 });
      assert.equal(r.status, 78, r.stderr);
      assert.match(r.stderr, /configuration error: ADMIN_API_KEY is required/);
    });
  }
});
