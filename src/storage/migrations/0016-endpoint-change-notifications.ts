import { type Kysely, SqliteAdapter, sql } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Postgres only: webhook endpoints join the tables whose writes are announced with `NOTIFY agentry_changes`
 * (migration 0015's function and statement trigger), so every process drops its cached subscriptions
 * (domain/webhooks/subscriptions.ts) once another process creates, changes or deletes an endpoint. SQLite needs
 * none: its `data_version` tells a connection about other connections' commits.
 */
export const endpointChangeNotifications: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    if (db.getExecutor().adapter instanceof SqliteAdapter) return;
    await sql`
      create trigger webhook_endpoints_changed
      after insert or update or delete on webhook_endpoints
      for each statement execute function agentry_notify_change()`.execute(db);
  },
};
