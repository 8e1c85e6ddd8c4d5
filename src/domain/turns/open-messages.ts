import { MESSAGE_COLUMNS } from '../../storage/columns.ts';
import type { Executor } from '../../storage/db.ts';
import { prepare } from '../../storage/prepared.ts';
import type { MessageRow } from '../../storage/schema.ts';
import { OPEN_STATUSES } from './message-types.ts';

const openMessages = prepare((db, p: { sessionId: string }) =>
  db
    .selectFrom('messages')
    .select(MESSAGE_COLUMNS)
    .where('session_id', '=', p.sessionId)
    .where('status', 'in', OPEN_STATUSES),
);

/**
 * The session's first unfinished message (its active turn), or undefined. Unfinished messages are few, so they are
 * all read through the (session_id, status) index and the first picked here: ordering in SQL made SQLite walk the
 * session's whole history on the (session_id, seq) index instead.
 */
export async function firstOpenMessage(db: Executor, sessionId: string): Promise<MessageRow | undefined> {
  const open = await openMessages.all(db, { sessionId });
  let first: (typeof open)[number] | undefined;
  for (const row of open) if (first === undefined || row.seq < first.seq) first = row;
  return first;
}
