/**
 * Migration 0033 (usage accounting) on a database an older version left: runs it finds get the end user of their
 * session where the session still exists and names one, no API key (none was recorded), and the two indexes.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { dialects } from './helpers/harness.ts';
import { afterMigrating } from './helpers/migrations.ts';

const MIGRATION = '0033-usage';

const run = (id: string, sessionId: string) =>
  `insert into runs (id, org_id, agent_id, session_id, message_id, source, status, model, input_preview,
     input_tokens, output_tokens, cost_micros, created_at)
     values ('${id}', 'org-1', 'agent-1', '${sessionId}', 'message-${id}', 'sessions', 'completed', 'scripted', '',
     10, 2, 0, 1)`;

const SEED = [
  `insert into orgs (id, name, project_id, created_at) values ('org-1', 'default', 1, 1)`,
  `insert into agents (id, org_id, name, instructions, model, max_steps, mcp_servers, client_tools, skills,
     is_default, version, created_at, updated_at)
     values ('agent-1', 'org-1', 'a', '', 'scripted', 10, '[]', '[]', '[]', 0, 1, 1, 1)`,
  `insert into sessions (id, org_id, agent_id, status, created_at, updated_at, end_user)
     values ('with-user', 'org-1', 'agent-1', 'idle', 1, 1, 'alice')`,
  `insert into sessions (id, org_id, agent_id, status, created_at, updated_at)
     values ('without-user', 'org-1', 'agent-1', 'idle', 1, 1)`,
  run('run-1', 'with-user'),
  run('run-2', 'with-user'),
  run('run-3', 'without-user'),
  run('run-4', 'deleted-session'),
];

describe.each(dialects())('migration 0033 (%s)', (dialect) => {
  it("gives existing runs their session's end user and no key, and adds the usage indexes", async () => {
    await afterMigrating(dialect, MIGRATION, SEED, async ({ storage, applied, env }) => {
      // This one first, then whatever later migrations there are.
      expect(applied[0]).toBe(MIGRATION);
      const rows = await storage.db.selectFrom('runs').select(['id', 'end_user', 'api_key_id']).orderBy('id').execute();
      expect(rows).toEqual([
        { id: 'run-1', end_user: 'alice', api_key_id: null },
        { id: 'run-2', end_user: 'alice', api_key_id: null },
        { id: 'run-3', end_user: null, api_key_id: null },
        { id: 'run-4', end_user: null, api_key_id: null },
      ]);
      const indexes =
        dialect === 'sqlite'
          ? await sql<{ name: string }>`select name from sqlite_master where type = 'index' and tbl_name = 'runs'`
              .execute(storage.db)
              .then((result) => result.rows.map((row) => row.name))
          : await sql<{ indexname: string }>`select indexname from pg_indexes where tablename = 'runs'
            and schemaname = ${env.AGENTRY_DATABASE_SCHEMA ?? ''}`
              .execute(storage.db)
              .then((result) => result.rows.map((row) => row.indexname));
      expect(indexes).toEqual(
        expect.arrayContaining(['runs_org_created', 'runs_org_key_created', 'runs_org_end_user_created']),
      );
    });
  });
});
