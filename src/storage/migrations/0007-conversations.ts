import { type Kysely, SqliteAdapter, sql } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * OpenAI Conversations and client compatibility:
 * - `sessions.agent_id` becomes nullable: a Conversation created without an agent (POST /v1/conversations) is a
 *   Session whose agent the first Response on it fixes;
 * - `sessions.metadata`: the Conversation's metadata (JSON object of strings), null for `{}`;
 * - `messages.deleted_at`: a Response deleted with DELETE /v1/responses/{id} (its items stay in the log);
 * - `api_keys.compat`: the key's Responses validation mode (`auto`, `strict`, `openai`), null for the deployment's.
 */
export const conversations: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('sessions').addColumn('metadata', 'text').execute();
    await db.schema.alterTable('messages').addColumn('deleted_at', 'bigint').execute();
    await db.schema.alterTable('api_keys').addColumn('compat', 'text').execute();
    if (isSqlite(db)) await dropNotNullOnSqlite(db);
    else await sql`alter table sessions alter column agent_id drop not null`.execute(db);
  },
};

/** Postgres runs migrations in a transaction, so probing with a failing query is no option: ask the adapter. */
function isSqlite(db: Kysely<unknown>): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}

/**
 * SQLite cannot drop a NOT NULL constraint in place: the table is rebuilt (the documented 12-step procedure).
 * Foreign keys are off meanwhile so that dropping the old table does not cascade into messages, items and events;
 * the SQLite migrator runs outside a transaction, so the pragma takes effect, and the rebuild itself is one
 * transaction checked with foreign_key_check before it commits.
 */
async function dropNotNullOnSqlite(db: Kysely<unknown>): Promise<void> {
  const { rows } = await sql<{
    sql: string;
  }>`select sql from sqlite_master where type = 'table' and name = 'sessions'`.execute(db);
  const create = rows[0]?.sql;
  if (create === undefined) throw new Error('sessions table not found');
  const relaxed = create.replace(/"agent_id" text not null/i, '"agent_id" text');
  if (relaxed === create) return;
  const indexes = await sql<{ sql: string | null }>`
    select sql from sqlite_master where type = 'index' and tbl_name = 'sessions'`.execute(db);
  await sql`pragma foreign_keys = off`.execute(db);
  try {
    await db.transaction().execute(async (trx) => {
      await sql.raw(relaxed.replace(/^create table "sessions"/i, 'create table "sessions_rebuilt"')).execute(trx);
      await sql`insert into sessions_rebuilt select * from sessions`.execute(trx);
      await sql`drop table sessions`.execute(trx);
      await sql`alter table sessions_rebuilt rename to sessions`.execute(trx);
      for (const index of indexes.rows) if (index.sql !== null) await sql.raw(index.sql).execute(trx);
      const broken = await sql`pragma foreign_key_check`.execute(trx);
      if (broken.rows.length > 0) throw new Error('sessions rebuild left foreign keys unresolved');
    });
  } finally {
    await sql`pragma foreign_keys = on`.execute(db);
  }
}
