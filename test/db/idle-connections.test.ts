import assert from 'node:assert/strict';
import pg from 'pg';
import { createDb } from '../../lib/platform/db.js';
import { createLogger } from '../../lib/platform/logger.js';
import { testStack } from '../support/stack.js';
import { eventually } from '../support/system.js';

/** PostgreSQL ending an idle pooled connection (a restart, a terminated backend) does not end the process. */
describe('database pool: an idle connection ended by the server', () => {
  it('is logged and replaced; the next query runs', async () => {
    const warnings: string[] = [];
    const log = { ...createLogger({}, 'error'), warn: (msg: string) => void warnings.push(msg) };
    const db = createDb(testStack().databaseUrl, 2, log);
    const admin = new pg.Client({ connectionString: testStack().databaseUrl });
    await admin.connect();
    try {
      const { rows } = await db.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
      await eventually('the pool to report the ended connection', async () => warnings.length > 0);
      assert.deepEqual(warnings, ['an idle database connection was closed by the server']);
      const again = await db.pool.query<{ one: number }>('SELECT 1 AS one');
      assert.equal(again.rows[0]!.one, 1);
    } finally {
      await admin.end();
      await db.$disconnect();
    }
  });
});
