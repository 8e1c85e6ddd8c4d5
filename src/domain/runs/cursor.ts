/**
 * Opaque pagination cursors: base64url of a small JSON object. Decoding is strict: the text must be canonical
 * base64url of exactly the expected shape (re-encoding it gives the same text), otherwise it is a 400 on
 * `cursor`. Clients must treat cursors as opaque; the shape may change.
 */
import { validationError } from '../../errors/app-error.ts';
import { isUuid } from '../../lib/ids.ts';

const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** Position after the last run of a page, newest first: (created_at ms, id). */
export interface RunCursor {
  created_at: number;
  id: string;
}

/** Position after the last span of a trace page. */
export interface SpanCursor {
  seq: number;
}

const encode = (value: object): string => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');

const invalid = () => validationError('cursor', 'cursor is not a valid pagination cursor; pass next_cursor unchanged');

function decode(cursor: string): Record<string, unknown> {
  if (!BASE64URL.test(cursor)) throw invalid();
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid();
  return { ...value };
}

const isCount = (value: unknown): value is number => Number.isSafeInteger(value) && Number(value) >= 0;

/** The cursor only if re-encoding what was understood of it gives back the same text. */
function exactly<T extends object>(cursor: string, built: T | null): T {
  if (built === null || encode(built) !== cursor) throw invalid();
  return built;
}

export const encodeRunCursor = (cursor: RunCursor): string => encode({ created_at: cursor.created_at, id: cursor.id });

export function decodeRunCursor(cursor: string): RunCursor {
  const decoded = decode(cursor);
  const { created_at: createdAt, id } = decoded;
  const built = isCount(createdAt) && typeof id === 'string' && isUuid(id) ? { created_at: createdAt, id } : null;
  return exactly(cursor, built);
}

export const encodeSpanCursor = (cursor: SpanCursor): string => encode({ seq: cursor.seq });

export function decodeSpanCursor(cursor: string): SpanCursor {
  const decoded = decode(cursor);
  const built = isCount(decoded.seq) ? { seq: decoded.seq } : null;
  return exactly(cursor, built);
}
