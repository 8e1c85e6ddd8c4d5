import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Data retention and narrower keys.
 * - `org_retention`: an organization's retention in days per kind of data (sessions, runs and traces, session
 *   events, files, webhook attempts); null follows the deployment's default (AGENTRY_RETENTION_*_DAYS), 0 keeps
 *   forever. No row: every kind follows the defaults.
 * - `api_keys.agent_ids`: JSON array of the agent ids a key is limited to; null for a key that may use every agent.
 * - The indexes the retention sweeper reads by: sessions by organization and last change, session events and
 *   webhook attempts by time, ended webhook deliveries by organization.
 */
export const retention: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('org_retention')
      .addColumn('org_id', 'text', (col) => col.primaryKey().references('orgs.id').onDelete('cascade'))
      .addColumn('sessions_days', 'integer')
      .addColumn('runs_days', 'integer')
      .addColumn('session_events_days', 'integer')
      .addColumn('files_days', 'integer')
      .addColumn('webhooks_days', 'integer')
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .execute();
    await db.schema.alterTable('api_keys').addColumn('agent_ids', 'text').execute();
    await db.schema.createIndex('sessions_org_updated').on('sessions').columns(['org_id', 'updated_at']).execute();
    await db.schema.createIndex('session_events_created').on('session_events').columns(['created_at']).execute();
    await db.schema
      .createIndex('webhook_attempts_org_attempted')
      .on('webhook_attempts')
      .columns(['org_id', 'attempted_at'])
      .execute();
    await db.schema
      .createIndex('webhook_deliveries_org_completed')
      .on('webhook_deliveries')
      .columns(['org_id', 'completed_at'])
      .execute();
  },
};
