import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Schedules (`/v1/schedules`, docs/schedules.md) and their runs. A tick is claimed by one conditional UPDATE of
 * `schedules.next_run_at` (the value read must still be there, and `version` unchanged) in the same transaction
 * that inserts its run; the unique (schedule_id, scheduled_at) makes a second run for one tick impossible even if
 * two claims raced past that check. Manual runs have no tick (scheduled_at null).
 */
export const schedules: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('schedules')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('agent_id', 'text', (col) => col.notNull().references('agents.id').onDelete('cascade'))
      .addColumn('name', 'text', (col) => col.notNull())
      .addColumn('input', 'text', (col) => col.notNull())
      .addColumn('cron', 'text')
      .addColumn('interval_seconds', 'bigint')
      .addColumn('timezone', 'text', (col) => col.notNull())
      // Every run in this session, or null for a new session per run.
      .addColumn('session_id', 'text')
      .addColumn('overlap', 'text', (col) => col.notNull())
      .addColumn('timeout_seconds', 'bigint')
      .addColumn('catch_up', 'text', (col) => col.notNull())
      .addColumn('enabled', 'integer', (col) => col.notNull())
      // The next tick (epoch ms), null while paused.
      .addColumn('next_run_at', 'bigint')
      // Interval schedules tick at anchor_at + k * interval_seconds.
      .addColumn('anchor_at', 'bigint', (col) => col.notNull())
      // Rises on every change and every claimed tick, so a claim or a change made from an older read is refused.
      .addColumn('version', 'integer', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .execute();
    await db.schema.createIndex('schedules_due').on('schedules').columns(['enabled', 'next_run_at']).execute();
    await db.schema
      .createIndex('schedules_org_created')
      .on('schedules')
      .columns(['org_id', 'created_at', 'id'])
      .execute();

    await db.schema
      .createTable('schedule_runs')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('schedule_id', 'text', (col) => col.notNull().references('schedules.id').onDelete('cascade'))
      .addColumn('trigger', 'text', (col) => col.notNull())
      .addColumn('status', 'text', (col) => col.notNull())
      // The tick this run fires (epoch ms); null for manual runs.
      .addColumn('scheduled_at', 'bigint')
      .addColumn('session_id', 'text')
      .addColumn('message_id', 'text')
      .addColumn('run_id', 'text')
      // JSON {code, message}, or null.
      .addColumn('error', 'text')
      .addColumn('result', 'text')
      .addColumn('input_tokens', 'bigint', (col) => col.notNull())
      .addColumn('output_tokens', 'bigint', (col) => col.notNull())
      // Fixed when the run is dispatched; nothing moves it later.
      .addColumn('deadline_at', 'bigint')
      .addColumn('timed_out_at', 'bigint')
      // The worker process that claimed the tick (host:pid:random), for operators; null for manual runs.
      .addColumn('claimed_by', 'text')
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('started_at', 'bigint')
      .addColumn('completed_at', 'bigint')
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .addUniqueConstraint('schedule_runs_tick', ['schedule_id', 'scheduled_at'])
      .execute();
    await db.schema
      .createIndex('schedule_runs_schedule_created')
      .on('schedule_runs')
      .columns(['schedule_id', 'created_at', 'id'])
      .execute();
    await db.schema.createIndex('schedule_runs_message').on('schedule_runs').column('message_id').execute();
    await db.schema.createIndex('schedule_runs_status').on('schedule_runs').columns(['status', 'created_at']).execute();
  },
};
