import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Organization MCP connectors (`/v1/mcp_servers`, docs/tools.md). One connector per (organization, url): an
 * agent's `{type:"url"}` entry reuses it. Static headers are stored encrypted (AES-256-GCM); only their names are
 * readable. The cached tool list and the protocol that worked are kept with the row, so every process starts
 * from them. `agent_mcp_servers` links an agent's current version to the connectors it uses, so a connector in
 * use cannot be deleted (the foreign key refuses it even under a race).
 */
export const mcpServers: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('mcp_servers')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('name', 'text', (col) => col.notNull())
      .addColumn('url', 'text', (col) => col.notNull())
      // Encrypted JSON object of header name → value (lib/secret-box.ts), or null without headers.
      .addColumn('headers', 'text')
      // JSON array of the header names, for reads.
      .addColumn('header_names', 'text', (col) => col.notNull())
      // The protocol negotiation settled on (a hint for the next connection), or null before the first.
      .addColumn('protocol', 'text')
      // JSON array of the tools the server listed, or null before the first listing.
      .addColumn('tools', 'text')
      .addColumn('tools_fetched_at', 'bigint')
      // The server's cache hint for its tool list (ms), or null for the deployment default.
      .addColumn('tools_ttl_ms', 'bigint')
      // JSON {code, message} of the last failed listing, or null.
      .addColumn('last_error', 'text')
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .addUniqueConstraint('mcp_servers_org_url', ['org_id', 'url'])
      .execute();
    await db.schema
      .createIndex('mcp_servers_org_created')
      .on('mcp_servers')
      .columns(['org_id', 'created_at', 'id'])
      .execute();

    await db.schema
      .createTable('agent_mcp_servers')
      .addColumn('agent_id', 'text', (col) => col.notNull().references('agents.id').onDelete('cascade'))
      .addColumn('server_id', 'text', (col) => col.notNull().references('mcp_servers.id'))
      .addPrimaryKeyConstraint('agent_mcp_servers_pk', ['agent_id', 'server_id'])
      .execute();
    await db.schema.createIndex('agent_mcp_servers_server').on('agent_mcp_servers').column('server_id').execute();
  },
};
