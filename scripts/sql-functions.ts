import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { dropDatabase, ensureDatabase, migrate, repoRoot } from './stack.js';

/**
 * The SQL functions (PL/pgSQL: budget and quota admission, rate limits, counting triggers) are
 * kept one file each in prisma/functions/<name>.sql, their current definition as
 * `CREATE OR REPLACE FUNCTION` (docs/architecture-sql-functions.md). Migrations carry them to
 * databases: scripts/new-migration.sh appends the files that differ from what the migrations
 * leave, and test/db/sql-functions.test.ts proves that the files and the migrations agree.
 *
 * Two definitions are compared as Postgres prints them (pg_get_functiondef): a file's is read
 * after running it inside a transaction that is rolled back, so nothing is changed.
 */

export const functionsDir = path.join(repoRoot, 'prisma', 'functions');

export interface FunctionFile {
  name: string;
  file: string;
  sql: string;
}

export function functionFiles(): FunctionFile[] {
  if (!fs.existsSync(functionsDir)) return [];
  return fs
    .readdirSync(functionsDir)
    .filter((f) => f.endsWith('.sql'))
    .sort()
    .map((f) => ({ name: f.slice(0, -'.sql'.length), file: path.join(functionsDir, f), sql: fs.readFileSync(path.join(functionsDir, f), 'utf8') }));
}

/** Every function of the public schema written in SQL or PL/pgSQL (not those of extensions), with its definition. */
export async function liveFunctions(client: pg.ClientBase): Promise<Map<string, string>> {
  const { rows } = await client.query<{ name: string; definition: string }>(`
    SELECT p.proname AS name, pg_get_functiondef(p.oid) AS definition
    FROM pg_proc p
    JOIN pg_namespace n ON n.oid = p.pronamespace
    JOIN pg_language l ON l.oid = p.prolang
    WHERE n.nspname = 'public' AND l.lanname IN ('plpgsql', 'sql') AND p.prokind = 'f'
      AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
    ORDER BY p.proname, p.oid`);
  const out = new Map<string, string>();
  for (const r of rows) {
    if (out.has(r.name)) throw new Error(`function ${r.name} is overloaded: keep one definition per name (prisma/functions/${r.name}.sql)`);
    out.set(r.name, r.definition);
  }
  return out;
}

/** The definition a file gives its function, as Postgres prints it (the file runs in a transaction that is rolled back). */
export async function fileDefinition(client: pg.ClientBase, f: FunctionFile): Promise<string> {
  await client.query('BEGIN');
  try {
    await client.query(f.sql);
    const defined = (await liveFunctions(client)).get(f.name);
    if (defined === undefined) throw new Error(`${path.relative(repoRoot, f.file)} does not define a function named ${f.name}`);
    return defined;
  } finally {
    await client.query('ROLLBACK');
  }
}

export interface FunctionDrift {
  /** Files whose definition differs from the database's, or that it lacks. */
  changed: FunctionFile[];
  /** Functions of the database without a file. */
  withoutFile: string[];
}

/** How prisma/functions differs from the functions of the database at `client`. */
export async function functionDrift(client: pg.ClientBase): Promise<FunctionDrift> {
  const live = await liveFunctions(client);
  const files = functionFiles();
  const changed: FunctionFile[] = [];
  for (const f of files) if ((await fileDefinition(client, f)) !== live.get(f.name)) changed.push(f);
  const named = new Set(files.map((f) => f.name));
  return { changed, withoutFile: [...live.keys()].filter((name) => !named.has(name)) };
}

/** `changed <database url>`: migrates a scratch database beside that one and prints the files that differ from it, one path a line. */
async function main(args: string[]): Promise<void> {
  const [command, baseUrl] = args;
  if (command !== 'changed' || !baseUrl) {
    console.error('usage: node --import tsx scripts/sql-functions.ts changed <database url>');
    process.exit(64);
  }
  const scratch = new URL(baseUrl);
  scratch.pathname = `/dwb_functions_${process.pid}`;
  await dropDatabase(scratch.toString());
  await ensureDatabase(scratch.toString());
  try {
    await migrate(scratch.toString());
    const client = new pg.Client({ connectionString: scratch.toString() });
    await client.connect();
    try {
      const drift = await functionDrift(client);
      for (const name of drift.withoutFile) console.error(`warning: function ${name} has no file prisma/functions/${name}.sql`);
      for (const f of drift.changed) console.log(path.relative(repoRoot, f.file));
    } finally {
      await client.end();
    }
  } finally {
    await dropDatabase(scratch.toString());
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
