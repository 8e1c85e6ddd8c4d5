import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Warnings of a message and its run (JSON `[{code, message, …}]`, null when none): what its acceptance noted (a
 * configured tool this deployment cannot run) and what its turn could not do without failing (a tool call given
 * up after restarts interrupted it).
 */
export const messageWarnings: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('messages').addColumn('warnings', 'text').execute();
    await db.schema.alterTable('runs').addColumn('warnings', 'text').execute();
  },
};
