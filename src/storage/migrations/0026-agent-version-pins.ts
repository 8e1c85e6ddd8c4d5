import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Who made each agent version (the API key's prefix, or `cli`; null for versions written before it was recorded),
 * and the agent version a session or a schedule is pinned to (null follows the latest).
 */
export const agentVersionPins: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('agent_versions').addColumn('actor', 'text').execute();
    await db.schema.alterTable('sessions').addColumn('agent_version', 'integer').execute();
    // Migrations may be applied out of order (storage/db.ts allows it): a database that lacks 0011 (the schedules
    // table) is not refused here. Every released database has had 0011 since long before this one.
    const tables = await db.introspection.getTables();
    if (tables.some((table) => table.name === 'schedules')) {
      await db.schema.alterTable('schedules').addColumn('agent_version', 'integer').execute();
    }
  },
};
