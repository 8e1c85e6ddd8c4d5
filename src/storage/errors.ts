/**
 * Recognises storage errors of either dialect (and of the file system), so callers can turn them into domain
 * errors: constraint violations, and writes that failed because the disk is full.
 */

function codeOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code: unknown = Reflect.get(error, 'code');
  return typeof code === 'string' ? code : undefined;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : '';
}

export function isUniqueViolation(error: unknown): boolean {
  return codeOf(error) === '23505' || /UNIQUE constraint failed/.test(messageOf(error));
}

export function isForeignKeyViolation(error: unknown): boolean {
  return codeOf(error) === '23503' || /FOREIGN KEY constraint failed/.test(messageOf(error));
}

/** SQLite's primary result code SQLITE_FULL ("database or disk is full"); extended codes keep it in the low byte. */
const SQLITE_FULL = 13;
/** Postgres SQLSTATE disk_full (class 53, insufficient resources): "could not extend file …", "could not write …". */
const POSTGRES_DISK_FULL = '53100';
/** The file system: no space left on the device, or the user's disk quota is used up. */
const FILE_SYSTEM_FULL: ReadonlySet<string> = new Set(['ENOSPC', 'EDQUOT']);
/** How many causes deep an error is searched (errors wrapped by callers keep the original as `cause`). */
const CAUSE_DEPTH = 4;

function fullHere(error: Error): boolean {
  const code = codeOf(error);
  if (code === POSTGRES_DISK_FULL || (code !== undefined && FILE_SYSTEM_FULL.has(code))) return true;
  // node:sqlite: code ERR_SQLITE_ERROR, the SQLite result code in `errcode`.
  const errcode: unknown = Reflect.get(error, 'errcode');
  return code === 'ERR_SQLITE_ERROR' && typeof errcode === 'number' && (errcode & 0xff) === SQLITE_FULL;
}

/**
 * The error (itself or one of its causes) that says a write failed for lack of space: SQLite's SQLITE_FULL,
 * Postgres's 53100 disk_full, or a file system's ENOSPC or EDQUOT; null for any other error. Postgres's
 * 53200 out_of_memory is not one: it is memory, and freeing disk space does not end it.
 */
export function storageFullError(error: unknown): Error | null {
  let current: unknown = error;
  for (let depth = 0; depth < CAUSE_DEPTH && current instanceof Error; depth++) {
    if (fullHere(current)) return current;
    current = current.cause;
  }
  return null;
}

export function isStorageFull(error: unknown): boolean {
  return storageFullError(error) !== null;
}
