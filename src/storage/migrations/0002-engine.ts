import { type Kysely, sql } from 'kysely';
import type { Migration } from 'kysely/migration';

/** The turn engine: messages, runs, the conversation log, the outbox, and session leases. */
export const engine: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    // Session work state: `work_pending` says a turn may be runnable; `work_version` rises on every enqueue so a
    // worker never clears a flag set after it looked. The lease columns make one worker own a session at a time;
    // `lease_token` is the fencing token every worker write checks.
    await db.schema
      .alterTable('sessions')
      .addColumn('work_pending', 'integer', (col) => col.notNull().defaultTo(0))
      .execute();
    await db.schema
      .alterTable('sessions')
      .addColumn('work_version', 'integer', (col) => col.notNull().defaultTo(0))
      .execute();
    await db.schema.alterTable('sessions').addColumn('lease_owner', 'text').execute();
    await db.schema.alterTable('sessions').addColumn('lease_expires_at', 'bigint').execute();
    await db.schema
      .alterTable('sessions')
      .addColumn('lease_token', 'integer', (col) => col.notNull().defaultTo(0))
      .execute();
    await db.schema.createIndex('sessions_work').on('sessions').columns(['work_pending', 'lease_expires_at']).execute();

    await db.schema
      .createTable('messages')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull())
      .addColumn('session_id', 'text', (col) => col.notNull().references('sessions.id').onDelete('cascade'))
      .addColumn('seq', 'integer', (col) => col.notNull())
      .addColumn('status', 'text', (col) => col.notNull())
      .addColumn('parts', 'text', (col) => col.notNull())
      .addColumn('response_text', 'text')
      .addColumn('error', 'text')
      .addColumn('input_tokens', 'integer', (col) => col.notNull().defaultTo(0))
      .addColumn('output_tokens', 'integer', (col) => col.notNull().defaultTo(0))
      .addColumn('cost_micros', 'bigint', (col) => col.notNull().defaultTo(0))
      .addColumn('step_count', 'integer', (col) => col.notNull().defaultTo(0))
      .addColumn('cancel_requested', 'integer', (col) => col.notNull().defaultTo(0))
      .addColumn('agent_id', 'text', (col) => col.notNull())
      .addColumn('agent_version', 'integer')
      .addColumn('run_id', 'text', (col) => col.notNull())
      .addColumn('source', 'text', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('started_at', 'bigint')
      .addColumn('completed_at', 'bigint')
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .addUniqueConstraint('messages_session_seq', ['session_id', 'seq'])
      .execute();
    await db.schema.createIndex('messages_session_status').on('messages').columns(['session_id', 'status']).execute();

    await db.schema
      .createTable('runs')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull())
      .addColumn('agent_id', 'text', (col) => col.notNull())
      .addColumn('session_id', 'text', (col) => col.notNull())
      .addColumn('message_id', 'text', (col) => col.notNull())
      .addColumn('source', 'text', (col) => col.notNull())
      .addColumn('status', 'text', (col) => col.notNull())
      .addColumn('model', 'text', (col) => col.notNull())
      .addColumn('agent_version', 'integer')
      .addColumn('input_preview', 'text', (col) => col.notNull())
      .addColumn('output_preview', 'text')
      .addColumn('input_tokens', 'integer', (col) => col.notNull().defaultTo(0))
      .addColumn('output_tokens', 'integer', (col) => col.notNull().defaultTo(0))
      .addColumn('cost_micros', 'bigint', (col) => col.notNull().defaultTo(0))
      .addColumn('error', 'text')
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('started_at', 'bigint')
      .addColumn('completed_at', 'bigint')
      .execute();
    await db.schema.createIndex('runs_org_created').on('runs').columns(['org_id', 'created_at']).execute();
    await db.schema.createIndex('runs_message').on('runs').column('message_id').execute();

    // The conversation log: every user input, assistant step, tool call and tool output, in session order.
    await db.schema
      .createTable('items')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull())
      .addColumn('session_id', 'text', (col) => col.notNull().references('sessions.id').onDelete('cascade'))
      .addColumn('message_id', 'text', (col) => col.notNull())
      .addColumn('seq', 'integer', (col) => col.notNull())
      .addColumn('step', 'integer', (col) => col.notNull())
      .addColumn('type', 'text', (col) => col.notNull())
      .addColumn('call_id', 'text')
      .addColumn('content', 'text', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addUniqueConstraint('items_session_seq', ['session_id', 'seq'])
      .execute();
    await db.schema.createIndex('items_message').on('items').columns(['message_id', 'seq']).execute();
    // One output per call: two concurrent answers to one question cannot both land.
    await db.schema
      .createIndex('items_one_output_per_call')
      .on('items')
      .columns(['session_id', 'call_id'])
      .unique()
      .where(sql.ref('type'), '=', 'function_call_output')
      .execute();

    await db.schema
      .createTable('session_events')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('session_id', 'text', (col) => col.notNull().references('sessions.id').onDelete('cascade'))
      .addColumn('seq', 'integer', (col) => col.notNull())
      .addColumn('kind', 'text', (col) => col.notNull())
      .addColumn('message_id', 'text')
      .addColumn('run_id', 'text')
      .addColumn('data', 'text', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addUniqueConstraint('session_events_seq', ['session_id', 'seq'])
      .execute();

    // Webhook outbox: written in the same transaction as the state change it reports.
    await db.schema
      .createTable('webhook_events')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull())
      .addColumn('type', 'text', (col) => col.notNull())
      .addColumn('data', 'text', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('dispatched_at', 'bigint')
      .execute();
    await db.schema
      .createIndex('webhook_events_org_created')
      .on('webhook_events')
      .columns(['org_id', 'created_at'])
      .execute();
    await db.schema
      .createIndex('webhook_events_undispatched')
      .on('webhook_events')
      .columns(['dispatched_at', 'created_at'])
      .execute();
  },
};
