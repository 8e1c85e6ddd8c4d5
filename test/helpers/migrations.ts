/** Migrations for tests that build a database as an older version left it (run part of them, then the server). */
import { join } from 'node:path';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { type Migration, Migrator } from 'kysely/migration';
import pg from 'pg';
import { deploymentSecretBox, type SecretBox } from '../../src/lib/secret-box.ts';
import { openStorage, type Storage } from '../../src/storage/db.ts';
import { migrationProvider } from '../../src/storage/migrations/index.ts';
import { NodeSqliteDialect, openSqlite } from '../../src/storage/sqlite-adapter.ts';
import { type DialectName, testEnvironment } from './harness.ts';

/** The secret box of a server on this data directory without AGENTRY_SECRET_KEY. */
export const dataDirSecrets = (dataDir: string): SecretBox => deploymentSecretBox({ secretKey: null, dataDir });

/** Every migration, by name, as a server on this data directory runs them. */
export function allMigrations(dataDir: string): Promise<Record<string, Migration>> {
  const secrets = dataDirSecrets(dataDir);
  return migrationProvider({ seal: (plain) => secrets.seal(plain), replacedSecrets: () => undefined }).getMigrations();
}

/**
 * The database of a test environment (harness.ts `testEnvironment`) as an older version left it: the migrations
 * named below `before` applied, none after. The caller closes the handle (`destroy()`).
 */
export async function olderDatabase(env: Record<string, string>, before: string): Promise<Kysely<unknown>> {
  const dataDir = env.AGENTRY_DATA_DIR ?? '';
  const url = env.DATABASE_URL;
  const schema = env.AGENTRY_DATABASE_SCHEMA;
  let db: Kysely<unknown>;
  if (url === undefined || schema === undefined) {
    db = new Kysely({
      dialect: new NodeSqliteDialect({ database: openSqlite({ path: join(dataDir, 'agentry.db') }) }),
    });
  } else {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(`create schema "${schema}"`);
    await client.end();
    const pool = new pg.Pool({ connectionString: url, options: `-c search_path="${schema}"` });
    db = new Kysely({ dialect: new PostgresDialect({ pool }) });
  }
  const older = Object.fromEntries(Object.entries(await allMigrations(dataDir)).filter(([name]) => name < before));
  const migrated = await new Migrator({
    db,
    provider: { getMigrations: async () => older },
    ...(schema === undefined ? {} : { migrationTableSchema: schema }),
  }).migrateToLatest();
  if (migrated.error !== undefined) {
    await db.destroy();
    throw new Error(`the older migrations failed: ${String(migrated.error)}`, { cause: migrated.error });
  }
  return db;
}

/**
 * An organization `org-1`, its agent `agent-1` and a session `session-1` of it, as statements that a database of
 * migration 0021 or later takes: what rows of a session's tables reference.
 */
export const SESSION_SEED: readonly string[] = [
  `insert into orgs (id, name, project_id, created_at) values ('org-1', 'default', 1, 1)`,
  `insert into agents (id, org_id, name, instructions, model, max_steps, mcp_servers, client_tools, skills,
     is_default, version, created_at, updated_at)
     values ('agent-1', 'org-1', 'a', '', 'scripted', 10, '[]', '[]', '[]', 0, 1, 1, 1)`,
  `insert into sessions (id, org_id, agent_id, status, created_at, updated_at)
     values ('session-1', 'org-1', 'agent-1', 'idle', 1, 1)`,
];

/** What a check of a migrated database gets: the storage a server opened, the migrations it ran, the environment. */
export interface Migrated {
  storage: Storage;
  applied: string[];
  env: Record<string, string>;
}

/**
 * Builds a database as an older version left it (the migrations before `migration`, then `seed`), opens it as a
 * server does, runs the server's migrations and hands the result to `check`; closes and removes everything after.
 */
export async function afterMigrating(
  dialect: DialectName,
  migration: string,
  seed: readonly string[],
  check: (migrated: Migrated) => Promise<void>,
): Promise<void> {
  const environment = testEnvironment(dialect);
  try {
    const older = await olderDatabase(environment.env, migration);
    for (const statement of seed) await sql.raw(statement).execute(older);
    await older.destroy();
    const { env } = environment;
    const storage = await openStorage({
      databaseUrl: env.DATABASE_URL ?? null,
      databaseSchema: env.AGENTRY_DATABASE_SCHEMA ?? null,
      dataDir: env.AGENTRY_DATA_DIR ?? '',
    });
    try {
      const applied = await storage.migrate(dataDirSecrets(env.AGENTRY_DATA_DIR ?? ''));
      await check({ storage, applied, env });
    } finally {
      await storage.close();
    }
  } finally {
    await environment.cleanup();
  }
}
