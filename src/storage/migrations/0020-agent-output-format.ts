import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * The structure of an agent's replies (`agents.output_format`, JSON `{type: "json_schema", name, schema, strict}`
 * or `{type: "json_object"}`; null for free text): what a message that asks for no format of its own gets.
 */
export const agentOutputFormat: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('agents').addColumn('output_format', 'text').execute();
  },
};
