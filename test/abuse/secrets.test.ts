import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import readline from 'node:readline';
import { redactSecrets, redactUrl, registerSecret } from '../../lib/platform/redact.js';
import { repoRoot, freePort } from '../../scripts/stack.js';
import { systemEnv, testStack } from '../support/stack.js';
import { client, eventually, startWorker } from '../support/system.js';

/**
 * No secret in any log line (docs/abuse-resistance.md, "Health and secrets"): the API and worker
 * processes run with a database URL that carries a password and with distinctive keys, are made to
 * log start-up, requests, refusals and failures (a dependency down, a database that cannot be
 * reached), and not one line they print holds a secret. /health/deep tells an anonymous caller only
 * ok / not ok.
 */
const password = 'Pg-Pass-7f3a9c21e';
const adminKey = 'admin-key-b64e2d9f0a17c3';
const openaiKey = 'sk-proj-openai-secret-51c0ffee';
const metricsKey = 'metrics-key-9d8c7b6a5e4f';

/** The test database's URL with a password (the test server trusts local connections, so it still connects). */
const withPassword = (url: string, pw = password) => {
  const u = new URL(url);
  u.password = pw;
  return u.toString();
};

interface Running {
  child: ChildProcess;
  lines: string[];
  url: string;
  stop(): Promise<void>;
}

async function startApiProcess(env: Record<string, string>): Promise<Running> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'api/server.ts'], {
    cwd: repoRoot,
    env: { ...process.env, ...systemEnv({ LOG_LEVEL: 'debug', PORT: String(port), ...env }) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  readline.createInterface({ input: child.stdout! }).on('line', (l) => lines.push(l));
  readline.createInterface({ input: child.stderr! }).on('line', (l) => lines.push(l));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  await eventually('the API to listen', async () => lines.some((l) => l.includes('"api listening"')), 60_000);
  return {
    child,
    lines,
    url: `http://127.0.0.1:${port}`,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

function assertNoSecret(lines: string[], secrets: string[]) {
  assert.ok(lines.length > 0, 'the process logged something');
  for (const line of lines) for (const s of secrets) assert.ok(!line.includes(s), `a log line holds a secret (${s.slice(0, 4)}…): ${line.slice(0, 300)}`);
}

describe('secrets stay out of logs', function () {
  this.timeout(300_000);

  describe('redactSecrets', () => {
    it('masks URL passwords, key parameters, bearer tokens and the service\'s own keys', () => {
      const out = redactSecrets(
        [
          'connect postgresql://app:hunter2-Secret@db.internal:5432/main failed',
          'GET /x?api_key=abcdef123456&page=2',
          'authorization: Bearer eyJhbGciOi.payload.sig',
          `partner key pk_${'A'.repeat(43)} and quota key qk_${'b'.repeat(43)}`,
          '{"password":"p@ss\\"word","user":"u"}',
        ].join('\n'),
      );
      for (const secret of ['hunter2-Secret', 'abcdef123456', 'eyJhbGciOi', 'A'.repeat(43), 'b'.repeat(43), 'p@ss']) assert.ok(!out.includes(secret), `${secret} in ${out}`);
      assert.match(out, /postgresql:\/\/app:\*\*\*@db\.internal:5432\/main/);
      assert.match(out, /page=2/);
      assert.match(out, /"user":"u"/);
    });

    it('masks registered values wherever they appear, JSON-escaped too', () => {
      registerSecret('registered"Secret\\value');
      assert.equal(redactSecrets('x registered"Secret\\value y'), 'x *** y');
      assert.equal(redactSecrets(JSON.stringify({ note: 'registered"Secret\\value' })), '{"note":"***"}');
      assert.equal(redactUrl('postgresql://u:pw-123@h/db'), 'postgresql://u:***@h/db');
    });

    it('masks a registered value that contains one registered before it whole, not around the shorter', () => {
      registerSecret('inner-9f3k');
      assert.equal(redactSecrets('a inner-9f3k b'), 'a *** b');
      registerSecret('outer-inner-9f3k-tail');
      assert.equal(redactSecrets('a outer-inner-9f3k-tail b'), 'a *** b');
    });
  });

  describe('the API process', () => {
    let api: Running;
    let partnerKey: string;

    before(async () => {
      api = await startApiProcess({
        DATABASE_URL: withPassword(testStack().databaseUrl),
        ADMIN_API_KEY: adminKey,
        OPENAI_API_KEY: openaiKey,
        OPENAI_BASE_URL: `http://127.0.0.1:${await freePort()}`,
        METRICS_API_KEY: metricsKey,
        SCRAPER_BASE_URL: 'http://127.0.0.1:9',
        SCRAPER_API_KEY: 'scraper-key-0a1b2c3d4e5f',
      });
      const http = client(api.url);
      const partner = await http('POST', `/api/partners/secrets-${process.pid}`, { key: adminKey, form: {} });
      assert.equal(partner.status, 201);
      partnerKey = partner.body.api_key;
    });
    after(async () => {
      await api?.stop();
    });

    it('logs start-up, requests, refusals and failures without a password or a key', async () => {
      const http = client(api.url);
      await http('GET', '/api/partners', { key: partnerKey });
      await http('GET', '/api/partners', { headers: { authorization: `Bearer ${partnerKey}` } });
      await http('GET', '/api/partners', { key: `pk_${'Z'.repeat(43)}` });
      await http('GET', `/api/voices/secrets-${process.pid}?api_key=${encodeURIComponent(partnerKey)}`);
      await http('GET', '/metrics', { headers: { authorization: `Bearer ${metricsKey}` } });
      await http('GET', '/health/deep', { key: adminKey });
      // The model provider cannot be reached: a logged failure of a call that carried OPENAI_API_KEY.
      const quota = await http('POST', '/api/quota-keys', { key: adminKey, json: { name: 'secrets', quota_type: 'chat', token_amount: 1000 } });
      await http('POST', '/v3/chat/completions', { headers: { authorization: `Bearer ${quota.body.api_key}` }, json: { model: 'gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }] } });
      // A request that fails inside (a 5xx is logged with its error).
      await http('POST', '/api/rag-test/search', { key: adminKey, json: { partner: `secrets-${process.pid}`, kb: 'missing', user_message: 'x' } });
      // One process writes its log lines in order: once the last request's line is there, so is every earlier one.
      await eventually('the last request to be logged', async () => api.lines.some((l) => l.includes('"request"') && l.includes('/api/rag-test/search')));
      assertNoSecret(api.lines, [password, adminKey, openaiKey, metricsKey, partnerKey, quota.body.api_key, 'scraper-key-0a1b2c3d4e5f']);
      assert.ok(api.lines.some((l) => l.includes('"request"')), 'requests were logged');
    });

    it('/health/deep tells an anonymous caller only ok / not ok per dependency', async () => {
      const anonymous = await client(api.url)('GET', '/health/deep');
      assert.deepEqual(anonymous.body, { status: 'ok', checks: { postgres: { ok: true }, temporal: { ok: true }, weaviate: { ok: true }, storage: { ok: true } } });
      const admin = await client(api.url)('GET', '/health/deep', { key: adminKey });
      assert.equal(typeof admin.body.checks.postgres.latency_ms, 'number');
    });
  });

  it('an API whose database cannot be reached logs its failures without the password', async () => {
    const down = withPassword(`postgresql://postgres@127.0.0.1:${await freePort()}/nowhere`, 'Down-Pass-40e2');
    const api = await startApiProcess({ DATABASE_URL: down, ADMIN_API_KEY: adminKey });
    try {
      const res = await client(api.url)('GET', '/api/partners', { key: `pk_${'Y'.repeat(43)}` });
      assert.equal(res.status, 500);
      const deep = await client(api.url)('GET', '/health/deep', { key: adminKey });
      assert.equal(deep.body.checks.postgres.ok, false);
      assert.ok(!JSON.stringify(deep.body).includes('Down-Pass-40e2'));
      await eventually('the last request to be logged', async () => api.lines.some((l) => l.includes('"request"') && l.includes('/health/deep')));
      assert.ok(api.lines.some((l) => l.includes('"request failed"')), 'the failure was logged');
      assertNoSecret(api.lines, ['Down-Pass-40e2', adminKey]);
    } finally {
      await api.stop();
    }
  });

  it('a configuration error does not echo the password of the URL it refuses', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'api/server.ts'], {
      cwd: repoRoot,
      env: { ...process.env, ...systemEnv({ DATABASE_URL: 'postgresql://app:Cfg-Pass-19ab@[not-a-host', ADMIN_API_KEY: adminKey }) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (d) => (out += String(d)));
    child.stderr!.on('data', (d) => (out += String(d)));
    const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    assert.equal(code, 78);
    assert.match(out, /configuration error: DATABASE_URL is not a valid URL/);
    assert.ok(!out.includes('Cfg-Pass-19ab'), out);
  });

  it('the worker\'s start-up logs hold no password', async () => {
    const worker = await startWorker({ DATABASE_URL: withPassword(testStack().databaseUrl, 'Wrk-Pass-77cd'), LOG_LEVEL: 'debug', OPENAI_API_KEY: openaiKey });
    try {
      assertNoSecret(worker.output, ['Wrk-Pass-77cd', openaiKey]);
    } finally {
      await worker.kill();
    }
  });
});
