#!/usr/bin/env node
// Offline stand-in for Prisma's native `schema-engine` binary.
//
// WHY THIS FILE EXISTS
// --------------------
// Every Prisma 7 CLI command that touches the database schema (`migrate deploy|dev|diff|status|
// reset|resolve`, `db push|pull|execute`; `generate` only checks that the file exists) wants the
// native `schema-engine` executable. The CLI downloads it from binaries.prisma.sh on first use,
// which fails on machines without internet access (where only a package registry is reachable,
// say). The CLI's only hook is
// the env var PRISMA_SCHEMA_ENGINE_BINARY: it spawns whatever file that names, with the native
// binary's command line, and talks to it over stdio.
//
// This script is that file. It speaks the native binary's protocol and serves each call with the
// WebAssembly build of the very same engine, published on npm as `@prisma/schema-engine-wasm`.
// The wasm engine does no I/O of its own: it reaches Postgres through a Prisma driver adapter
// (`@prisma/adapter-pg`, i.e. node-postgres), which we hand it here. `scripts/prisma.sh` sets the
// env var and runs the unmodified CLI.
//
// Protocol (as spoken by node_modules/prisma/build/cli.js):
//   schema-engine --version                       print a version line on stdout, exit 0
//   schema-engine --datasource <json> cli <cmd>   one-shot command; <cmd> is
//                                                 can-connect-to-database | create-database |
//                                                 drop-database. Exit 0 on success; on failure
//                                                 exit 1 with JSON log lines on stderr, the first
//                                                 line being ignored by the CLI and an ERROR line
//                                                 carrying `fields.error_code` (P1003, ...).
//   schema-engine [--datamodels <file>]... [--datasource <json>]
//                                                 JSON-RPC 2.0 server: one request per line on
//                                                 stdin, one response per line on stdout, runs
//                                                 until stdin closes.
//   <json> is the config file's datasource: {"url": "...", "shadowDatabaseUrl": "..."}.
//
// Stdout carries protocol messages only; everything else (including the engine's own JSON log
// lines, which the CLI reads to build error messages) goes to stderr.
//
// Differences between the wasm engine and the native binary, and what we do about them:
//   * `createMigration` and `evaluateDataLoss` work in `migrate dev` (which calls `devDiagnostic`
//     first in the same engine session), but called on their own the wasm engine fails with
//     "PostgreSQL shadow DB must be provided through an external factory", while `diff` from the
//     migrations folder to the schema works. On that error they are served with that diff
//     instead; data-loss warnings are then approximated (see evaluateDataLossViaDiff).
//   * The wasm engine queries its database when it starts, the native one lazily: a diff that
//     does not read the configured database still works when that database does not exist yet
//     (see EngineHost.diff), but needs a reachable Postgres server.
//   * The native binary prints `migrate diff` output through a `print` request to the CLI; the
//     wasm engine returns it, so we send that request ourselves.
//   * `getDatabaseVersion` is called `version` in the wasm engine; `createDatabase` is not there
//     at all and is done here with node-postgres.
//   * @prisma/adapter-pg 7.10.1 is worked around in four places (see makeAdapterFactory): it
//     cannot decode Postgres' internal `"char"` type used by the catalog queries of the schema
//     describer; it splits SQL scripts on every ";"; its shadow database keeps the main URL's
//     database name (so the "shadow" would be the main database); and it drops the shadow
//     database while still connected to it.
//
// Debugging: set PRISMA_SCHEMA_ENGINE_SHIM_DEBUG=1 to trace requests on stderr. Set
// PRISMA_SCHEMA_ENGINE_WASM to the path of another interface-compatible schema_engine_bg.wasm to
// use it instead of the one from @prisma/schema-engine-wasm.

import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

import pg from 'pg';

// Stdout is reserved for the protocol: route any stray console output of libraries to stderr.
console.log = console.info = console.debug = (...args) => console.error(...args);

const DEBUG = /^(?:1|true|yes)$/i.test(process.env.PRISMA_SCHEMA_ENGINE_SHIM_DEBUG ?? '');

function debug(...args) {
  if (DEBUG) console.error('[schema-engine-shim]', ...args);
}

// The CLI parses stderr lines as JSON log records in the native format; keep to that shape.
function logLine(level, message, extra = {}) {
  process.stderr.write(
    JSON.stringify({
      timestamp: new Date().toISOString(),
      level,
      fields: { message, ...extra },
      target: 'schema_engine::logger',
    }) + '\n',
  );
}

// ---------------------------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------------------------

function parseArgs(argv) {
  const args = { datamodels: [], datasource: undefined, cli: undefined, version: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    switch (arg) {
      case '--version':
      case '-V':
        args.version = true;
        break;
      case '--datamodels':
        // The CLI passes one `--datamodels <file>` pair per schema file; accept several files
        // after a single flag too.
        while (i + 1 < argv.length && !argv[i + 1].startsWith('--') && argv[i + 1] !== 'cli') {
          args.datamodels.push(argv[++i]);
        }
        break;
      case '--datasource':
        args.datasource = JSON.parse(argv[++i] ?? '{}');
        break;
      case '--enabled-preview-features':
      case '--extension-types':
        // Not supported by the wasm engine's constructor; harmless for this project.
        debug(`ignoring ${arg} ${argv[i + 1]}`);
        i++;
        break;
      case 'cli':
        args.cli = argv[++i];
        break;
      default:
        debug(`ignoring unknown argument ${arg}`);
    }
  }
  return args;
}

// ---------------------------------------------------------------------------------------------
// Postgres helpers (node-postgres only; used by the one-shot CLI commands and createDatabase)
// ---------------------------------------------------------------------------------------------

function quoteIdent(name) {
  return `"${String(name).replace(/"/g, '""')}"`;
}

function databaseName(url) {
  return decodeURIComponent(new URL(url).pathname.replace(/^\//, '')) || 'postgres';
}

function withDatabase(url, name) {
  const u = new URL(url);
  u.pathname = `/${encodeURIComponent(name)}`;
  return u.toString();
}

function serverLocation(url) {
  const u = new URL(url);
  return `${u.hostname || u.searchParams.get('host') || 'localhost'}:${u.port || 5432}`;
}

/** Runs `fn(client)` on a single connection to `url`, always closing it. */
async function withClient(url, fn) {
  const client = new pg.Client({ connectionString: url });
  client.on('error', (err) => debug('idle client error', err.message));
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Runs `fn` on a connection to a database of the server, for statements such as CREATE DATABASE
 * that must not run inside the target database: the URL's own database if it exists (and is not
 * `avoid`), else the usual maintenance databases.
 */
async function withServerClient(url, fn, avoid) {
  const candidates = [databaseName(url), 'postgres', 'template1'].filter((db) => db !== avoid);
  let lastError;
  for (const db of [...new Set(candidates)]) {
    let client;
    try {
      client = new pg.Client({ connectionString: withDatabase(url, db) });
      client.on('error', (err) => debug('idle client error', err.message));
      await client.connect();
    } catch (err) {
      lastError = err;
      await client?.end().catch(() => {});
      if (err.code === '3D000') continue; // that database does not exist; try the next one
      throw err;
    }
    try {
      return await fn(client);
    } finally {
      await client.end().catch(() => {});
    }
  }
  throw lastError;
}

/** Maps a node-postgres error to the native engine's user-facing error code and message. */
function describePgError(err, url) {
  const u = new URL(url);
  const db = databaseName(url);
  const location = serverLocation(url);
  const user = decodeURIComponent(u.username || process.env.PGUSER || '');
  switch (err.code) {
    case '3D000':
      return { code: 'P1003', message: `Database \`${db}\` does not exist on the database server at \`${location}\`.` };
    case '28P01':
    case '28000':
      return {
        code: 'P1000',
        message: `Authentication failed against database server at \`${location}\`, the provided database credentials for \`${user}\` are not valid.`,
      };
    case '42P04':
      return { code: 'P1009', message: `Database \`${db}\` already exists on the database server at \`${location}\`` };
    case '42501':
      return { code: 'P1010', message: `User \`${user}\` was denied access on the database \`${db}\`` };
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EHOSTUNREACH':
    case 'ETIMEDOUT':
      return { code: 'P1001', message: `Can't reach database server at \`${location}\`\n\nPlease make sure your database server is running at \`${location}\`.` };
    default:
      return { code: undefined, message: err.message || String(err) };
  }
}

async function createDatabase(url) {
  const name = databaseName(url);
  await withServerClient(url, (client) => client.query(`CREATE DATABASE ${quoteIdent(name)}`), name);
  return name;
}

async function dropDatabase(url) {
  const name = databaseName(url);
  await withServerClient(url, (client) => dropDatabaseNamed(client, name), name);
}

async function dropDatabaseNamed(client, name) {
  try {
    // WITH (FORCE) (Postgres 13+) also ends connections that are still open to it.
    await client.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`);
  } catch (err) {
    if (err.code !== '42601') throw err; // syntax error: server older than 13
    await client.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)}`);
  }
}

async function runCliCommand(command, datasource) {
  const url = datasource?.url;
  // First stderr line is skipped by the CLI's parser; it must still be one line.
  logLine('INFO', `schema-engine wasm shim: ${command}`);
  if (!url) {
    logLine('ERROR', 'No datasource URL was provided (--datasource).');
    return 1;
  }
  try {
    switch (command) {
      case 'can-connect-to-database':
        await withClient(url, (client) => client.query('SELECT 1'));
        process.stdout.write('Connection successful\n');
        return 0;
      case 'create-database':
        process.stdout.write(`Database '${await createDatabase(url)}' was successfully created.\n`);
        return 0;
      case 'drop-database':
        await dropDatabase(url);
        process.stdout.write(`The database was successfully dropped.\n`);
        return 0;
      default:
        logLine('ERROR', `Unknown cli command: ${command}`);
        return 1;
    }
  } catch (err) {
    const { code, message } = describePgError(err, url);
    logLine('ERROR', message, code ? { is_panic: false, error_code: code } : { is_panic: false });
    return 1;
  }
}

// ---------------------------------------------------------------------------------------------
// Driver adapter handed to the wasm engine
// ---------------------------------------------------------------------------------------------

// Postgres' internal single-byte `"char"` type (oid 18) appears in catalog columns the schema
// describer selects (pg_class.relkind, pg_constraint.contype, ...). @prisma/adapter-pg 7.10.1 has
// no column type for it and fails with "Column type 'char' could not be deserialized". Its values
// arrive as one-character strings, so we report such columns as `text` (oid 25), which the adapter
// maps to a string column. Done in a pg.Client subclass, a documented pg.Pool option.
const RETYPED_OIDS = new Map([[18, 25]]);

function retypeResult(res) {
  for (const r of Array.isArray(res) ? res : [res]) {
    for (const field of r?.fields ?? []) {
      const to = RETYPED_OIDS.get(field.dataTypeID);
      if (to !== undefined) field.dataTypeID = to;
    }
  }
  return res;
}

class CatalogFriendlyClient extends pg.Client {
  query(config, values, callback) {
    if (config && typeof config.submit === 'function') return super.query(config, values, callback);
    if (typeof callback === 'function') {
      return super.query(config, values, (err, res) => callback(err, err ? res : retypeResult(res)));
    }
    if (typeof values === 'function') {
      return super.query(config, (err, res) => values(err, err ? res : retypeResult(res)));
    }
    const result = super.query(config, values);
    return result && typeof result.then === 'function' ? result.then(retypeResult) : result;
  }
}

const liveAdapters = new Set(); // closed on shutdown, else their pools keep the process alive
const liveShadowDatabases = new Map(); // name -> server URL, dropped on shutdown if still there

/**
 * Wraps @prisma/adapter-pg's factory for the wasm engine. Besides CatalogFriendlyClient:
 *  - executeScript: the adapter splits scripts on every ";" (breaking `DO $$ ... $$` bodies and
 *    string literals) and runs the pieces one by one; we send the script whole in one
 *    simple-protocol query, as the native engine does, so a migration applies all-or-nothing.
 *  - connectToShadowDb: the adapter spreads `{...config, database}` into pg, but pg lets the
 *    connection string's database override `database`, so the "shadow" database would be the
 *    main one (migrations replayed on the real data). It also drops the shadow database before
 *    closing its pool. We build the shadow URL ourselves, check that we are connected to it, and
 *    drop it (forcefully) after the pool is closed.
 */
async function makeAdapterFactory(url, shadowDatabaseUrl) {
  const { PrismaPg } = await import('@prisma/adapter-pg');
  const { bindMigrationAwareSqlAdapterFactory } = await import('@prisma/driver-adapter-utils');

  const schema = new URL(url).searchParams.get('schema') ?? undefined;
  const adapterOptions = schema ? { schema } : undefined;
  const pgConfig = (connectionString) => ({ connectionString, Client: CatalogFriendlyClient });

  if (shadowDatabaseUrl) {
    logLine('WARN', 'shadowDatabaseUrl is ignored by the wasm shim; a temporary shadow database is created on the main server instead.');
  }

  const track = (adapter) => {
    const executeScript = async (script) => {
      try {
        await adapter.underlyingDriver().query(script);
      } catch (err) {
        // onError converts pg errors into the DriverAdapterError the engine understands (throws).
        if (typeof adapter.onError === 'function') adapter.onError(err);
        throw err;
      }
    };
    const dispose = adapter.dispose.bind(adapter);
    let disposed;
    adapter.executeScript = executeScript;
    adapter.dispose = () => {
      disposed ??= (async () => {
        liveAdapters.delete(adapter);
        await dispose();
      })();
      return disposed;
    };
    liveAdapters.add(adapter);
    return adapter;
  };

  const main = new PrismaPg(pgConfig(url), adapterOptions);

  const factory = {
    provider: main.provider,
    adapterName: main.adapterName,
    async connect() {
      return track(await main.connect());
    },
    async connectToShadowDb() {
      const name = `prisma_migrate_shadow_db_${randomUUID()}`;
      await withServerClient(url, (client) => client.query(`CREATE DATABASE ${quoteIdent(name)}`));
      liveShadowDatabases.set(name, url);
      debug(`created shadow database ${name}`);
      const adapter = track(await new PrismaPg(pgConfig(withDatabase(url, name)), adapterOptions).connect());
      const dropShadow = async () => {
        if (!liveShadowDatabases.has(name)) return;
        await withServerClient(url, (client) => dropDatabaseNamed(client, name), name);
        liveShadowDatabases.delete(name);
        debug(`dropped shadow database ${name}`);
      };
      try {
        const { rows } = await adapter.underlyingDriver().query('SELECT current_database() AS db');
        if (rows[0]?.db !== name) {
          throw new Error(`shadow connection landed in database "${rows[0]?.db}" instead of "${name}"`);
        }
      } catch (err) {
        await adapter.dispose().catch(() => {});
        await dropShadow().catch(() => {});
        throw err;
      }
      const closePool = adapter.dispose;
      let disposed;
      adapter.dispose = () => {
        disposed ??= (async () => {
          try {
            await closePool();
          } finally {
            await dropShadow();
          }
        })();
        return disposed;
      };
      return adapter;
    },
  };
  return bindMigrationAwareSqlAdapterFactory(factory);
}

// ---------------------------------------------------------------------------------------------
// The wasm engine
// ---------------------------------------------------------------------------------------------

// The wasm engine reports a Rust panic by storing its message in this global (which the Prisma
// CLI also defines for its own wasm modules) and then trapping with a WebAssembly.RuntimeError.
const panicRegistry = {
  message: '',
  get() {
    return this.message;
  },
  set_message(message) {
    this.message = String(message);
  },
};
globalThis.PRISMA_WASM_PANIC_REGISTRY = panicRegistry;

let wasmModulePromise;

/** Loads @prisma/schema-engine-wasm's bindings. Its entry point imports the .wasm file as an
 * ES module, which Node 20 cannot do without a flag, so we instantiate the bytes ourselves. */
function loadWasmEngine() {
  wasmModulePromise ??= (async () => {
    const bindingsSpecifier = '@prisma/schema-engine-wasm/schema_engine_bg';
    const bindings = await import(bindingsSpecifier);
    const wasmPath =
      process.env.PRISMA_SCHEMA_ENGINE_WASM ||
      fileURLToPath(new URL('./schema_engine_bg.wasm', import.meta.resolve(bindingsSpecifier)));
    const module = new WebAssembly.Module(fs.readFileSync(wasmPath));
    const instance = new WebAssembly.Instance(module, { './schema_engine_bg.js': bindings });
    bindings.__wbg_set_wasm(instance.exports);
    instance.exports.__wbindgen_start();
    debug(`loaded ${wasmPath}, engine version ${bindings.version()}`);
    return bindings;
  })();
  return wasmModulePromise;
}

class EngineHost {
  constructor({ datamodelFiles, datasource }) {
    this.datamodels = datamodelFiles.map((file) => [file, fs.readFileSync(file, 'utf8')]);
    this.datasource = datasource ?? {};
    this.engines = new Map(); // url -> Promise<SchemaEngine>
  }

  get url() {
    const url = this.datasource.url;
    if (!url) throw userError('P1012', 'No datasource URL was provided to the schema engine (set `datasource.url` in prisma.config.ts).');
    return url;
  }

  /** One wasm engine per database URL (the engine is bound to its adapter at construction). */
  engine(url = this.url) {
    if (!this.engines.has(url)) {
      this.engines.set(
        url,
        (async () => {
          const { SchemaEngine } = await loadWasmEngine();
          const shadow = url === this.datasource.url ? this.datasource.shadowDatabaseUrl : undefined;
          const adapterFactory = await makeAdapterFactory(url, shadow);
          const onLog = (line) => process.stderr.write(`${String(line).trimEnd()}\n`);
          return SchemaEngine.new({ datamodels: this.datamodels.length ? this.datamodels : undefined }, onLog, adapterFactory);
        })(),
      );
      // Do not cache a failed start (e.g. database missing): a later call may succeed.
      this.engines.get(url).catch(() => this.engines.delete(url));
    }
    return this.engines.get(url);
  }

  urlOf(datasourceParam) {
    if (datasourceParam?.tag === 'ConnectionString' && datasourceParam.url) return datasourceParam.url;
    return this.url;
  }

  async dispatch(method, params) {
    switch (method) {
      case 'getDatabaseVersion':
        return (await this.engine(this.urlOf(params?.datasource))).version(params ?? null);
      case 'createDatabase':
        return { databaseName: await createDatabase(this.urlOf(params?.datasource)) };
      case 'ensureConnectionValidity':
        return (await this.engine(this.urlOf(params?.datasource))).ensureConnectionValidity(params);
      case 'dbExecute': {
        const target = params?.datasourceType;
        const url = target?.tag === 'url' && target.url ? target.url : this.url;
        return (await this.engine(url)).dbExecute(params);
      }
      case 'createMigration':
        return this.withShadowFallback('createMigration', params, () => this.createMigrationViaDiff(params));
      case 'evaluateDataLoss':
        return this.withShadowFallback('evaluateDataLoss', params, () => this.evaluateDataLossViaDiff(params));
      case 'debugPanic':
        return (await this.engine()).debugPanic();
      case 'diff':
        return this.diff(params);
      case 'applyMigrations':
      case 'devDiagnostic':
      case 'diagnoseMigrationHistory':
      case 'introspect':
      case 'introspectSql':
      case 'markMigrationApplied':
      case 'markMigrationRolledBack':
      case 'reset':
      case 'schemaPush': {
        const engine = await this.engine();
        return engine[method](params);
      }
      default:
        throw userError(undefined, `The schema engine wasm shim does not support the method \`${method}\`.`);
    }
  }

  /**
   * The wasm engine queries its database as soon as it is constructed, whereas the native binary
   * connects lazily: `migrate diff --from-empty --to-schema ...` works natively even when the
   * configured database has not been created yet. When neither side of the diff reads the
   * configured database, fall back to the server's `postgres` database (only used for that
   * initial query; shadow databases are still created on the same server).
   */
  async diff(params) {
    const readsConfiguredDatabase = [params?.from?.tag, params?.to?.tag].some((tag) => tag === 'schemaDatasource' || tag === 'url');
    let engine;
    try {
      engine = await this.engine();
    } catch (err) {
      if (readsConfiguredDatabase || !isMissingDatabaseError(err)) throw err;
      const fallbackUrl = withDatabase(this.url, 'postgres');
      debug(`configured database does not exist; running diff bound to ${databaseName(fallbackUrl)}`);
      engine = await this.engine(fallbackUrl);
    }
    return engine.diff(params);
  }

  async withShadowFallback(method, params, fallback) {
    const engine = await this.engine();
    try {
      return await engine[method](params);
    } catch (err) {
      if (!/shadow DB must be provided through an external factory/i.test(String(err?.message))) throw err;
      debug(`${method}: wasm engine has no shadow database here, using diff(migrations -> schema)`);
      return fallback();
    }
  }

  /** diff(migrations folder -> schema); the engine replays the migrations in a shadow database. */
  async diffMigrationsToSchema(params, script) {
    const engine = await this.engine();
    return engine.diff({
      from: { tag: 'migrations', ...params.migrationsList },
      to: { tag: 'schemaDatamodel', ...params.schema },
      script,
      exitCode: true, // exitCode 2 means "not empty"
      filters: params.filters ?? { externalTables: [], externalEnums: [] },
    });
  }

  async createMigrationViaDiff(params) {
    const { exitCode, stdout } = await this.diffMigrationsToSchema(params, true);
    const empty = exitCode === 0;
    const timestamp = new Date().toISOString().replace(/\D/g, '').slice(0, 14); // UTC YYYYMMDDHHMMSS
    const name = params.migrationName ? `${timestamp}_${params.migrationName}` : timestamp;
    return {
      connectorType: 'postgresql',
      generatedMigrationName: name,
      migrationScript: empty && !params.draft ? null : (stdout ?? ''),
      extension: 'sql',
    };
  }

  /**
   * Approximation of the native data-loss check (which needs the shadow database the wasm engine
   * cannot get here). The human-readable summary of diff(migrations -> schema) says what the next
   * migration drops or rewrites; as natively, only objects that still hold data in the configured
   * database (assumed to be migrated up to date) produce a warning, so `migrate dev` asks before
   * destroying data. Unlike the native check, "unexecutable" steps (e.g. a new required column on
   * a non-empty table) are not predicted: such a migration fails when applied instead.
   */
  async evaluateDataLossViaDiff(params) {
    const { exitCode, stdout } = await this.diffMigrationsToSchema(params, false);
    const risky = [];
    let table;
    let droppingTables = false;
    for (const line of (stdout ?? '').split('\n')) {
      let m;
      if (/^\[[+\-*]\] /.test(line)) {
        droppingTables = /^\[-\] Removed tables/.test(line);
        table = line.match(/^\[\*\] Changed the `([^`]+)` table/)?.[1];
      } else if (droppingTables && (m = line.match(/^\s+- (.+)$/))) {
        risky.push({ table: m[1].trim(), message: `You are about to drop the \`${m[1].trim()}\` table, which is not empty.` });
      } else if (table && (m = line.match(/^\s+\[-\] Removed column `([^`]+)`/))) {
        risky.push({ table, column: m[1], message: `You are about to drop the column \`${m[1]}\` on the \`${table}\` table, which still contains data.` });
      } else if (table && (m = line.match(/^\s+\[\*\] (?:Altered column|Column) `([^`]+)`(.*)$/)) && /type changed|dropped and recreated/.test(m[2])) {
        risky.push({ table, column: m[1], message: `The type of the column \`${m[1]}\` on the \`${table}\` table changes; its data may be lost or the cast may fail.` });
      } else if ((m = line.match(/^\s+\[-\] Removed variant `([^`]+)`/))) {
        risky.push({ message: `You are about to remove the enum value \`${m[1]}\`; rows using it would fail to migrate.` });
      }
    }
    const warnings = [];
    for (const item of risky) {
      if (item.table && !(await this.holdsData(item.table, item.column))) continue;
      warnings.push({ message: item.message, stepIndex: warnings.length });
    }
    return { migrationSteps: exitCode === 2 ? 1 : 0, unexecutableSteps: [], warnings };
  }

  /** Whether `table` (or its `column`) holds any data in the configured database; true if unsure. */
  async holdsData(table, column) {
    const schema = new URL(this.url).searchParams.get('schema') || 'public';
    const from = `${quoteIdent(schema)}.${quoteIdent(table)}`;
    const where = column ? ` WHERE ${quoteIdent(column)} IS NOT NULL` : '';
    try {
      return await withClient(this.url, async (client) => (await client.query(`SELECT EXISTS (SELECT 1 FROM ${from}${where}) AS found`)).rows[0].found === true);
    } catch (err) {
      debug(`data check on ${from} failed, assuming it holds data: ${err.message}`);
      return true;
    }
  }

  async close() {
    for (const enginePromise of this.engines.values()) {
      try {
        (await enginePromise).free();
      } catch {
        // engine failed to start or was already freed
      }
    }
    this.engines.clear();
  }
}

function isMissingDatabaseError(err) {
  return /^Database `[^`]*` does not exist/.test(String(err?.message ?? ''));
}

function userError(code, message) {
  const err = new Error(message);
  err.userFacing = true;
  if (code) err.errorCode = code;
  return err;
}

/** Shapes an error like the native engine's JSON-RPC errors, which the CLI knows how to print. */
function toRpcError(err) {
  const isPanic = err instanceof WebAssembly.RuntimeError;
  let message = err instanceof Error ? err.message : typeof err === 'string' ? err : JSON.stringify(err);
  if (isPanic && panicRegistry.message) message = panicRegistry.message;
  // Engine errors carry their P-code in `code`; a missing database at engine start does not.
  const errorCode = err?.errorCode ?? err?.code ?? err?.error_code ?? (isMissingDatabaseError(err) ? 'P1003' : undefined);
  return {
    code: 4466,
    // For panics the CLI prints the top-level message (or data.error.message).
    message: isPanic ? message : 'An error happened. Check the data field for details.',
    data: {
      is_panic: isPanic,
      message,
      meta: err?.meta ?? null,
      ...(typeof errorCode === 'string' && /^P\d{4}$/.test(errorCode) ? { error_code: errorCode } : {}),
    },
  };
}

// ---------------------------------------------------------------------------------------------
// JSON-RPC server over stdio
// ---------------------------------------------------------------------------------------------

async function cleanup(host) {
  const deadline = new Promise((resolve) => setTimeout(resolve, 5000).unref());
  const work = (async () => {
    await host?.close();
    await Promise.allSettled([...liveAdapters].map((adapter) => adapter.dispose()));
    for (const [name, url] of liveShadowDatabases) {
      await withServerClient(url, (client) => dropDatabaseNamed(client, name), name).catch((err) =>
        logLine('WARN', `could not drop shadow database ${name}: ${err.message}`),
      );
    }
  })();
  await Promise.race([work, deadline]);
}

function writeMessage(message) {
  return new Promise((resolve) => process.stdout.write(JSON.stringify(message) + '\n', resolve));
}

async function serveRpc(args) {
  const host = new EngineHost({ datamodelFiles: args.datamodels, datasource: args.datasource });
  let queue = Promise.resolve();
  let panicked = false;

  const handle = async (line) => {
    if (!line.trim() || panicked) return;
    // After a panic the wasm instance is in an undefined state; the native binary exits with
    // code 101, which the CLI reports as a panic (see the end of serveRpc).
    let request;
    try {
      request = JSON.parse(line);
    } catch {
      await writeMessage({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
      return;
    }
    // Responses to our own requests (we send none) and notifications need no answer.
    if (request.method === undefined || request.id === undefined) return;
    debug(`-> ${request.method} #${request.id}`);
    try {
      let result = await host.dispatch(request.method, request.params);
      debug(`<- ${request.method} #${request.id} ok`);
      if (request.method === 'diff' && typeof result?.stdout === 'string') {
        // The native binary does not return the diff: it asks the CLI to print it with a
        // `print` request (the CLI writes `content` to its stdout and acks on our stdin, an ack
        // `handle` ignores). The wasm engine returns it instead; forward it the native way.
        await writeMessage({ jsonrpc: '2.0', id: `print-${request.id}`, method: 'print', params: { content: result.stdout } });
        result = { ...result, stdout: null };
      }
      // The CLI rejects a response without `result`; void methods answer `{}` like the binary.
      await writeMessage({ jsonrpc: '2.0', id: request.id, result: result ?? {} });
    } catch (err) {
      const error = toRpcError(err);
      debug(`<- ${request.method} #${request.id} error`, err);
      if (!err?.userFacing) logLine('ERROR', error.data.message, { is_panic: error.data.is_panic });
      await writeMessage({ jsonrpc: '2.0', id: request.id, error });
      if (error.data.is_panic) {
        panicked = true;
        lines.close();
      }
    }
  };

  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  lines.on('line', (line) => {
    queue = queue.then(() => handle(line));
  });
  await new Promise((resolve) => lines.once('close', resolve));
  await queue;
  await cleanup(host);
  return panicked ? 101 : 0;
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const args = parseArgs(process.argv.slice(2));

  if (args.version) {
    const { version } = await loadWasmEngine();
    process.stdout.write(`schema-engine-cli ${version()} (wasm shim: scripts/prisma-schema-engine.mjs)\n`);
    return 0;
  }
  if (args.cli) return runCliCommand(args.cli, args.datasource);
  return serveRpc(args);
}

// The CLI stops the engine by closing stdin and then sending SIGTERM right away.
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.once(signal, () => {
    cleanup(undefined).finally(() => process.exit(0));
  });
}

main().then(
  (code) => process.exit(code),
  (err) => {
    logLine('ERROR', err?.stack || String(err), { is_panic: false });
    process.exit(1);
  },
);
