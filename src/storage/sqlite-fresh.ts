/**
 * An empty SQLite database gets, in one transaction, the schema that the migrations would make of it
 * (sqlite-schema.json, written by `npm run schema:sqlite` from running them, and kept equal to them by
 * test/sqlite-schema.test.ts), with those migrations recorded as applied. Running them one by one instead took about
 * a tenth of a server's start: each DDL statement commits on its own, and a rebuilt table rewrites the schema. A
 * database with anything in it is left to the migrations, as is any migration the file does not include yet.
 */
import { readFileSync } from 'node:fs';
import { type Kysely, sql } from 'kysely';

export interface SqliteSchema {
  /** The migrations the schema includes, in name order. */
  migrations: string[];
  /** Its `create` statements: tables first, then indexes, views and triggers, each in the order they were made. */
  statements: string[];
}

export const SQLITE_SCHEMA_FILE = new URL('./sqlite-schema.json', import.meta.url);

/**
 * Creates the schema in the database behind `db` if it has no schema object at all; returns the migrations it
 * recorded, or null when the database was not empty. The write lock is taken first, so of two processes starting on
 * one new file, one creates the schema and the other finds it.
 */
export async function createFreshSqlite<DB>(db: Kysely<DB>, now: Date): Promise<string[] | null> {
  return db.connection().execute(async (connection) => {
    await sql`begin immediate`.execute(connection);
    try {
      const { rows } = await sql<{ objects: number }>`select count(*) as objects from sqlite_master`.execute(
        connection,
      );
      if (Number(rows[0]?.objects ?? 0) > 0) {
        await sql`rollback`.execute(connection);
        return null;
      }
      const schema = JSON.parse(readFileSync(SQLITE_SCHEMA_FILE, 'utf8')) as SqliteSchema;
      for (const statement of schema.statements) await sql.raw(statement).execute(connection);
      // Kysely's bookkeeping, as its migrator leaves it.
      const timestamp = now.toISOString();
      for (const name of schema.migrations) {
        await sql`insert into kysely_migration (name, timestamp) values (${name}, ${timestamp})`.execute(connection);
      }
      await sql`insert into kysely_migration_lock (id, is_locked) values ('migration_lock', 0)`.execute(connection);
      await sql`commit`.execute(connection);
      return schema.migrations;
    } catch (error) {
      await sql`rollback`.execute(connection).catch(() => undefined);
      throw error;
    }
  });
}
