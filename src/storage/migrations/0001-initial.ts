import { type Kysely, sql } from 'kysely';
import type { Migration } from 'kysely/migration';

// Migrations take Kysely<unknown>: they must not depend on the current table types.
export const initial: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('orgs')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('name', 'text', (col) => col.notNull().unique())
      .addColumn('project_id', 'integer', (col) => col.notNull().unique())
      .addColumn('credit_balance_micros', 'bigint')
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .execute();

    await db.schema
      .createTable('api_keys')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('prefix', 'text', (col) => col.notNull())
      .addColumn('key_hash', 'text', (col) => col.notNull().unique())
      .addColumn('scopes', 'text', (col) => col.notNull())
      .addColumn('name', 'text')
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('expires_at', 'bigint')
      .addColumn('revoked_at', 'bigint')
      .execute();
    await db.schema.createIndex('api_keys_prefix').on('api_keys').column('prefix').execute();

    await db.schema
      .createTable('agents')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('name', 'text', (col) => col.notNull())
      .addColumn('description', 'text')
      .addColumn('instructions', 'text', (col) => col.notNull())
      .addColumn('model', 'text', (col) => col.notNull())
      .addColumn('max_steps', 'integer', (col) => col.notNull())
      .addColumn('mcp_servers', 'text', (col) => col.notNull())
      .addColumn('client_tools', 'text', (col) => col.notNull())
      .addColumn('skills', 'text', (col) => col.notNull())
      .addColumn('network_policy', 'text')
      .addColumn('is_default', 'integer', (col) => col.notNull())
      .addColumn('version', 'integer', (col) => col.notNull())
      .addColumn('workspace_provisioned_at', 'bigint')
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .execute();
    await db.schema.createIndex('agents_org_created').on('agents').columns(['org_id', 'created_at']).execute();
    // At most one default Agent per organization, enforced by the database.
    await db.schema
      .createIndex('agents_one_default')
      .on('agents')
      .column('org_id')
      .unique()
      .where(sql.ref('is_default'), '=', 1)
      .execute();

    await db.schema
      .createTable('agent_versions')
      .addColumn('agent_id', 'text', (col) => col.notNull().references('agents.id').onDelete('cascade'))
      .addColumn('version', 'integer', (col) => col.notNull())
      .addColumn('config', 'text', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addPrimaryKeyConstraint('agent_versions_pk', ['agent_id', 'version'])
      .execute();

    await db.schema
      .createTable('sessions')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('agent_id', 'text', (col) => col.notNull().references('agents.id'))
      .addColumn('title', 'text')
      .addColumn('status', 'text', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .execute();
    await db.schema.createIndex('sessions_org_created').on('sessions').columns(['org_id', 'created_at']).execute();
    await db.schema.createIndex('sessions_agent').on('sessions').columns(['agent_id', 'created_at']).execute();

    await db.schema
      .createTable('idempotency_keys')
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('scope', 'text', (col) => col.notNull())
      .addColumn('key', 'text', (col) => col.notNull())
      .addColumn('request_hash', 'text', (col) => col.notNull())
      .addColumn('status_code', 'integer', (col) => col.notNull())
      .addColumn('response_body', 'text', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addPrimaryKeyConstraint('idempotency_keys_pk', ['org_id', 'scope', 'key'])
      .execute();
    await db.schema.createIndex('idempotency_keys_created').on('idempotency_keys').column('created_at').execute();
  },
};
