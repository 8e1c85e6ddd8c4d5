import { type Kysely, SqliteAdapter, sql } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Rate and concurrency limits (docs/operations.md, "Limits"):
 * - `limits`: an operator's requests-per-minute and concurrent-turn limits of an organization or of one API key
 *   (`kind` names which; a null column follows the deployment's default). Read with every key's principal, so its
 *   writes move the change version like the keys' own (Postgres: the statement trigger of migration 0015).
 * - `rate_windows`: the request counters of the current minute per organization or key, where Redis does not keep
 *   them (no REDIS_URL, or Redis unreachable).
 * - `sessions.turn_key_id`: the API key that submitted the session's pending work, for the per-key limit of
 *   concurrent turns; a partial index finds an organization's leased sessions (its running turns) at once.
 */
export const limits: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('limits')
      .addColumn('kind', 'text', (col) => col.notNull())
      .addColumn('subject_id', 'text', (col) => col.notNull())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('requests_per_minute', 'bigint')
      .addColumn('concurrent_turns', 'bigint')
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .addPrimaryKeyConstraint('limits_pk', ['kind', 'subject_id'])
      .execute();
    await db.schema
      .createTable('rate_windows')
      .addColumn('bucket', 'text', (col) => col.notNull())
      .addColumn('window_start', 'bigint', (col) => col.notNull())
      .addColumn('hits', 'bigint', (col) => col.notNull())
      .addPrimaryKeyConstraint('rate_windows_pk', ['bucket', 'window_start'])
      .execute();
    await db.schema.alterTable('sessions').addColumn('turn_key_id', 'text').execute();
    await db.schema
      .createIndex('sessions_leased')
      .on('sessions')
      .columns(['org_id', 'lease_expires_at'])
      .where(sql.ref('lease_owner'), 'is not', null)
      .execute();
    if (db.getExecutor().adapter instanceof SqliteAdapter) return;
    // The function agentry_notify_change() is migration 0015's.
    await sql`
      create trigger limits_changed
      after insert or update or delete on limits
      for each statement execute function agentry_notify_change()`.execute(db);
  },
};
