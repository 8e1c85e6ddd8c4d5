import { type Kysely, SqliteAdapter, sql } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * SQLite only: tables keyed by text, written on every turn, rebuilt WITHOUT ROWID. A rowid table keyed by text
 * keeps two B-trees for it (the rows by rowid, and the unique index of the key), so each insert writes one tree
 * more than the same table stored in the order of its key. Postgres tables are heaps with indexes either way: it
 * has nothing to change, and both dialects keep the same columns, keys and indexes.
 *
 * Rebuilt: `session_events` (a turn writes several), `spans` (two or more per turn) and `idempotency_keys` (one
 * per submit with a key); each keeps its columns, constraints and indexes as they are.
 */
const TABLES = ['session_events', 'spans', 'idempotency_keys'] as const;

async function definitions(db: Kysely<unknown>, table: string, type: 'table' | 'index'): Promise<string[]> {
  const { rows } = await sql<{ sql: string }>`
    select sql from sqlite_master where type = ${type} and tbl_name = ${table} and sql is not null`.execute(db);
  return rows.map((row) => row.sql);
}

async function rebuildWithoutRowid(db: Kysely<unknown>, table: string): Promise<void> {
  const [create] = await definitions(db, table, 'table');
  if (create === undefined) throw new Error(`table ${table} not found`);
  if (/without\s+rowid\s*$/i.test(create)) return;
  const indexes = await definitions(db, table, 'index');
  const rebuilt = `${table}_rebuilt`;
  const name = new RegExp(`^create\\s+table\\s+(?:"${table}"|${table})`, 'i');
  if (!name.test(create)) throw new Error(`unexpected definition of ${table}: ${create}`);
  await sql.raw(`${create.replace(name, `create table "${rebuilt}"`)} without rowid`).execute(db);
  await sql.raw(`insert into "${rebuilt}" select * from "${table}"`).execute(db);
  await sql.raw(`drop table "${table}"`).execute(db);
  await sql.raw(`alter table "${rebuilt}" rename to "${table}"`).execute(db);
  for (const index of indexes) await sql.raw(index).execute(db);
}

export const withoutRowid: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    if (!(db.getExecutor().adapter instanceof SqliteAdapter)) return;
    for (const table of TABLES) await rebuildWithoutRowid(db, table);
  },
};
