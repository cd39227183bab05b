import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { withPgClient } from '../support/pg-client.js';

/**
 * prisma/migrations and prisma/schema.prisma agree, and the migrations apply to an empty database.
 *
 * Everything runs through scripts/prisma.sh, i.e. the unmodified Prisma CLI with the offline
 * schema engine shim (scripts/prisma-schema-engine.mjs), against a throwaway database on the local
 * Postgres server (TEST_POSTGRES_ADMIN_URL, default postgresql://postgres@127.0.0.1:5432/postgres).
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const prismaSh = path.join(root, 'scripts', 'prisma.sh');
const schemaFile = path.join(root, 'prisma', 'schema.prisma');
const migrationsDir = path.join(root, 'prisma', 'migrations');

const adminUrl = process.env.TEST_POSTGRES_ADMIN_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
const dbName = `dwb_migrations_test_${Date.now()}_${randomBytes(4).toString('hex')}`;
const dbUrl = (() => {
  const url = new URL(adminUrl);
  url.pathname = `/${dbName}`;
  return url.toString();
})();

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `scripts/prisma.sh <args>` against the throwaway database; never rejects. */
function prisma(...args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      prismaSh,
      args,
      { cwd: root, env: { ...process.env, DATABASE_URL: dbUrl }, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

function show(run: Run): string {
  return `exit ${run.code}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`;
}

const admin = <T>(fn: (client: pg.Client) => Promise<T>, connectionString = adminUrl): Promise<T> => withPgClient(connectionString, fn);

describe('database migrations (prisma/migrations)', function () {
  this.timeout(120000);

  let tmpDir: string | undefined;

  before(async function () {
    await admin((client) => client.query(`CREATE DATABASE "${dbName}"`));
  });

  after(async function () {
    if (tmpDir) rmSync(tmpDir, { recursive: true, force: true });
    await admin((client) => client.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`));
  });

  it('migrate deploy applies every migration to an empty database', async function () {
    const run = await prisma('migrate', 'deploy');
    assert.equal(run.code, 0, show(run));
    assert.match(run.stdout, /All migrations have been successfully applied/, show(run));

    const tables = await admin(async (client) => {
      const { rows } = await client.query<{ table_name: string }>(
        `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`,
      );
      return rows.map((row) => row.table_name);
    }, dbUrl);
    for (const table of ['partners', 'knowledge_bases', 'folders', 'documents', '_prisma_migrations']) {
      assert.ok(tables.includes(table), `table ${table} missing; found: ${tables.join(', ')}`);
    }
  });

  it('migrate status reports the database up to date', async function () {
    const run = await prisma('migrate', 'status');
    assert.equal(run.code, 0, show(run));
    assert.match(run.stdout, /Database schema is up to date!/, show(run));
  });

  it('the migrations produce exactly the schema in prisma/schema.prisma', async function () {
    const run = await prisma(
      'migrate', 'diff',
      '--from-migrations', migrationsDir,
      '--to-schema', schemaFile,
      '--exit-code',
    );
    assert.equal(run.code, 0, `schema.prisma has changes without a migration (run scripts/new-migration.sh <name>)\n${show(run)}`);
    assert.match(run.stdout, /No difference detected/, show(run));
  });

  it('the same check fails when the schema has a change without a migration', async function () {
    tmpDir = mkdtempSync(path.join(os.tmpdir(), 'dwb-schema-'));
    const changed = readFileSync(schemaFile, 'utf8').replace(
      /^(model Partner \{\n)/m,
      '$1  migrationCheckProbe String?\n',
    );
    assert.match(changed, /migrationCheckProbe/, 'could not add a column to the Partner model');
    const changedSchema = path.join(tmpDir, 'schema.prisma');
    writeFileSync(changedSchema, changed);

    const run = await prisma(
      'migrate', 'diff',
      '--from-migrations', migrationsDir,
      '--to-schema', changedSchema,
      '--exit-code',
    );
    assert.equal(run.code, 2, `expected exit code 2 (changes found)\n${show(run)}`);
    assert.match(run.stdout, /Changed the `partners` table/, show(run));
    assert.match(run.stdout, /Added column `migrationCheckProbe`/, show(run));
  });
});
