/**
 * Migration 0044 makes two indexes of `runs` partial (completed runs; runs of an end user), so that accepting a
 * message writes fewer B-trees. The rows an older version indexed are still found, and the reads the indexes serve
 * (the trace exporter's sweep, a usage report of one end user) still use them, on both dialects, with the values
 * sent as parameters as the server sends them.
 */
import { type Kysely, sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { Database } from '../src/storage/schema.ts';
import { dialects } from './helpers/harness.ts';
import { afterMigrating } from './helpers/migrations.ts';

const MIGRATION = '0044-partial-run-indexes';

const run = (id: string, status: string, completedAt: number | null, endUser: string | null) =>
  `insert into runs (id, org_id, agent_id, session_id, message_id, source, status, model, input_preview,
     input_tokens, output_tokens, cost_micros, created_at, completed_at, end_user)
     values ('${id}', 'org-1', 'agent-1', 'session-1', 'message-${id}', 'sessions', '${status}', 'scripted', '',
     10, 2, 0, 1, ${completedAt ?? 'null'}, ${endUser === null ? 'null' : `'${endUser}'`})`;

const SEED = [
  `insert into orgs (id, name, project_id, created_at) values ('org-1', 'default', 1, 1)`,
  `insert into agents (id, org_id, name, instructions, model, max_steps, mcp_servers, client_tools, skills,
     is_default, version, created_at, updated_at)
     values ('agent-1', 'org-1', 'a', '', 'scripted', 10, '[]', '[]', '[]', 0, 1, 1, 1)`,
  run('run-1', 'completed', 5, 'alice'),
  run('run-2', 'completed', 6, null),
  run('run-3', 'queued', null, 'alice'),
  run('run-4', 'queued', null, null),
];

const EXPORT_SWEEP = `select id from runs where completed_at >= ? and exported_at is null
  and status in ('completed', 'failed', 'cancelled') order by completed_at limit 100`;
const END_USER_USAGE = `select count(*) as turns from runs where org_id = ? and end_user = ? and created_at >= ?`;

/** The plan of `query` with `values` as parameters: on Postgres the generic plan a prepared statement gets. */
async function plan(db: Kysely<Database>, dialect: string, query: string, values: unknown[]): Promise<string> {
  if (dialect === 'sqlite') {
    // SQLite plans when it prepares (no statistics here): the parameters, left unbound, do not change the plan.
    const rows = await sql.raw<{ detail: string }>(`explain query plan ${query}`).execute(db);
    return rows.rows.map((row) => row.detail).join('\n');
  }
  return db.connection().execute(async (connection) => {
    let n = 0;
    const numbered = query.replaceAll('?', () => `$${++n}`);
    await sql.raw(`set plan_cache_mode = force_generic_plan`).execute(connection);
    await sql.raw(`set enable_seqscan = off`).execute(connection);
    try {
      await sql.raw(`prepare partial_index_probe as ${numbered}`).execute(connection);
      const literals = values.map((value) => (typeof value === 'string' ? `'${value}'` : String(value)));
      const rows = await sql
        .raw<{ 'QUERY PLAN': string }>(`explain execute partial_index_probe(${literals.join(', ')})`)
        .execute(connection);
      return rows.rows.map((row) => row['QUERY PLAN']).join('\n');
    } finally {
      await sql.raw('deallocate all').execute(connection);
      await sql.raw('reset plan_cache_mode').execute(connection);
      await sql.raw('reset enable_seqscan').execute(connection);
    }
  });
}

describe.each(dialects())('migration 0044 (%s)', (dialect) => {
  it('keeps the indexed runs findable through partial indexes that their readers use', async () => {
    await afterMigrating(dialect, MIGRATION, SEED, async ({ storage, applied, env }) => {
      expect(applied[0]).toBe(MIGRATION);
      const { db } = storage;
      const definitions =
        dialect === 'sqlite'
          ? await sql<{ name: string; definition: string }>`select name, sql as definition from sqlite_master
            where type = 'index' and tbl_name = 'runs'`.execute(db)
          : await sql<{ name: string; definition: string }>`select indexname as name, indexdef as definition
            from pg_indexes where tablename = 'runs'
            and schemaname = ${env.AGENTRY_DATABASE_SCHEMA ?? ''}`.execute(db);
      const definition = (name: string) =>
        definitions.rows.find((row) => row.name === name)?.definition.toLowerCase() ?? '';
      expect(definition('runs_completed')).toMatch(/where \(?"?completed_at"? is not null/);
      expect(definition('runs_org_end_user_created')).toMatch(/where \(?"?end_user"? is not null/);

      const exportPlan = await plan(db, dialect, EXPORT_SWEEP, [0]);
      expect(exportPlan).toContain('runs_completed');
      const usagePlan = await plan(db, dialect, END_USER_USAGE, ['org-1', 'alice', 0]);
      expect(usagePlan).toContain('runs_org_end_user_created');

      // The rows the old indexes held are found through the new ones.
      const swept = await db
        .selectFrom('runs')
        .select('id')
        .where('completed_at', '>=', 0)
        .where('exported_at', 'is', null)
        .orderBy('completed_at')
        .execute();
      expect(swept.map((row) => row.id)).toEqual(['run-1', 'run-2']);
      const ofAlice = await db
        .selectFrom('runs')
        .select('id')
        .where('org_id', '=', 'org-1')
        .where('end_user', '=', 'alice')
        .orderBy('id')
        .execute();
      expect(ofAlice.map((row) => row.id)).toEqual(['run-1', 'run-3']);
    });
  });
});
