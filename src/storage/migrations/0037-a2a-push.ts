import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * A2A push notifications (docs/a2a.md).
 * - `a2a_push_configs`: a task's push notification configs (`config_id` is the A2A config id, unique per task).
 *   `token` and `authentication` are sealed (lib/secret-box.ts). `notified_status` is the task status last turned
 *   into a notification (compare-and-set, so one process notifies each change); `done` once the task has ended and
 *   that end was notified, so the watcher's query only looks at live configs.
 * - `a2a_push_deliveries`: one row per (config, state change), unique on `(config_id, seq)`: the body (the Task
 *   as it stood, as a StreamResponse) is fixed when the row is written; attempts are leased and retried with
 *   backoff like webhook deliveries, fenced by `lease_token`.
 */
export const a2aPush: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('a2a_push_configs')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('task_id', 'text', (col) => col.notNull())
      .addColumn('session_id', 'text', (col) => col.notNull())
      .addColumn('agent_id', 'text', (col) => col.notNull())
      // The address the config was set through: the notifications' report URLs are built on it.
      .addColumn('base_url', 'text', (col) => col.notNull())
      .addColumn('config_id', 'text', (col) => col.notNull())
      .addColumn('url', 'text', (col) => col.notNull())
      .addColumn('sealed_token', 'text')
      .addColumn('auth_scheme', 'text')
      .addColumn('sealed_credentials', 'text')
      .addColumn('notified_status', 'text', (col) => col.notNull())
      .addColumn('seq', 'integer', (col) => col.notNull().defaultTo(0))
      .addColumn('done', 'integer', (col) => col.notNull().defaultTo(0))
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('deleted_at', 'bigint')
      .execute();
    await db.schema
      .createIndex('a2a_push_configs_task')
      .unique()
      .on('a2a_push_configs')
      .columns(['task_id', 'config_id'])
      .execute();
    await db.schema.createIndex('a2a_push_configs_live').on('a2a_push_configs').columns(['done', 'task_id']).execute();

    await db.schema
      .createTable('a2a_push_deliveries')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('config_id', 'text', (col) => col.notNull().references('a2a_push_configs.id').onDelete('cascade'))
      .addColumn('seq', 'integer', (col) => col.notNull())
      .addColumn('task_status', 'text', (col) => col.notNull())
      .addColumn('body', 'text', (col) => col.notNull())
      // pending | delivered | failed | skipped
      .addColumn('status', 'text', (col) => col.notNull())
      .addColumn('attempts', 'integer', (col) => col.notNull().defaultTo(0))
      .addColumn('status_code', 'integer')
      .addColumn('error', 'text')
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .addColumn('next_attempt_at', 'bigint')
      .addColumn('deadline_at', 'bigint', (col) => col.notNull())
      .addColumn('last_attempt_at', 'bigint')
      .addColumn('completed_at', 'bigint')
      .addColumn('lease_owner', 'text')
      .addColumn('lease_expires_at', 'bigint')
      .addColumn('lease_token', 'integer', (col) => col.notNull().defaultTo(0))
      .addUniqueConstraint('a2a_push_deliveries_change', ['config_id', 'seq'])
      .execute();
    await db.schema
      .createIndex('a2a_push_deliveries_due')
      .on('a2a_push_deliveries')
      .columns(['status', 'next_attempt_at'])
      .execute();
  },
};
