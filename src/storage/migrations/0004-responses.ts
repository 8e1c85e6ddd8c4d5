import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Per-message options from the Responses surface (compatibility mode): extra instructions, per-response function
 * tools and sampling settings, applied to that message's turn only.
 */
export const responses: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('messages').addColumn('options', 'text').execute();
  },
};
