import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Webhook endpoints and durable deliveries (docs/webhooks.md). `webhook_events` (0002) is the outbox the engine
 * writes; the dispatcher fans each event out into one `webhook_deliveries` row per subscribed endpoint, claims due
 * rows with leases like sessions, and records every attempt in `webhook_attempts`.
 */
export const webhooks: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('webhook_endpoints')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('name', 'text', (col) => col.notNull())
      .addColumn('url', 'text', (col) => col.notNull())
      // JSON array of event type names.
      .addColumn('event_types', 'text', (col) => col.notNull())
      // whsec_…: needed in clear to sign; never logged, returned only by create and rotate_secret.
      .addColumn('secret', 'text', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      // Soft delete: pending deliveries are skipped, and list cursors naming a deleted endpoint keep working.
      .addColumn('deleted_at', 'bigint')
      .execute();
    await db.schema
      .createIndex('webhook_endpoints_org_created')
      .on('webhook_endpoints')
      .columns(['org_id', 'created_at', 'id'])
      .execute();

    await db.schema
      .createTable('webhook_deliveries')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull())
      .addColumn('endpoint_id', 'text', (col) => col.notNull().references('webhook_endpoints.id').onDelete('cascade'))
      .addColumn('event_id', 'text', (col) => col.notNull().references('webhook_events.id').onDelete('cascade'))
      // The Standard Webhooks `webhook-id`: one per (event, endpoint), the same for retries and manual redeliveries.
      .addColumn('webhook_id', 'text', (col) => col.notNull())
      // automatic | manual | test
      .addColumn('kind', 'text', (col) => col.notNull())
      // '' for the automatic (or test) delivery; the Idempotency-Key of a manual redelivery otherwise.
      .addColumn('replay_key', 'text', (col) => col.notNull())
      // pending | delivered | failed | skipped
      .addColumn('status', 'text', (col) => col.notNull())
      .addColumn('attempts', 'integer', (col) => col.notNull().defaultTo(0))
      .addColumn('status_code', 'integer')
      // JSON {code, message} of the last failed attempt.
      .addColumn('error', 'text')
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .addColumn('next_attempt_at', 'bigint')
      // End of the retry window: created_at + AGENTRY_WEBHOOK_RETRY_WINDOW_MS.
      .addColumn('deadline_at', 'bigint', (col) => col.notNull())
      .addColumn('last_attempt_at', 'bigint')
      .addColumn('completed_at', 'bigint')
      .addColumn('lease_owner', 'text')
      .addColumn('lease_expires_at', 'bigint')
      .addColumn('lease_token', 'integer', (col) => col.notNull().defaultTo(0))
      .addUniqueConstraint('webhook_deliveries_once', ['endpoint_id', 'event_id', 'replay_key'])
      .execute();
    // Claims look for due work per endpoint (each endpoint has its own concurrency limit).
    await db.schema
      .createIndex('webhook_deliveries_due')
      .on('webhook_deliveries')
      .columns(['endpoint_id', 'status', 'next_attempt_at'])
      .execute();
    await db.schema
      .createIndex('webhook_deliveries_history')
      .on('webhook_deliveries')
      .columns(['endpoint_id', 'replay_key', 'created_at', 'id'])
      .execute();
    await db.schema
      .createIndex('webhook_deliveries_completed')
      .on('webhook_deliveries')
      .columns(['completed_at'])
      .execute();

    await db.schema
      .createTable('webhook_attempts')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('delivery_id', 'text', (col) => col.notNull().references('webhook_deliveries.id').onDelete('cascade'))
      .addColumn('org_id', 'text', (col) => col.notNull())
      .addColumn('attempted_at', 'bigint', (col) => col.notNull())
      // The webhook-timestamp header of this attempt (Unix seconds).
      .addColumn('webhook_timestamp', 'bigint', (col) => col.notNull())
      .addColumn('url', 'text', (col) => col.notNull())
      .addColumn('status_code', 'integer')
      .addColumn('error', 'text')
      .addColumn('duration_ms', 'integer', (col) => col.notNull())
      .execute();
    await db.schema
      .createIndex('webhook_attempts_delivery')
      .on('webhook_attempts')
      .columns(['delivery_id', 'attempted_at'])
      .execute();
    await db.schema.createIndex('webhook_attempts_attempted').on('webhook_attempts').column('attempted_at').execute();
  },
};
