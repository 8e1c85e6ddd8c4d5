/**
 * Writes src/storage/sqlite-schema.json (`npm run schema:sqlite`): what the migrations make of an empty SQLite
 * database, read back from it (its schema statements and the migrations it records). A server creates a fresh
 * database from it in one transaction instead of running every migration (src/storage/sqlite-fresh.ts);
 * test/sqlite-schema.test.ts fails when it no longer matches the migrations. Run it after adding a migration.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kysely, sql } from 'kysely';
import { Migrator } from 'kysely/migration';
import { migrationProvider } from '../src/storage/migrations/index.ts';
import { NodeSqliteDialect, openSqlite } from '../src/storage/sqlite-adapter.ts';
import type { SqliteSchema } from '../src/storage/sqlite-fresh.ts';
import { SQLITE_SCHEMA_FILE } from '../src/storage/sqlite-fresh.ts';

/** Kinds of schema object in the order their statements are replayed (an index needs its table). */
const KINDS = ['table', 'index', 'view', 'trigger'];

/** The schema of the database behind `db`, as `SqliteSchema` says. */
export async function readSqliteSchema<DB>(db: Kysely<DB>): Promise<SqliteSchema> {
  const objects = await sql<{ type: string; sql: string }>`
    select type, sql from sqlite_master where sql is not null and name not like 'sqlite_%' order by rowid`.execute(db);
  const statements = KINDS.flatMap((kind) =>
    objects.rows.filter((object) => object.type === kind).map((object) => object.sql),
  );
  const applied = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db);
  return { migrations: applied.rows.map((row) => row.name), statements };
}

/** Runs every migration, one by one as on an existing database, on an empty one, and reads its schema back. */
export async function migratedSqliteSchema(): Promise<SqliteSchema> {
  const dir = mkdtempSync(join(tmpdir(), 'agentry-schema-'));
  const db = new Kysely<unknown>({
    dialect: new NodeSqliteDialect({ database: openSqlite({ path: join(dir, 'agentry.db') }) }),
  });
  try {
    const provider = migrationProvider({ seal: (plain) => plain, replacedSecrets: () => undefined });
    const { error } = await new Migrator({ db, provider, allowUnorderedMigrations: true }).migrateToLatest();
    if (error !== undefined) throw new Error(`the migrations failed: ${String(error)}`, { cause: error });
    return await readSqliteSchema(db);
  } finally {
    await db.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const schema = await migratedSqliteSchema();
  writeFileSync(SQLITE_SCHEMA_FILE, `${JSON.stringify(schema, null, 2)}\n`);
  process.stdout.write(
    `wrote ${SQLITE_SCHEMA_FILE.pathname}: ${schema.statements.length} statements, ${schema.migrations.length} migrations\n`,
  );
}
