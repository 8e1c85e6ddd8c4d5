/**
 * The retention sweeper's part of the files (docs/retention.md): deletes the rows of files uploaded before the
 * organization's retention, then their bytes in the files folder. Files deleted through the API earlier (rows
 * marked deleted, bytes already gone) go with them.
 */
import type { Executor } from '../../storage/db.ts';
import { createFileStore } from './file-store.ts';

/**
 * Deletes up to `limit` files of the organization created before `before`: the rows in one transaction, then the
 * bytes (a missing file is no error). Resolves to the number of rows deleted.
 */
export async function deleteExpiredFiles(
  db: Executor,
  dataDir: string,
  batch: { orgId: string; before: number; limit: number },
): Promise<number> {
  const { orgId, before, limit } = batch;
  const store = createFileStore({ dataDir });
  const rows = await db.transaction().execute(async (trx) => {
    const found = await trx
      .selectFrom('files')
      .select(['id', 'storage_key'])
      .where('org_id', '=', orgId)
      .where('created_at', '<', before)
      .orderBy('created_at')
      .limit(limit)
      .execute();
    if (found.length === 0) return [];
    const deleted = await trx
      .deleteFrom('files')
      .where('org_id', '=', orgId)
      .where(
        'id',
        'in',
        found.map((row) => row.id),
      )
      .returning(['id', 'storage_key'])
      .execute();
    return deleted;
  });
  // After the commit: a file's bytes outlive its row only if the process dies here (the next upload never reuses
  // the id); the reverse, a row whose bytes are gone, would answer 404 on download anyway.
  for (const row of rows) await store.remove(row.storage_key);
  return rows.length;
}
