import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * An agent's memories across sessions (docs/memory.md): short texts the model saves with the `memory` tool, read by
 * later sessions of the same agent. `end_user` scopes a memory to one end user of the organization's application
 * (null: the agent's own, shared by every session without an end user). Deleting the agent deletes them (foreign
 * key).
 */
export const memories: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('memories')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('agent_id', 'text', (col) => col.notNull().references('agents.id').onDelete('cascade'))
      .addColumn('end_user', 'text')
      .addColumn('content', 'text', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .execute();
    // Lists and searches read one agent's memories (of one end user), newest first.
    await db.schema
      .createIndex('memories_agent_user_created')
      .on('memories')
      .columns(['agent_id', 'end_user', 'created_at', 'id'])
      .execute();
  },
};
