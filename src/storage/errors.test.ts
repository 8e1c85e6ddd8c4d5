/**
 * Which errors say "the disk is full": SQLite's SQLITE_FULL, a file system's ENOSPC, Postgres's 53100 disk_full,
 * also when wrapped by a caller; never a constraint violation, Postgres's 53200 out_of_memory, or any other error.
 * The SQLite and file-system errors are real ones (a page limit, /dev/full); test/disk-full.test.ts has the Postgres
 * server raise 53100 itself.
 */
import { writeFileSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { DatabaseError } from 'pg';
import { describe, expect, it } from 'vitest';
import { thrownBy } from '../../test/helpers/thrown.ts';
import { AppError } from '../errors/app-error.ts';
import { isStorageFull, isUniqueViolation, storageFullError } from './errors.ts';

/** The error SQLite raises when a write needs a page it may not have: SQLITE_FULL, as on a full disk. */
function sqliteFull(): unknown {
  const database = new DatabaseSync(':memory:');
  try {
    database.exec('create table t (x text)');
    database.exec('pragma max_page_count = 2');
    return thrownBy(() => database.prepare('insert into t values (?)').run('x'.repeat(100_000)));
  } finally {
    database.close();
  }
}

function postgresError(code: string, message: string): DatabaseError {
  // As pg builds it from the server's ErrorResponse.
  const error = new DatabaseError(message, message.length, 'error');
  error.code = code;
  return error;
}

describe('storage full errors', () => {
  it("recognise SQLite's SQLITE_FULL, the file system's ENOSPC and Postgres's 53100", () => {
    const sqlite = sqliteFull();
    expect(sqlite).toMatchObject({ message: 'database or disk is full', errcode: 13 });
    expect(isStorageFull(sqlite)).toBe(true);

    const enospc = thrownBy(() => writeFileSync('/dev/full', 'x'));
    expect(enospc).toMatchObject({ code: 'ENOSPC' });
    expect(isStorageFull(enospc)).toBe(true);

    const disk = postgresError('53100', 'could not extend file "base/16384/16400": No space left on device');
    expect(isStorageFull(disk)).toBe(true);
  });

  it('find the cause under the errors that wrap it, and hand back the original', () => {
    const cause = sqliteFull();
    const wrapped = new AppError('internal_error', 'the turn could not be saved', {
      cause: new Error('step failed', { cause }),
    });
    expect(storageFullError(wrapped)).toBe(cause);
  });

  it('leave every other error alone', () => {
    const database = new DatabaseSync(':memory:');
    database.exec('create table t (x text primary key)');
    database.exec("insert into t values ('a')");
    const unique = thrownBy(() => database.exec("insert into t values ('a')"));
    database.close();
    expect(isUniqueViolation(unique)).toBe(true);
    expect(isStorageFull(unique)).toBe(false);
    expect(isStorageFull(postgresError('53200', 'out of memory'))).toBe(false);
    expect(isStorageFull(postgresError('23505', 'duplicate key value'))).toBe(false);
    expect(isStorageFull(thrownBy(() => writeFileSync('/nonexistent-dir/x', 'x')))).toBe(false);
    expect(isStorageFull(new Error('database or disk is full'))).toBe(false);
    expect(isStorageFull(null)).toBe(false);
  });
});
