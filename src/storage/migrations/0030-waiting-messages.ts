import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * The turns waiting for input, by when they last changed: a partial index (only rows in `requires_action`), so the
 * sweep for Chat Completions turns whose request ended without handing them back reads a handful of rows, not the
 * messages table.
 */
export const waitingMessages: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createIndex('messages_waiting')
      .on('messages')
      .columns(['updated_at'])
      .where(sql.ref('status'), '=', 'requires_action')
      .execute();
  },
};
