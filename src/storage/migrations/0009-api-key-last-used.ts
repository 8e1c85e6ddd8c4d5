import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * When each API key was last used to authenticate (epoch milliseconds), for `agentry keys list`. Recorded at most
 * once a minute per key and process, so authentication stays a read.
 */
export const apiKeyLastUsed: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('api_keys').addColumn('last_used_at', 'bigint').execute();
  },
};
