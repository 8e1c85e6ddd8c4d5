import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * How an agent's turns keep their context within the model's window (`agents.context_policy`: `truncation` or
 * `none`; null in rows written before it existed, which means truncation).
 */
export const agentContextPolicy: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('agents').addColumn('context_policy', 'text').execute();
  },
};
