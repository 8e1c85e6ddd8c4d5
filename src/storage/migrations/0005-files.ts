import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Uploaded files (POST /v1/files). The bytes live on disk under `<AGENTRY_DATA_DIR>/files/<storage_key>`; a row
 * holds their metadata. Deleting a file sets deleted_at and removes the bytes.
 */
export const files: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('files')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('filename', 'text', (col) => col.notNull())
      .addColumn('media_type', 'text', (col) => col.notNull())
      // bigint: uploads may exceed 2 GiB (AGENTRY_MAX_UPLOAD_BYTES), past Postgres' 32-bit integer.
      .addColumn('bytes', 'bigint', (col) => col.notNull())
      .addColumn('sha256', 'text', (col) => col.notNull())
      .addColumn('purpose', 'text', (col) => col.notNull())
      .addColumn('storage_key', 'text', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('deleted_at', 'bigint')
      .execute();
    await db.schema.createIndex('files_org_created').on('files').columns(['org_id', 'created_at', 'id']).execute();
  },
};
