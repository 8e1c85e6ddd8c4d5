/**
 * Running out of space, below the HTTP layer: a SQLite transaction that fails for lack of space rejects with
 * SQLite's own error (not the failed ROLLBACK after it), every statement's failure reaches the storage's space
 * monitor, and the monitor's episode (read-only, logged once, a probe that ends it) behaves as
 * storage/storage-space.ts says. A real page limit (`max_page_count`) makes SQLite answer SQLITE_FULL as on a full
 * disk; the real full disk, under a real server, is test/disk-full.test.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { openStorage, type Storage } from '../src/storage/db.ts';
import { createStorageSpace } from '../src/storage/storage-space.ts';
import { capturedLogger, linesStarting } from './helpers/log-capture.ts';
import { dataDirSecrets } from './helpers/migrations.ts';

const episodeStarts = (lines: Record<string, unknown>[]) => linesStarting(lines, 'writes fail for lack of space');

describe('a SQLite database that runs out of space', () => {
  let dir: string | null = null;
  let storage: Storage | null = null;

  afterEach(async () => {
    await storage?.close();
    if (dir !== null) rmSync(dir, { recursive: true, force: true });
    storage = null;
    dir = null;
  });

  it('fails the transaction with SQLITE_FULL, and makes the process read-only once, however often it fails', async () => {
    dir = mkdtempSync(join(tmpdir(), 'agentry-space-'));
    const { logger, lines } = capturedLogger();
    storage = await openStorage({ databaseUrl: null, databaseSchema: null, dataDir: dir }, { logger });
    await storage.migrate(dataDirSecrets(dir));
    const { db, space } = storage;
    await sql`create table filler (body text not null)`.execute(db);
    const { rows } = await sql<{ page_count: number }>`pragma page_count`.execute(db);
    await sql.raw(`pragma max_page_count = ${rows[0]?.page_count ?? 0}`).execute(db);
    expect(space.writable).toBe(true);

    const fill = () =>
      db.transaction().execute(async (trx) => {
        await sql`insert into filler (body) values (${'x'.repeat(100_000)})`.execute(trx);
      });
    // SQLite ends the transaction itself; the ROLLBACK that Kysely sends after it must not hide why.
    await expect(fill()).rejects.toMatchObject({ message: 'database or disk is full', errcode: 13 });
    expect(space.writable).toBe(false);
    expect(space.cause).toBe('database or disk is full');
    await expect(fill()).rejects.toMatchObject({ message: 'database or disk is full' });
    await expect(sql`insert into filler (body) values (${'y'.repeat(100_000)})`.execute(db)).rejects.toMatchObject({
      errcode: 13,
    });
    // Reads go on.
    expect((await sql<{ n: number }>`select count(*) as n from filler`.execute(db)).rows[0]?.n).toBe(0);

    const starts = episodeStarts(lines());
    expect(starts).toHaveLength(1);
    expect(starts[0]).toMatchObject({ level: 50, cause: 'database or disk is full', component: 'storage-space' });
    expect(lines().filter((line) => String(line.msg).includes('cannot rollback'))).toEqual([]);
  });
});

describe('the space monitor', () => {
  const full = () => Object.assign(new Error('database or disk is full'), { code: 'ERR_SQLITE_ERROR', errcode: 13 });

  it('stays read-only while its probe fails, and ends the episode when a probe write commits', async () => {
    const { logger, lines } = capturedLogger();
    let clock = 1_000_000;
    let probeFails: Error | null = full();
    const space = createStorageSpace({
      directory: tmpdir(),
      location: 'test.db',
      probeWrite: async () => {
        if (probeFails !== null) throw probeFails;
      },
      probeMs: 600_000,
      logger,
      now: () => clock,
    });
    try {
      const error = full();
      expect(space.observe(new Error('unrelated'))).toBe(false);
      expect(space.writable).toBe(true);
      expect(space.observe(error)).toBe(true);
      // The same failure seen again (by the request it failed, after the connection) is not a second one.
      expect(space.observe(new Error('wrapped', { cause: error }))).toBe(true);
      space.refused();
      expect(space.writable).toBe(false);

      let resumed = false;
      const waiting = space.whenWritable().then(() => {
        resumed = true;
      });
      const aborted = new AbortController();
      const gaveUp = space.whenWritable(aborted.signal);
      aborted.abort();
      await gaveUp;

      expect(await space.check()).toBe(false);
      // Another failure of the probe (a database that does not answer) does not end it either.
      probeFails = new Error('connect ECONNREFUSED');
      expect(await space.check()).toBe(false);
      clock += 61_000;
      probeFails = full();
      expect(await space.check()).toBe(false);
      expect(resumed).toBe(false);
      const [reminder] = linesStarting(lines(), 'still read-only');
      // The first failure, the refused request and the probe's two failures for lack of space.
      expect(reminder).toMatchObject({ level: 40, failedWrites: 4 });

      probeFails = null;
      expect(await space.check()).toBe(true);
      await waiting;
      expect(space.writable).toBe(true);
      expect(space.cause).toBeNull();
      expect(episodeStarts(lines())).toHaveLength(1);
      expect(lines().at(-1)).toMatchObject({ level: 30, failedWrites: 4, downMs: 61_000 });
    } finally {
      space.close();
    }
  });
});
