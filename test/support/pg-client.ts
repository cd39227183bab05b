import pg from 'pg';

/** Runs `fn` on a connection of its own to `connectionString`, closed afterwards whatever happens. */
export async function withPgClient<T>(connectionString: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
