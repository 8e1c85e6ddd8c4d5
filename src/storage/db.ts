/**
 * The storage seam: one Kysely instance over SQLite (default, embedded) or PostgreSQL (DATABASE_URL).
 * Everything above this file writes the same queries for both.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { type DatabaseConnection, Kysely, PostgresDialect, sql } from 'kysely';
import { Migrator } from 'kysely/migration';
import type pg from 'pg';
import type { Logger } from 'pino';
import { type Config, parseDatabaseUrl } from '../config.ts';
import { createPrivateFile } from '../lib/private-files.ts';
import type { SecretBox } from '../lib/secret-box.ts';
import { type ChangeSignal, postgresChangeSignal, sqliteChangeSignal } from './change-signal.ts';
import { migrationProvider } from './migrations/index.ts';
import { beginWithFirstStatement } from './postgres-begin.ts';
import type { Database } from './schema.ts';
import { NodeSqliteDialect, openSqlite } from './sqlite-adapter.ts';
import { createFreshSqlite } from './sqlite-fresh.ts';
import { createStorageSpace, reportFailures, type StorageSpace } from './storage-space.ts';

export type Dialect = 'sqlite' | 'postgres';

/** A database handle or an open transaction; repositories accept either. */
export type Executor = Kysely<Database>;

export interface Storage {
  db: Kysely<Database>;
  /**
   * The handle the engine's turns use. On Postgres it has its own connection pool, so that API requests (a client
   * polling its messages, many at once) cannot queue a turn's statements behind theirs; on SQLite it is `db`.
   */
  workerDb: Kysely<Database>;
  /**
   * The handle of counters that every request writes and that may lose their last increments when the database
   * server itself crashes: the requests-per-minute windows. On Postgres its connections commit without waiting for
   * the write-ahead log to reach the disk (`synchronous_commit = off`; the server flushes it within a fraction of a
   * second), so the requests of one busy key, which all increment the same row, do not queue behind each other's
   * flushes; on SQLite it is `db`. The engine's registry heartbeats use it too (process-registry.ts): a liveness
   * signal, written again within a second, whose last beat a crash of the database server may lose.
   */
  counterDb: Kysely<Database>;
  dialect: Dialect;
  /** A human-readable description of where the data lives (no credentials). */
  location: string;
  /** Whether writes work, or fail for lack of space (storage-space.ts); every failed statement is reported to it. */
  space: StorageSpace;
  ping(): Promise<void>;
  /**
   * A number that moves whenever an API key, agent or webhook endpoint may have changed, in this process or another one
   * (change-signal.ts), or null while other processes' changes cannot be seen: callers must then not cache.
   */
  changeVersion(): number | null;
  /** Applies pending migrations; `secrets` seals what a migration moves into encrypted columns. */
  migrate(secrets: Pick<SecretBox, 'seal'>): Promise<string[]>;
  close(): Promise<void>;
}

const INT8_OID = 20;
const MIGRATION_ATTEMPTS = 5;
const NUMERIC_OID = 1700;

function postgresTypes(types: typeof pg.types): pg.CustomTypesConfig {
  // Epoch-millisecond timestamps and micro-dollar balances fit in a double exactly; return numbers, not strings.
  return {
    getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
      if (oid === INT8_OID || oid === NUMERIC_OID) return (value: string) => Number(value);
      return format === 'binary' ? types.getTypeParser(oid, 'binary') : types.getTypeParser(oid, 'text');
    }) as pg.CustomTypesConfig['getTypeParser'],
  };
}

function describePostgres(url: string, schema: string | null): string {
  const parsed = parseDatabaseUrl(url);
  // A `host` parameter is where node-postgres connects: a Unix socket's directory, or a host name.
  const host = parsed.searchParams.get('host');
  const socket = host?.startsWith('/') === true ? host : null;
  const notes = [...(socket === null ? [] : [`socket ${socket}`]), ...(schema === null ? [] : [`schema ${schema}`])];
  const where = socket === null ? (host ?? parsed.host) : '';
  return `postgres://${where}${parsed.pathname}${notes.length === 0 ? '' : ` (${notes.join(', ')})`}`;
}

/** The default of AGENTRY_DATABASE_TIMEOUT_MS. */
export const DATABASE_TIMEOUT_MS = 5000;

/**
 * The settings of every Postgres connection of this process. Connecting is bounded by `timeoutMs`; with `bounded`,
 * so is every statement, on both sides: the server cancels a statement past it (statement_timeout) and the client
 * stops waiting for an answer that does not come (query_timeout, for a database that cannot be reached at all).
 * An unreachable database is then an error within the bound, never a request or a turn that hangs.
 */
function postgresConnection(
  url: string,
  schema: string | null,
  timeoutMs: number,
  bounded: boolean,
  settings: readonly string[] = [],
): pg.ClientConfig & pg.PoolConfig {
  const options = [
    ...(schema === null ? [] : [`-c search_path="${schema}"`]),
    ...settings.map((setting) => `-c ${setting}`),
  ];
  return {
    connectionString: url,
    // Names the process's connections in pg_stat_activity, unless the URL names them already.
    fallback_application_name: 'agentry',
    connectionTimeoutMillis: timeoutMs,
    keepAlive: true,
    ...(bounded ? { query_timeout: timeoutMs, statement_timeout: timeoutMs } : {}),
    ...(options.length === 0 ? {} : { options: options.join(' ') }),
  };
}

/**
 * After secrets were replaced in place, their old bytes are still in the database files (free space in pages, the
 * SQLite write-ahead log, dead Postgres row versions). Rewrites what holds them: SQLite's VACUUM rebuilds the whole
 * file and the truncating checkpoint empties the log; Postgres's VACUUM FULL rewrites the tables into new files.
 */
async function purgeFreeSpace(
  db: Kysely<Database>,
  dialect: Dialect,
  tables: string[],
  logger: Logger | undefined,
): Promise<void> {
  if (dialect === 'postgres') {
    if (!(await olderTransactionsEnded(db, PURGE_WAIT_MS))) {
      logger?.warn(
        { tables, waitedMs: PURGE_WAIT_MS },
        'replaced secrets purged while older transactions were still open: their old values may stay in these ' +
          "tables' files until the tables are next rewritten (VACUUM FULL)",
      );
    }
    for (const table of tables) await sql`vacuum full ${sql.table(table)}`.execute(db);
    return;
  }
  await sql`vacuum`.execute(db);
  for (let attempt = 1; ; attempt++) {
    const result = await sql<{ busy: number }>`pragma wal_checkpoint(truncate)`.execute(db);
    if (result.rows[0]?.busy !== 1 || attempt === MIGRATION_ATTEMPTS) return;
    await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
  }
}

/** How long a purge on Postgres waits for the transactions that could still see the replaced rows. */
const PURGE_WAIT_MS = 15_000;

/**
 * Waits until every transaction of this database that was running when it was called has ended (true), or `waitMs`
 * went by (false). VACUUM FULL keeps the row versions that such a transaction could still see, so a purge that ran
 * beside one (another deployment's or a migration on the same database, a long report) would leave the replaced
 * values in the table's files.
 */
async function olderTransactionsEnded(db: Kysely<Database>, waitMs: number): Promise<boolean> {
  // An identifier of now: a transaction id taken and committed at once.
  const mark = await sql<{ xid: string }>`select (txid_current() % 4294967296)::text as xid`.execute(db);
  const xid = mark.rows[0]?.xid ?? '0';
  const deadline = Date.now() + waitMs;
  for (;;) {
    const older = await sql<{ running: number }>`
      select count(*)::int as running from pg_stat_activity
      where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'
        and greatest(age(backend_xid), age(backend_xmin)) > age(${xid}::xid)`.execute(db);
    if ((older.rows[0]?.running ?? 0) === 0) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Applies pending migrations to `db` (see Storage.migrate). */
async function migrateTo(
  db: Kysely<Database>,
  dialect: Dialect,
  schema: string | null,
  secrets: Pick<SecretBox, 'seal'>,
  logger: Logger | undefined,
): Promise<string[]> {
  // A new SQLite database: the schema the migrations would make, in one transaction (sqlite-fresh.ts).
  const fresh = dialect === 'sqlite' ? await createFreshSqlite(db, new Date()) : null;
  const replaced = new Set<string>();
  const provider = migrationProvider({
    seal: (plain) => secrets.seal(plain),
    replacedSecrets: (table) => replaced.add(table),
  });
  // Fast path, and the one taken beside a running server: everything is applied already. Checking this with one
  // query avoids the Migrator's catalog introspection, which can race with schemas being created or dropped.
  const known = Object.keys(await provider.getMigrations());
  const applied = await sql<{ name: string }>`select name from kysely_migration`
    .execute(db)
    .then((result) => new Set(result.rows.map((row) => row.name)))
    .catch(() => null);
  if (applied !== null && known.every((name) => applied.has(name))) return fresh ?? [];
  // Name the schema: Kysely looks for its bookkeeping tables across all schemas otherwise.
  const migrator = new Migrator({
    db,
    provider,
    // Migrations are independent additions, numbered when planned: one numbered below a migration a database
    // already has (a feature that landed later) is still applied instead of refusing to start.
    allowUnorderedMigrations: true,
    ...(dialect === 'postgres' && schema !== null ? { migrationTableSchema: schema } : {}),
  });
  // The Migrator's Postgres catalog introspection reads every schema of the database, and fails when another
  // schema is dropped while it reads (other deployments or test runs sharing the database). Migrations run in
  // a transaction under Kysely's lock, so trying again is safe.
  for (let attempt = 1; ; attempt++) {
    const { error, results } = await migrator.migrateToLatest();
    if (error === undefined) {
      if (replaced.size > 0) await purgeFreeSpace(db, dialect, [...replaced], logger);
      const ran = (results ?? []).filter((result) => result.status === 'Success').map((result) => result.migrationName);
      return [...(fresh ?? []), ...ran];
    }
    const reason = error instanceof Error ? error.message : String(error);
    if (attempt < MIGRATION_ATTEMPTS && /does not exist/.test(reason)) {
      await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
      continue;
    }
    throw new Error(`database migration failed: ${reason}`, { cause: error });
  }
}

export interface StorageOptions {
  /** SQLite: checkpoint the write-ahead log on a thread of its own (the server; see sqlite-checkpointer.ts). */
  backgroundCheckpoints?: boolean;
  /** SQLite with the thread: the connection's `wal_autocheckpoint` in pages (AGENTRY_SQLITE_WAL_PAGES). */
  autocheckpointPages?: number;
  onCheckpointerError?: (error: unknown) => void;
  /** The checkpoint thread held the server's writes back longer than a second (sqlite-checkpointer.ts). */
  onLongCheckpointPause?: (pausedMs: number) => void;
  /** How often a process that ran out of space probes for it (AGENTRY_STORAGE_PROBE_MS). */
  storageProbeMs?: number;
  /** Where the start and end of a lack of space are logged. */
  logger?: Logger;
  /** Postgres: a pooled or listening connection broke while idle (it is replaced when next needed). */
  onConnectionError?: (error: unknown) => void;
}

/** The probe of storage-space.ts: one row rewritten, a real write on either dialect. */
async function writeProbe(db: Kysely<Database>): Promise<void> {
  const now = Date.now();
  await db
    .insertInto('storage_probe')
    .values({ id: 'probe', probed_at: now })
    .onConflict((oc) => oc.column('id').doUpdateSet({ probed_at: now }))
    .execute();
}

export async function openStorage(
  config: Pick<Config, 'databaseUrl' | 'databaseSchema' | 'dataDir'> &
    Partial<Pick<Config, 'databaseTimeoutMs' | 'databasePrepared'>>,
  options: StorageOptions = {},
): Promise<Storage> {
  let db: Kysely<Database>;
  let workerDb: Kysely<Database>;
  let counterDb: Kysely<Database>;
  let dialect: Dialect;
  let location: string;
  let signal: ChangeSignal;
  let stopCheckpointer = async (): Promise<void> => undefined;
  // Created once `db` exists; the connections report to it from their first statement on.
  let space: StorageSpace | null = null;
  const onCreateConnection = async (connection: DatabaseConnection) =>
    reportFailures(connection, (error) => space?.observe(error));
  /** Postgres: opens the handle migrations run on (see below); SQLite migrates on `db`. */
  let migrationDb: (() => Kysely<Database>) | null = null;
  if (config.databaseUrl !== null) {
    // Nothing here connects: connections are opened on first use, so a process can start while Postgres is down
    // (main.ts waits for it) and one that runs no turns (role api) never opens the worker pool's.
    const url = config.databaseUrl;
    const schema = config.databaseSchema;
    const timeoutMs = config.databaseTimeoutMs ?? DATABASE_TIMEOUT_MS;
    const connectionLost = (error: unknown) => options.onConnectionError?.(error);
    // The Postgres driver loads only for a Postgres database.
    const { default: driver } = await import('pg');
    // The pools of requests and turns send a transaction's BEGIN with its first statement, and the hot queries as
    // named statements (postgres-begin.ts).
    const prepared = config.databasePrepared ?? true;
    const Client = beginWithFirstStatement(driver.Client, { named: prepared !== false, batched: prepared === true });
    const pool = (settings: pg.PoolConfig, held = true) => {
      const created = new driver.Pool({
        ...settings,
        types: postgresTypes(driver.types),
        ...(held ? { Client } : {}),
      });
      // A pooled connection that breaks while idle is dropped from the pool and reported here; unheard, the
      // error would end the process.
      created.on('error', connectionLost);
      // One that breaks while checked out fails its query with the error; the event itself needs a listener too.
      created.on('connect', (client) => client.on('error', () => undefined));
      return created;
    };
    const bounded = postgresConnection(url, schema, timeoutMs, true);
    signal = postgresChangeSignal({
      connection: postgresConnection(url, null, timeoutMs, false),
      schema: schema ?? 'public',
      onError: connectionLost,
    });
    db = new Kysely<Database>({
      dialect: new PostgresDialect({ pool: pool({ ...bounded, max: 10 }), onCreateConnection }),
      plugins: [signal.plugin],
    });
    workerDb = new Kysely<Database>({
      dialect: new PostgresDialect({ pool: pool({ ...bounded, max: 10 }), onCreateConnection }),
      plugins: [signal.plugin],
    });
    counterDb = new Kysely<Database>({
      dialect: new PostgresDialect({
        pool: pool({ ...postgresConnection(url, schema, timeoutMs, true, ['synchronous_commit=off']), max: 4 }, false),
        onCreateConnection,
      }),
    });
    // Migrations may rightly take longer than the statement bound (waiting for another process's migration lock,
    // rewriting a table): they run on connections without it.
    const unbounded = postgresConnection(url, schema, timeoutMs, false);
    migrationDb = () =>
      new Kysely<Database>({
        dialect: new PostgresDialect({ pool: pool({ ...unbounded, max: 2 }, false), onCreateConnection }),
        plugins: [signal.plugin],
      });
    dialect = 'postgres';
    location = describePostgres(url, schema);
  } else {
    mkdirSync(config.dataDir, { recursive: true });
    const path = join(config.dataDir, 'agentry.db');
    // SQLite creates its -wal and -shm files with the database file's mode: 0600 for all three.
    createPrivateFile(path);
    const database = openSqlite({ path, ...options });
    stopCheckpointer = () => database.stopCheckpointer();
    signal = sqliteChangeSignal(() => database.dataVersion());
    db = new Kysely<Database>({
      dialect: new NodeSqliteDialect({ database, onCreateConnection }),
      plugins: [signal.plugin],
    });
    workerDb = db;
    counterDb = db;
    dialect = 'sqlite';
    location = path;
  }
  const opened = db;
  space = createStorageSpace({
    directory: config.dataDir,
    location,
    probeWrite: () => writeProbe(opened),
    ...(options.storageProbeMs === undefined ? {} : { probeMs: options.storageProbeMs }),
    ...(options.logger === undefined ? {} : { logger: options.logger }),
  });
  return {
    db,
    workerDb,
    counterDb,
    dialect,
    location,
    space,
    changeVersion: () => signal.version(),
    ping: async () => {
      await sql`select 1`.execute(db);
    },
    migrate: async (secrets) => {
      const target = migrationDb?.() ?? db;
      try {
        // Created here rather than at open: it is the first statement, and a process may start while Postgres is down.
        if (dialect === 'postgres' && config.databaseSchema !== null) {
          await sql`create schema if not exists ${sql.id(config.databaseSchema)}`.execute(target);
        }
        return await migrateTo(target, dialect, config.databaseSchema, secrets, options.logger);
      } finally {
        if (target !== db) await target.destroy();
      }
    },
    close: async () => {
      space.close();
      await signal.close();
      await stopCheckpointer();
      if (workerDb !== db) await workerDb.destroy();
      if (counterDb !== db) await counterDb.destroy();
      await db.destroy();
    },
  };
}
