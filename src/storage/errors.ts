/**
 * Recognises storage errors of either dialect (and of the file system) by kind, so callers can turn them into domain
 * errors or decide to try again: constraint violations, writes that failed because the disk is full, and Postgres
 * being unreachable right now.
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

/** Socket errors of a connection that could not be made or was lost. */
const NETWORK_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
]);

/**
 * SQLSTATEs of a server that is going away, starting, out of connections, or that cancelled a statement past
 * its time: class 08 (connection exception), 57P01 admin_shutdown (also `pg_terminate_backend`), 57P02
 * crash_shutdown, 57P03 cannot_connect_now, 57014 query_canceled (statement_timeout), 53300 too_many_connections.
 */
const SERVER_CODES: ReadonlySet<string> = new Set(['57P01', '57P02', '57P03', '57014', '53300']);

/** What `pg`, `pg-pool` and Kysely's driver say when a connection is lost, cannot be had in time, or timed out. */
const CLIENT_MESSAGES =
  /^(Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error and is not queryable|Client was closed and is not queryable|Postgres connection has been discarded)/;

/**
 * True when `error` (or an error it wraps) says the database cannot be reached right now, as opposed to a query
 * it refused: the same work may succeed once the connection is back. Such errors are answered 503 with Retry-After,
 * and the engine keeps a turn that met one instead of failing it.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (let current = error, depth = 0; current !== undefined && current !== null && depth < 5; depth++) {
    const code = codeOf(current);
    if (code !== undefined && (NETWORK_CODES.has(code) || SERVER_CODES.has(code) || /^08[0-9A-Z]{3}$/.test(code)))
      return true;
    if (CLIENT_MESSAGES.test(messageOf(current))) return true;
    if (current instanceof AggregateError && current.errors.some(isDatabaseUnavailable)) return true;
    current = current instanceof Error ? current.cause : undefined;
  }
  return false;
}
