import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Sign-in for MCP connectors (docs/mcp-auth.md).
 * - `mcp_servers.auth`: `none` (open or static headers) or `oauth`; `oauth_client`: the OAuth client the connector
 *   uses, sealed (lib/secret-box.ts): a pre-registered id/secret, or what dynamic registration returned;
 *   `oauth_scope`: the scope asked for (null: the server's own choice).
 * - `mcp_credentials`: the credential vault. One credential per (connector, end user); `end_user` '' is the
 *   organization's own. The tokens are sealed and never returned; `server_url` is the URL they were issued for (a
 *   connector moved to another URL no longer uses them). `lock_until` is the refresh lock: a worker refreshes only
 *   after setting it with a conditional UPDATE, so two never refresh the same credential at once.
 * - `mcp_oauth_states`: authorizations started and not yet completed, by their `state`; sealed PKCE verifier and
 *   discovery results, so a restart between the start and the callback still completes.
 */
export const mcpCredentials: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .alterTable('mcp_servers')
      .addColumn('auth', 'text', (col) => col.notNull().defaultTo('none'))
      .execute();
    await db.schema.alterTable('mcp_servers').addColumn('oauth_client', 'text').execute();
    await db.schema.alterTable('mcp_servers').addColumn('oauth_scope', 'text').execute();

    await db.schema
      .createTable('mcp_credentials')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('server_id', 'text', (col) => col.notNull().references('mcp_servers.id').onDelete('cascade'))
      .addColumn('end_user', 'text', (col) => col.notNull())
      .addColumn('server_url', 'text', (col) => col.notNull())
      // oauth | bearer
      .addColumn('kind', 'text', (col) => col.notNull())
      // Sealed JSON: {access_token, refresh_token?, token_type?, scope?} or {headers}.
      .addColumn('secret', 'text', (col) => col.notNull())
      .addColumn('expires_at', 'bigint')
      // active | failed (refresh refused: a person must connect again)
      .addColumn('status', 'text', (col) => col.notNull())
      .addColumn('lock_until', 'bigint')
      .addColumn('version', 'integer', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .addUniqueConstraint('mcp_credentials_server_user', ['server_id', 'end_user'])
      .execute();

    await db.schema
      .createTable('mcp_oauth_states')
      .addColumn('state', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('server_id', 'text', (col) => col.notNull().references('mcp_servers.id').onDelete('cascade'))
      .addColumn('end_user', 'text', (col) => col.notNull())
      // Sealed JSON: PKCE verifier, discovery state, scope, the URL it was started for.
      .addColumn('secret', 'text', (col) => col.notNull())
      .addColumn('expires_at', 'bigint', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .execute();
    await db.schema.createIndex('mcp_oauth_states_expires').on('mcp_oauth_states').column('expires_at').execute();
  },
};
