import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { processingErrorOf, type ProcessingState } from '../../lib/knowledge/state.js';
import { withPgClient } from '../support/pg-client.js';

/**
 * The migration that made a document's waiting states typed (blocked on budget, failed) keeps what
 * every existing document shows as processing_error, and the database refuses a state whose columns
 * disagree. Runs the migration files in order on a throwaway database of the local Postgres server.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const migrationsDir = path.join(root, 'prisma', 'migrations');
const typedState = '20261207015628_typed_document_processing_state';

const adminUrl = process.env.TEST_POSTGRES_ADMIN_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
const dbName = `dwb_processing_state_test_${Date.now()}_${randomBytes(4).toString('hex')}`;
const dbUrl = Object.assign(new URL(adminUrl), { pathname: `/${dbName}` }).toString();


const migrations = readdirSync(migrationsDir, { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name)
  .sort();
const apply = (client: pg.Client, names: string[]) =>
  names.reduce((done, name) => done.then(() => client.query(readFileSync(path.join(migrationsDir, name, 'migration.sql'), 'utf8'))), Promise.resolve<unknown>(null));

describe('typed processing state of documents (migration and constraint)', function () {
  this.timeout(120_000);

  before(() => withPgClient(adminUrl, (c) => c.query(`CREATE DATABASE "${dbName}"`)));
  after(() => withPgClient(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`)));

  it('existing documents show the same processing_error after the migration, now read from typed columns', async () => {
    const shown = [
      'BUDGET_BLOCKED:character_limit_exhausted: needs 1200 characters: 40 of 1000 left',
      'BUDGET_BLOCKED:token_limit_exhausted: ',
      'BUDGET_BLOCKED:unresolved_provider_outcome: 1 operation of this KB has an unknown outcome: resolve it',
      // A reason no admission gives is not a block the workflow waits on: it stays readable, as a failure.
      'BUDGET_BLOCKED:no_such_reason: x',
      'REWRITE_FAILED: the model answered 500',
      'QUOTA_EXCEEDED:knowledge_chars (limit 10)',
      null,
    ];
    const rows = await withPgClient(dbUrl, async (c) => {
      assert.ok(migrations.includes(typedState));
      await apply(c, migrations.slice(0, migrations.indexOf(typedState)));
      const [partner, kb, folder] = [randomUUID(), randomUUID(), randomUUID()];
      await c.query(`INSERT INTO partners (id, name, "keyHash", "updatedAt") VALUES ($1, 'p', 'h', now())`, [partner]);
      await c.query(`INSERT INTO knowledge_bases (id, "partnerId", name, "updatedAt") VALUES ($1, $2, 'kb', now())`, [kb, partner]);
      await c.query(`INSERT INTO folders (id, "knowledgeBaseId", name) VALUES ($1, $2, 'f')`, [folder, kb]);
      for (const [i, error] of shown.entries()) {
        await c.query(`INSERT INTO documents (id, "knowledgeBaseId", "folderId", name, type, "processingError", "updatedAt") VALUES ($1, $2, $3, $4, 'file', $5, now())`, [
          randomUUID(),
          kb,
          folder,
          `d${i}`,
          error,
        ]);
      }
      await apply(c, migrations.slice(migrations.indexOf(typedState)));
      const { rows } = await c.query<ProcessingState & { name: string }>(
        `SELECT name, "processingState", "budgetBlockReason", "budgetBlockDetail", "failureMessage" FROM documents ORDER BY name`,
      );
      return rows;
    });
    assert.deepEqual(
      rows.map((r) => processingErrorOf(r)),
      shown,
    );
    assert.deepEqual(
      rows.map((r) => r.processingState),
      ['budget_blocked', 'budget_blocked', 'budget_blocked', 'failed', 'failed', 'failed', null],
    );
    assert.deepEqual([rows[0]!.budgetBlockReason, rows[0]!.budgetBlockDetail], ['character_limit_exhausted', 'needs 1200 characters: 40 of 1000 left']);
  });

  it('a state whose columns disagree is refused; one that agrees is written', async () => {
    await withPgClient(dbUrl, async (c) => {
      const set = (columns: string) => c.query(`UPDATE documents SET ${columns} WHERE name = 'd6'`);
      await assert.rejects(set(`"processingState" = 'budget_blocked'`), /does not match/);
      await assert.rejects(set(`"processingState" = 'failed', "failureMessage" = NULL`), /does not match/);
      await assert.rejects(set(`"failureMessage" = 'left behind'`), /does not match/);
      await set(`"processingState" = 'budget_blocked', "budgetBlockReason" = 'dollar_limit_exhausted', "budgetBlockDetail" = 'd'`);
      await set(`"processingState" = NULL, "budgetBlockReason" = NULL, "budgetBlockDetail" = NULL`);
      // Statements that leave the four columns alone do not pay for the check.
      await set(`name = 'd6'`);
    });
  });
});
