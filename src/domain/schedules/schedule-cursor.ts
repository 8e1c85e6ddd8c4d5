/** Cursor lists of schedules and schedule runs, in the shape of the Runs lists (has_more, next_cursor). */
import { decodeRunCursor, encodeRunCursor, type RunCursor } from '../runs/cursor.ts';

export interface CursorPage<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
  next_cursor: string | null;
}

/** Position after the last item of a page, newest first: (created_at ms, id); the same opaque form as Runs. */
export const encodeCursor = (cursor: RunCursor): string => encodeRunCursor(cursor);
export const decodeCursor = (cursor: string): RunCursor => decodeRunCursor(cursor);
