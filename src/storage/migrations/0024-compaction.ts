import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * The compaction policy's threshold of an agent (`agents.compact_threshold`, estimated input tokens; null: 80 % of
 * the window less the output reserved). The policy itself is a value of `agents.context_policy`, and compaction
 * items are rows of `items` of type `compaction`: neither needs a column.
 */
export const compaction: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('agents').addColumn('compact_threshold', 'integer').execute();
  },
};
