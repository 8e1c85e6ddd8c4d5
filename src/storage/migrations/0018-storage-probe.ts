import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * One row that the server rewrites to find out whether the database takes writes again after it ran out of space
 * (storage/storage-space.ts): a real write, so that "writable" is a fact and not a guess.
 */
export const storageProbe: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('storage_probe')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('probed_at', 'bigint', (col) => col.notNull())
      .execute();
  },
};
