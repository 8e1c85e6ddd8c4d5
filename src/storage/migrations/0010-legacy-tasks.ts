import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Legacy Tasks (docs/legacy.md). A Task runs as turns of a hidden Session (its workspace): `sessions.hidden` keeps
 * such sessions out of the Sessions API. `task_prompts` maps each prompt of a Task to the message that runs it
 * (several Tasks may share one workspace). `legacy_webhooks` are the organization webhooks of the Tasks
 * generation: best-effort, one attempt, kept apart from webhook endpoints. `threads` and `thread_messages` hold
 * the older API's message lists; `workflow_runs` records each tool-run call (a turn of a hidden Session) with
 * the thread its reply goes to.
 */
export const legacyTasks: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .alterTable('sessions')
      .addColumn('hidden', 'integer', (col) => col.notNull().defaultTo(0))
      .execute();

    await db.schema
      .createTable('tasks')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('workspace_id', 'text', (col) => col.notNull().references('sessions.id').onDelete('cascade'))
      .addColumn('agent_id', 'text', (col) => col.notNull())
      .addColumn('title', 'text', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .addColumn('deleted_at', 'bigint')
      // The last task.* webhook state sent (created | running | completed | failed | canceled), and whether the
      // notifier still has to look at the Task (set by create and by each follow-up prompt).
      .addColumn('notified_state', 'text', (col) => col.notNull())
      .addColumn('notify_pending', 'integer', (col) => col.notNull().defaultTo(1))
      .execute();
    await db.schema.createIndex('tasks_org_created').on('tasks').columns(['org_id', 'created_at', 'id']).execute();
    await db.schema.createIndex('tasks_notify').on('tasks').column('notify_pending').execute();

    await db.schema
      .createTable('task_prompts')
      .addColumn('message_id', 'text', (col) => col.primaryKey())
      .addColumn('task_id', 'text', (col) => col.notNull().references('tasks.id').onDelete('cascade'))
      .addColumn('org_id', 'text', (col) => col.notNull())
      .addColumn('seq', 'integer', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addUniqueConstraint('task_prompts_task_seq', ['task_id', 'seq'])
      .execute();

    await db.schema
      .createTable('legacy_webhooks')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('url', 'text', (col) => col.notNull())
      // JSON array of task.* event names.
      .addColumn('events', 'text', (col) => col.notNull())
      .addColumn('description', 'text')
      // Sent as is in X-Webhook-Secret; never returned.
      .addColumn('secret', 'text')
      .addColumn('is_active', 'integer', (col) => col.notNull().defaultTo(1))
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('last_triggered_at', 'bigint')
      .addColumn('failure_count', 'integer', (col) => col.notNull().defaultTo(0))
      .addUniqueConstraint('legacy_webhooks_org_url', ['org_id', 'url'])
      .execute();

    await db.schema
      .createTable('threads')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      // JSON object of strings, or null.
      .addColumn('metadata', 'text')
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .execute();
    await db.schema.createIndex('threads_org_created').on('threads').columns(['org_id', 'created_at', 'id']).execute();

    await db.schema
      .createTable('thread_messages')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull())
      .addColumn('thread_id', 'text', (col) => col.notNull().references('threads.id').onDelete('cascade'))
      .addColumn('seq', 'integer', (col) => col.notNull())
      .addColumn('role', 'text', (col) => col.notNull())
      .addColumn('content', 'text', (col) => col.notNull())
      .addColumn('metadata', 'text')
      // JSON array of file ids, or null.
      .addColumn('file_ids', 'text')
      // Set on assistant messages a run produced.
      .addColumn('agent_id', 'text')
      .addColumn('name', 'text')
      .addColumn('run_id', 'text')
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addUniqueConstraint('thread_messages_thread_seq', ['thread_id', 'seq'])
      .execute();
    // One reply per run, however many processes settle it.
    await db.schema
      .createIndex('thread_messages_run')
      .on('thread_messages')
      .column('run_id')
      .unique()
      .where('run_id', 'is not', null)
      .execute();

    await db.schema
      .createTable('workflow_runs')
      // The Run id (runs.id) of the turn that executes it.
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('agent_id', 'text', (col) => col.notNull())
      .addColumn('session_id', 'text', (col) => col.notNull().references('sessions.id').onDelete('cascade'))
      .addColumn('message_id', 'text', (col) => col.notNull())
      .addColumn('thread_id', 'text')
      .addColumn('version', 'integer', (col) => col.notNull())
      .addColumn('blocking', 'integer', (col) => col.notNull())
      .addColumn('stream', 'integer', (col) => col.notNull())
      // 1 once the reply was appended to the thread (or there is no thread and the run ended).
      .addColumn('settled', 'integer', (col) => col.notNull().defaultTo(0))
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .execute();
    await db.schema.createIndex('workflow_runs_unsettled').on('workflow_runs').column('settled').execute();
  },
};
