/**
 * The server's SQLite write-ahead log is checkpointed by a thread of its own (storage/sqlite-checkpointer.ts), not
 * inside COMMITs: the database file takes the log's pages while the server's connection only appends. Without the
 * thread (every other opener of the file, the CLI), SQLite's own automatic checkpoints are unchanged.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { openStorage, type Storage } from '../src/storage/db.ts';
import { SERVER_AUTOCHECKPOINT_PAGES, startCheckpointer } from '../src/storage/sqlite-checkpointer.ts';
import { WAIT_MS } from './helpers/deadlines.ts';
import { dataDirSecrets } from './helpers/migrations.ts';

const ROWS = 400;

async function writeRows(storage: Storage): Promise<void> {
  await sql`create table filler (id integer primary key, body text not null)`.execute(storage.db);
  for (let index = 0; index < ROWS; index++) {
    await storage.db.transaction().execute(async (trx) => {
      await sql`insert into filler (body) values (${'x'.repeat(2000)})`.execute(trx);
    });
  }
}

/** Frames in the log and frames already copied into the database file, as a PASSIVE checkpoint reports them. */
function walState(path: string): { log: number; checkpointed: number } {
  const database = new DatabaseSync(path);
  try {
    // A checkpoint that copies nothing new: it only reports where the log stands.
    database.exec('PRAGMA wal_autocheckpoint = 0');
    const row = database.prepare('PRAGMA wal_checkpoint(NOOP)').get();
    return { log: Number(row?.log ?? -1), checkpointed: Number(row?.checkpointed ?? -1) };
  } finally {
    database.close();
  }
}

async function until(check: () => boolean): Promise<boolean> {
  const deadline = Date.now() + WAIT_MS;
  while (Date.now() < deadline) {
    if (check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return check();
}

describe('SQLite checkpoints', () => {
  it('are taken by the background thread, so the database file grows while the server only appends', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentry-checkpointer-'));
    const path = join(dir, 'agentry.db');
    const storage = await openStorage(
      { databaseUrl: null, databaseSchema: null, dataDir: dir },
      { backgroundCheckpoints: true },
    );
    try {
      await storage.migrate(dataDirSecrets(dir));
      const before = statSync(path).size;
      await writeRows(storage);
      // About 800 kB of rows: every frame of the log reaches the database file within a few intervals. Read as a
      // state reached, not at one instant: a look taken while the thread's checkpoint is still copying sees part.
      let state = { log: -1, checkpointed: -1 };
      const copied = await until(() => {
        if (statSync(path).size < before + ROWS * 2000) return false;
        state = walState(path);
        return state.log > 0 && state.checkpointed === state.log;
      });
      expect(copied, JSON.stringify(state)).toBe(true);
    } finally {
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('stay inside COMMITs without the thread (the default for every other opener)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentry-checkpointer-'));
    const path = join(dir, 'agentry.db');
    const storage = await openStorage({ databaseUrl: null, databaseSchema: null, dataDir: dir });
    try {
      await storage.migrate(dataDirSecrets(dir));
      await sql`select 1`.execute(storage.db);
      await writeRows(storage);
      await new Promise((resolve) => setTimeout(resolve, 600));
      // SQLite's automatic checkpoint (1000 pages) ran inside some COMMIT: part of the log is copied, and what
      // came after the last one is not (no thread copies it).
      const state = walState(path);
      expect(state.log).toBeGreaterThan(0);
      expect(state.checkpointed).toBeLessThan(state.log);
    } finally {
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('let the COMMITs checkpoint from the configured log size (AGENTRY_SQLITE_WAL_PAGES) while the thread runs', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentry-checkpointer-'));
    const autocheckpoint = async (options: Parameters<typeof openStorage>[1]): Promise<unknown> => {
      const storage = await openStorage({ databaseUrl: null, databaseSchema: null, dataDir: dir }, options);
      try {
        const result = await sql<{ wal_autocheckpoint: number }>`PRAGMA wal_autocheckpoint`.execute(storage.db);
        return result.rows[0]?.wal_autocheckpoint;
      } finally {
        await storage.close();
      }
    };
    try {
      expect(await autocheckpoint({ backgroundCheckpoints: true, autocheckpointPages: 300 })).toBe(300);
      expect(await autocheckpoint({ backgroundCheckpoints: true })).toBe(SERVER_AUTOCHECKPOINT_PAGES);
      // Without the thread the setting has no effect: SQLite's own default stays.
      expect(await autocheckpoint({ autocheckpointPages: 300 })).toBe(1000);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('read their log size from AGENTRY_SQLITE_WAL_PAGES, refusing a value out of range by name', () => {
    expect(loadConfig({}).sqliteWalPages).toBe(SERVER_AUTOCHECKPOINT_PAGES);
    expect(loadConfig({ AGENTRY_SQLITE_WAL_PAGES: '4000' }).sqliteWalPages).toBe(4000);
    expect(() => loadConfig({ AGENTRY_SQLITE_WAL_PAGES: '50' })).toThrow(/AGENTRY_SQLITE_WAL_PAGES.*between 100/);
    expect(() => loadConfig({ AGENTRY_SQLITE_WAL_PAGES: 'lots' })).toThrow(/AGENTRY_SQLITE_WAL_PAGES.*integer/);
  });

  it('stop with the storage: closing does not wait for anything', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentry-checkpointer-'));
    const storage = await openStorage(
      { databaseUrl: null, databaseSchema: null, dataDir: dir },
      { backgroundCheckpoints: true },
    );
    const started = Date.now();
    await storage.close();
    // A close that waited for the thread without stopping it would never end; the bound is far above any machine's.
    expect(Date.now() - started).toBeLessThan(30_000);
    rmSync(dir, { recursive: true, force: true });
  });

  it('report a thread that cannot work (its database cannot be opened), so the server falls back', async () => {
    const errors: unknown[] = [];
    const checkpointer = startCheckpointer(join(tmpdir(), 'agentry-missing-dir', 'nested', 'agentry.db'), {
      busyTimeoutMs: 100,
      onError: (error) => errors.push(error),
    });
    expect(await until(() => errors.length > 0)).toBe(true);
    expect(String(errors[0])).toMatch(/unable to open|no such file|cannot open/i);
    await checkpointer.stop();
  });
});
