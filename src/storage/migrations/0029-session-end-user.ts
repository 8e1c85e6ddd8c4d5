import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * The end user a session serves (`sessions.end_user`): named at creation (`endUser` on the Sessions API, the
 * Response's or Chat Completion's `safety_identifier` or `user`), null when none was. Per-user data (memories,
 * credentials) is looked up by it and never crosses it.
 */
export const sessionEndUser: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('sessions').addColumn('end_user', 'text').execute();
  },
};
