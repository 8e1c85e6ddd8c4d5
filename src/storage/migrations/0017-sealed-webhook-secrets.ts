import { type Kysely, SqliteAdapter, sql } from 'kysely';
import type { Migration } from 'kysely/migration';
import type { MigrationContext } from './context.ts';

/**
 * Webhook signing secrets and legacy `X-Webhook-Secret` values are stored encrypted (AES-256-GCM, the secret box of
 * MCP connector headers) instead of in clear. The columns are renamed to `sealed_secret`, so that nothing can read
 * them as clear text by mistake, and every existing value is sealed in place. `secret_hint` keeps what reads show
 * (`whsec_…` and the last four characters), so lists never need the key. The old values' bytes linger in free
 * space after the update; `replacedSecrets` asks storage to purge them once the migration has committed.
 */
export function sealedWebhookSecrets(context: MigrationContext): Migration {
  async function up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('webhook_endpoints').renameColumn('secret', 'sealed_secret').execute();
    await db.schema
      .alterTable('webhook_endpoints')
      .addColumn('secret_hint', 'text', (col) => col.notNull().defaultTo(''))
      .execute();
    const endpoints = await sql<{ id: string; secret: string }>`
      select id, sealed_secret as secret from webhook_endpoints`.execute(db);
    for (const { id, secret } of endpoints.rows) {
      // As domain/webhooks/signing.ts secretHint() shows it.
      const hint = `whsec_…${secret.slice(-4)}`;
      await sql`
        update webhook_endpoints set sealed_secret = ${context.seal(secret)}, secret_hint = ${hint}
        where id = ${id}`.execute(db);
    }

    await db.schema.alterTable('legacy_webhooks').renameColumn('secret', 'sealed_secret').execute();
    const legacy = await sql<{ id: string; secret: string }>`
      select id, sealed_secret as secret from legacy_webhooks where sealed_secret is not null`.execute(db);
    for (const { id, secret } of legacy.rows) {
      await sql`update legacy_webhooks set sealed_secret = ${context.seal(secret)} where id = ${id}`.execute(db);
    }
    if (endpoints.rows.length > 0) context.replacedSecrets('webhook_endpoints');
    if (legacy.rows.length > 0) context.replacedSecrets('legacy_webhooks');
  }

  return {
    async up(db: Kysely<unknown>): Promise<void> {
      if (!(db.getExecutor().adapter instanceof SqliteAdapter)) return up(db);
      // Kysely runs SQLite migrations outside a transaction, and records them after: this one rewrites rows, so it
      // takes a transaction of its own, and a crash between its commit and that record finds it done next time.
      const done = await sql<{ name: string }>`
        select name from pragma_table_info('webhook_endpoints') where name = 'sealed_secret'`.execute(db);
      if (done.rows.length === 0) await db.transaction().execute(up);
    },
  };
}
