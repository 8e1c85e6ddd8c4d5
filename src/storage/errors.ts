/**
 * Recognises database errors by kind, so callers can turn them into domain errors or decide to try again:
 * constraint violations (either dialect), and Postgres being unreachable right now.
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
