import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * `mcp_servers.capabilities`: JSON `{resources, prompts}`, what the server announced besides tools at its last
 * listing (null until a listing after this migration). An agent is offered a connector's resource tools only when
 * the server offers resources.
 */
export const mcpCapabilities: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('mcp_servers').addColumn('capabilities', 'text').execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('mcp_servers').dropColumn('capabilities').execute();
  },
};
