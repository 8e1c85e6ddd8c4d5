import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * The audit log (docs/audit-log.md): one row per change to an organization's keys, agents, connectors, webhooks,
 * schedules, credits, approvals, memories and settings, with who made it (an API key, the CLI or the system), the
 * request it came with and summaries of before and after (secrets redacted). Rows are only ever inserted: no route
 * changes or deletes them.
 */
export const auditLog: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('audit_log')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('actor_type', 'text', (col) => col.notNull())
      .addColumn('actor_key_id', 'text')
      .addColumn('actor_key_prefix', 'text')
      .addColumn('request_id', 'text')
      .addColumn('action', 'text', (col) => col.notNull())
      .addColumn('target_type', 'text', (col) => col.notNull())
      .addColumn('target_id', 'text', (col) => col.notNull())
      .addColumn('before', 'text')
      .addColumn('after', 'text')
      .execute();
    // The log is read per organization, newest first, in pages.
    await db.schema
      .createIndex('audit_log_org_created')
      .on('audit_log')
      .columns(['org_id', 'created_at', 'id'])
      .execute();
  },
};
