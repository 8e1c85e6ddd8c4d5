import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Trace context of a turn: the W3C `traceparent` of the request that submitted the message (so the turn's spans
 * join the caller's trace whichever worker runs it, whenever), and when a finished run was handed to the
 * OpenTelemetry exporter (so each ended run is exported once across workers), and the trace context a webhook
 * event's deliveries carry.
 */
export const traceContext: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('messages').addColumn('traceparent', 'text').execute();
    await db.schema.alterTable('runs').addColumn('exported_at', 'bigint').execute();
    await db.schema.createIndex('runs_completed').on('runs').column('completed_at').execute();
    await db.schema.alterTable('webhook_events').addColumn('traceparent', 'text').execute();
  },
};
