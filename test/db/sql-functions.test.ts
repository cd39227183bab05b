import assert from 'node:assert/strict';
import path from 'node:path';
import pg from 'pg';
import { fileDefinition, functionDrift, functionFiles, liveFunctions } from '../../scripts/sql-functions.js';
import { dropDatabase, ensureDatabase, migrate, repoRoot } from '../../scripts/stack.js';

/**
 * prisma/functions holds each SQL function's current definition, one file each
 * (docs/architecture-sql-functions.md). A database of this test's own, on the local Postgres server
 * (TEST_POSTGRES_ADMIN_URL, as test/db/migrations.test.ts), is migrated from nothing. Each file
 * must define what the migrations leave, and each function the migrations leave must have a file,
 * so the file is the one place to read (and change) a function.
 */
describe('SQL functions: prisma/functions and the migrations agree', () => {
  const databaseUrl = (() => {
    const url = new URL(process.env.TEST_POSTGRES_ADMIN_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres');
    url.pathname = `/dwb_functions_test_${process.pid}`;
    return url.toString();
  })();
  let client: pg.Client;
  before(async function () {
    this.timeout(120_000);
    await dropDatabase(databaseUrl).catch(() => undefined);
    await ensureDatabase(databaseUrl);
    await migrate(databaseUrl);
    client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
  });
  after(async () => {
    await client?.end();
    await dropDatabase(databaseUrl);
  });

  it('every function the migrations create has its file, and every file defines what the migrations leave', async () => {
    const drift = await functionDrift(client);
    assert.deepEqual(drift.withoutFile, [], 'functions without a file in prisma/functions: add <name>.sql with the definition of the newest migration');
    assert.deepEqual(
      drift.changed.map((f) => path.relative(repoRoot, f.file)),
      [],
      'files that differ from the migrated database: make a migration from them with scripts/new-migration.sh <name>',
    );
    assert.ok(functionFiles().length >= 17, `${functionFiles().length} function files`);
  });

  it('notices a file that no longer matches, without changing the database', async () => {
    const [file] = functionFiles().filter((f) => f.name === 'quota_settle');
    assert.ok(file, 'prisma/functions/quota_settle.sql');
    const before = (await liveFunctions(client)).get('quota_settle');
    const edited = { ...file, sql: file.sql.replace(/\bBEGIN\b/, 'BEGIN\n  PERFORM 1;') };
    assert.notEqual(await fileDefinition(client, edited), before);
    assert.equal(await fileDefinition(client, file), before);
    assert.equal((await liveFunctions(client)).get('quota_settle'), before, 'the comparison rolled back what it ran');
  });
});
