/**
 * Migration 0011 (schedules) can reach a database that already has later migrations (features numbered after
 * it that were released first): it is applied then, instead of the server refusing to start.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kysely } from 'kysely';
import { type Migration, Migrator } from 'kysely/migration';
import { describe, expect, it } from 'vitest';
import { openStorage } from '../src/storage/db.ts';

import { NodeSqliteDialect, openSqlite } from '../src/storage/sqlite-adapter.ts';
import { allMigrations, dataDirSecrets } from './helpers/migrations.ts';

describe('migration 0011 after later ones', () => {
  it('is applied to a database migrated past it without it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentry-migration-'));
    try {
      const all = await allMigrations(dir);
      const without: Record<string, Migration> = Object.fromEntries(
        Object.entries(all).filter(([name]) => name !== '0011-schedules'),
      );
      expect(Object.keys(without).some((name) => name > '0011')).toBe(true);
      const database = openSqlite({ path: join(dir, 'agentry.db') });
      const old = new Kysely<unknown>({ dialect: new NodeSqliteDialect({ database }) });
      const migrated = await new Migrator({
        db: old,
        provider: { getMigrations: async () => without },
      }).migrateToLatest();
      expect(migrated.error).toBeUndefined();
      await old.destroy();

      const storage = await openStorage({ databaseUrl: null, databaseSchema: null, dataDir: dir });
      try {
        expect(await storage.migrate(dataDirSecrets(dir))).toEqual(['0011-schedules']);
        expect(await storage.db.selectFrom('schedules').select('id').execute()).toEqual([]);
        expect(await storage.migrate(dataDirSecrets(dir))).toEqual([]);
      } finally {
        await storage.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
