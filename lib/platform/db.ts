import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaClient } from '../../generated/prisma/client.js';
import type { Logger } from './logger.js';

/**
 * The database: Prisma Client 7 over node-postgres (no native query engine), and the same
 * connection pool as `pool` for the few hot paths that are one SQL statement each (budget and quota
 * admission), where Prisma's per-statement work would cost more than the round trip itself.
 */
export type Db = PrismaClient & { readonly pool: pg.Pool };
export { Prisma } from '../../generated/prisma/client.js';

export function createDb(databaseUrl: string, poolSize = 10, log?: Logger): Db {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: poolSize });
  // An idle connection that PostgreSQL ends (a restart, a terminated backend) is an 'error' of the
  // pool, which drops that connection and opens a new one when needed; without a listener the
  // error would end the process. Prisma's adapter listens only while Prisma is connected.
  pool.on('error', (err) => log?.warn('an idle database connection was closed by the server', { error: err.message }));
  const client = new PrismaClient({ adapter: new PrismaPg(pool) });
  // Closing the client closes the pool the adapter was given, as it does for its own pools.
  const disconnect = client.$disconnect.bind(client);
  return Object.assign(client, {
    pool,
    $disconnect: async () => {
      await disconnect();
      if (!pool.ended) await pool.end();
    },
  });
}
