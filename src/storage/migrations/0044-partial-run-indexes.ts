import { type Kysely, sql } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Two indexes of `runs` hold only the rows their readers can ask for, so that accepting a message writes two
 * B-trees fewer (a run is inserted queued, without a completion time, and most runs have no end user):
 * - `runs_completed` (the trace exporter's sweep, `completed_at >= …`): completed runs only;
 * - `runs_org_end_user_created` (usage reports of one end user, `end_user = …`): runs of an end user only.
 * A comparison with a value implies the column is not null, so both dialects' planners use the partial indexes for
 * those reads (checked by test/migration-partial-run-indexes.test.ts).
 */
export const partialRunIndexes: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.dropIndex('runs_completed').execute();
    await db.schema
      .createIndex('runs_completed')
      .on('runs')
      .column('completed_at')
      .where(sql.ref('completed_at'), 'is not', null)
      .execute();
    await db.schema.dropIndex('runs_org_end_user_created').execute();
    await db.schema
      .createIndex('runs_org_end_user_created')
      .on('runs')
      .columns(['org_id', 'end_user', 'created_at'])
      .where(sql.ref('end_user'), 'is not', null)
      .execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await db.schema.dropIndex('runs_completed').execute();
    await db.schema.createIndex('runs_completed').on('runs').column('completed_at').execute();
    await db.schema.dropIndex('runs_org_end_user_created').execute();
    await db.schema
      .createIndex('runs_org_end_user_created')
      .on('runs')
      .columns(['org_id', 'end_user', 'created_at'])
      .execute();
  },
};
