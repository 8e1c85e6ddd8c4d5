import { type Kysely, SqliteAdapter, sql } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Postgres only: statement triggers that announce writes to the tables other processes cache (API keys, agents)
 * with `NOTIFY agentry_changes, '<schema>'`, delivered when the writing transaction commits
 * (storage/change-signal.ts). SQLite needs none: its `data_version` tells a connection about other connections'
 * commits.
 */
export const changeNotifications: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    if (db.getExecutor().adapter instanceof SqliteAdapter) return;
    await sql`
      create or replace function agentry_notify_change() returns trigger language plpgsql as $$
      begin
        perform pg_notify('agentry_changes', tg_table_schema);
        return null;
      end
      $$`.execute(db);
    for (const table of ['api_keys', 'agents']) {
      await sql`
        create trigger ${sql.raw(`${table}_changed`)}
        after insert or update or delete on ${sql.table(table)}
        for each statement execute function agentry_notify_change()`.execute(db);
    }
  },
};
