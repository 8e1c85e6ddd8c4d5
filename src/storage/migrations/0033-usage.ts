import { type Kysely, sql } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Usage accounting (`GET /v1/usage`, docs/usage.md). Each run records who it is billed to, written once when its
 * turn is accepted and never changed:
 * - `runs.api_key_id`: the API key of the request that submitted the turn; null for turns no request submitted
 *   (schedules) and for runs accepted before this migration.
 * - `runs.end_user`: its session's end user (`sessions.end_user`) at acceptance, kept with the run because runs
 *   outlive their session; filled here from the sessions that still exist.
 *
 * A report reads one organization's runs in a time range: `runs_org_created` (0002) is that range; the two
 * indexes here are the range of one key's or one end user's runs, so neither filter reads the others' rows.
 */
export const usage: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('runs').addColumn('api_key_id', 'text').execute();
    await db.schema.alterTable('runs').addColumn('end_user', 'text').execute();
    await sql`update runs set end_user = (select s.end_user from sessions s where s.id = runs.session_id)
      where exists (select 1 from sessions s where s.id = runs.session_id and s.end_user is not null)`.execute(db);
    await db.schema
      .createIndex('runs_org_key_created')
      .on('runs')
      .columns(['org_id', 'api_key_id', 'created_at'])
      .execute();
    await db.schema
      .createIndex('runs_org_end_user_created')
      .on('runs')
      .columns(['org_id', 'end_user', 'created_at'])
      .execute();
  },
};
