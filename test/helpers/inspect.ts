/** Read-only SQL access to a test server's database (either dialect), for assertions across processes. */
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';

export interface Inspector {
  count(sql: string): Promise<number>;
  close(): Promise<void>;
}

export async function openInspector(env: Record<string, string>): Promise<Inspector> {
  const url = env.DATABASE_URL;
  if (url === undefined) {
    const db = new DatabaseSync(join(env.AGENTRY_DATA_DIR ?? '.', 'agentry.db'), { readOnly: true });
    return {
      count: async (sql) => Number((db.prepare(sql).get() as { n: number } | undefined)?.n ?? 0),
      close: async () => db.close(),
    };
  }
  const client = new pg.Client({
    connectionString: url,
    options: `-c search_path=${env.AGENTRY_DATABASE_SCHEMA ?? 'public'}`,
  });
  await client.connect();
  return {
    count: async (sql) => Number((await client.query(sql)).rows[0]?.n ?? 0),
    close: () => client.end(),
  };
}
