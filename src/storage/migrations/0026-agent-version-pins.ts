import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Who made each agent version (the API key's prefix, or `cli`; null for versions written before it was recorded),
 * and the agent version a session or a schedule is pinned to (null follows the latest).
 */
export const agentVersionPins: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('agent_versions').addColumn('actor', 'text').execute();
    for (const table of ['sessions', 'schedules']) {
      await db.schema.alterTable(table).addColumn('agent_version', 'integer').execute();
    }
  },
};
