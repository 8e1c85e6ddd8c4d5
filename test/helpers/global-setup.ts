/**
 * Decides once per run whether the Postgres suite runs. In CI (CI=true) Postgres is required and its absence
 * fails the run; elsewhere the suite is skipped with a visible notice.
 */
import pg from 'pg';
import type { TestProject } from 'vitest/node';

const DEFAULT_URL = 'postgres://postgres@127.0.0.1:5432/test';

declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string | null;
  }
}

async function reachable(url: string): Promise<string | null> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query('select 1');
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  } finally {
    await client.end().catch(() => undefined);
  }
}

export default async function setup(project: TestProject): Promise<void> {
  const url = process.env.AGENTRY_TEST_DATABASE_URL ?? DEFAULT_URL;
  if (process.env.AGENTRY_TEST_POSTGRES === '0') {
    process.stdout.write('\n[agentry] Postgres suite disabled by AGENTRY_TEST_POSTGRES=0\n\n');
    project.provide('postgresUrl', null);
    return;
  }
  const problem = await reachable(url);
  if (problem !== null) {
    if (process.env.CI === 'true' || process.env.AGENTRY_TEST_POSTGRES === '1') {
      throw new Error(`Postgres is required for this run but ${url} is unreachable: ${problem}`);
    }
    process.stdout.write(
      `\n[agentry] NOTICE: Postgres at ${url} unreachable (${problem}); Postgres tests are SKIPPED\n\n`,
    );
    project.provide('postgresUrl', null);
    return;
  }
  project.provide('postgresUrl', url);
}
