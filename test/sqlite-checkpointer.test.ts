/**
 * The server's SQLite write-ahead log is checkpointed by a thread of its own (storage/sqlite-checkpointer.ts), not
 * inside COMMITs: the database file takes the log's pages while the server's connection only appends, and the log
 * starts over after a short pause the thread asks for through shared memory. Without the thread (every other
 * opener of the file, the CLI), SQLite's own automatic checkpoints are unchanged.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Kysely, sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { openStorage, type Storage } from '../src/storage/db.ts';
import { ConnectionQueue, NodeSqliteDialect, openSqlite } from '../src/storage/sqlite-adapter.ts';
import {
  FALLBACK_FACTOR,
  MAX_PAUSE_MS,
  newPauseFlag,
  PauseRequests,
  SERVER_AUTOCHECKPOINT_PAGES,
  startCheckpointer,
} from '../src/storage/sqlite-checkpointer.ts';
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

  it('leave the COMMITs a bound of four times the configured log size (AGENTRY_SQLITE_WAL_PAGES) while the thread runs', async () => {
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
      expect(await autocheckpoint({ backgroundCheckpoints: true, autocheckpointPages: 300 })).toBe(
        300 * FALLBACK_FACTOR,
      );
      expect(await autocheckpoint({ backgroundCheckpoints: true })).toBe(SERVER_AUTOCHECKPOINT_PAGES * FALLBACK_FACTOR);
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

  it('start the log over under steady writes, pausing the writers briefly, with every row kept', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentry-checkpointer-'));
    const path = join(dir, 'agentry.db');
    const restartPages = 100;
    const database = openSqlite({ path, backgroundCheckpoints: true, autocheckpointPages: restartPages });
    const db = new Kysely<Record<string, never>>({ dialect: new NodeSqliteDialect({ database }) });
    try {
      await sql`create table filler (id integer primary key, body text not null)`.execute(db);
      // No checkpoint inside a COMMIT: whatever starts the log over is the thread's doing.
      await sql`PRAGMA wal_autocheckpoint = 0`.execute(db);
      // Transactions of a few pages each, one after the other as a busy server's, until the thread has paused
      // the writers a few times (each time the log had passed the restart size).
      let rows = 0;
      let restarts = 0;
      let previousLog = 0;
      const deadline = Date.now() + WAIT_MS;
      while (database.queue.pauses < 3 && Date.now() < deadline) {
        await db.transaction().execute(async (trx) => {
          for (let index = 0; index < 3; index++) {
            await sql`insert into filler (body) values (${'x'.repeat(3000)})`.execute(trx);
            rows += 1;
          }
        });
        if (rows % 30 === 0) {
          const { log } = walState(path);
          if (log < previousLog) restarts += 1;
          previousLog = log;
        }
      }
      expect(database.queue.pauses).toBeGreaterThanOrEqual(3);
      expect(restarts).toBeGreaterThanOrEqual(1);
      const counted = await sql<{ count: number }>`select count(*) as count from filler`.execute(db);
      expect(counted.rows[0]?.count).toBe(rows);
    } finally {
      await database.stopCheckpointer();
      await db.destroy();
    }
    // Everything written is in the file, whole, after the server's connection closed.
    const reopened = new DatabaseSync(path);
    try {
      expect(reopened.prepare('PRAGMA integrity_check').get()?.integrity_check).toBe('ok');
      expect(Number(reopened.prepare('select count(*) as count from filler').get()?.count)).toBeGreaterThan(0);
    } finally {
      reopened.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the connection queue', () => {
  const tick = () => new Promise((resolve) => setTimeout(resolve, 5));

  /** Takes the connection in order; resolves with the holder's name once it is theirs. */
  function take(queue: ConnectionQueue, name: string, order: string[]): Promise<void> {
    return Promise.resolve(queue.acquire()).then(() => {
      order.push(name);
    });
  }

  it('hands the connection to its waiters one at a time, first come first served', async () => {
    const queue = new ConnectionQueue();
    const order: string[] = [];
    await take(queue, 'a', order);
    const b = take(queue, 'b', order);
    const c = take(queue, 'c', order);
    await tick();
    expect(order).toEqual(['a']);
    queue.release();
    await b;
    // A newcomer after the hand-over waits behind c: b holds the connection, c is next.
    const d = take(queue, 'd', order);
    queue.release();
    await c;
    queue.release();
    await d;
    expect(order).toEqual(['a', 'b', 'c', 'd']);
    queue.release();
  });

  it('while the thread asks for a pause, gives the connection to nobody once it is released, until the thread is done', async () => {
    const flag = newPauseFlag();
    const queue = new ConnectionQueue();
    queue.watch(new PauseRequests(flag));
    const order: string[] = [];
    await take(queue, 'holder', order);
    Atomics.store(flag, 0, 1); // the thread asks
    const waiter = take(queue, 'waiter', order);
    await tick();
    // Asked, but the transaction in progress ends first: the thread is told only once it is released.
    expect(Atomics.load(flag, 0)).toBe(1);
    queue.release();
    expect(Atomics.load(flag, 0)).toBe(2); // paused
    await tick();
    expect(order).toEqual(['holder']);
    Atomics.store(flag, 0, 3); // the thread is done
    await waiter;
    expect(order).toEqual(['holder', 'waiter']);
    expect(Atomics.load(flag, 0)).toBe(0);
    expect(queue.pauses).toBe(1);
    queue.release();
  });

  it('does not pause when the thread withdrew its request, and ends a pause the thread never ends', async () => {
    const flag = newPauseFlag();
    const abandoned: number[] = [];
    const queue = new ConnectionQueue({ onAbandoned: (pausedMs) => abandoned.push(pausedMs) });
    queue.watch(new PauseRequests(flag));
    const order: string[] = [];
    await take(queue, 'holder', order);
    Atomics.store(flag, 0, 1);
    const first = take(queue, 'first', order);
    Atomics.store(flag, 0, 0); // withdrawn before the holder released
    queue.release();
    await first;
    expect(queue.pauses).toBe(0);
    queue.release();

    // Asked while the connection is free: paused at once; nothing ends it but the bound.
    Atomics.store(flag, 0, 1);
    const started = performance.now();
    await take(queue, 'late', order);
    expect(performance.now() - started).toBeGreaterThanOrEqual(MAX_PAUSE_MS - 5);
    expect(Atomics.load(flag, 0)).toBe(0);
    expect(order).toEqual(['holder', 'first', 'late']);
    // Said, so that a server's log tells of a thread stuck in a sync.
    expect(abandoned).toHaveLength(1);
    expect(abandoned[0]).toBeGreaterThanOrEqual(MAX_PAUSE_MS - 5);
    queue.release();
  });

  it('ends a pause in progress when the thread stops', async () => {
    const flag = newPauseFlag();
    const queue = new ConnectionQueue();
    queue.watch(new PauseRequests(flag));
    Atomics.store(flag, 0, 1);
    const order: string[] = [];
    const waiter = take(queue, 'waiter', order);
    await tick();
    expect(order).toEqual([]);
    queue.unwatch();
    await waiter;
    expect(order).toEqual(['waiter']);
    queue.release();
  });
});
