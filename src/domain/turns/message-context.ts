/**
 * What the operations of the message service (message-service.ts, message-answer.ts, message-cancel.ts) share: the
 * context they run in, the session lock that answers 404 for another org's session, the message lookup and the
 * session's unfinished turns.
 */
import type { Bus } from '../../bus/bus.ts';
import { notFound } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import { MESSAGE_COLUMNS } from '../../storage/columns.ts';
import type { Executor } from '../../storage/db.ts';
import { prepare } from '../../storage/prepared.ts';
import type { MessageRow } from '../../storage/schema.ts';
import { OPEN_STATUSES } from './message-types.ts';
import { lockSession } from './session-rows.ts';
import type { TurnListeners } from './turn-hooks.ts';

/** The service's handles, built once by createMessageService. */
export interface MessageContext {
  db: Executor;
  clock: Clock;
  /** Where events and wake-ups go after commit, and interrupts to the worker running a turn. */
  bus: Bus;
  /** What every state change of a turn tells: webhook subscriptions and the features' hooks. */
  listeners: TurnListeners;
}

/** Locks the session row for this transaction (session-rows.ts `lockSession`); a 404 unless the org's session. */
export async function lockOwnSession(trx: Executor, orgId: string, sessionId: string, now: number): Promise<void> {
  if (!(await lockSession(trx, { sessionId, now, orgId }))) throw notFound('session', sessionId);
}

const messageOfSession = prepare((db, p: { orgId: string; sessionId: string; messageId: string }) =>
  db
    .selectFrom('messages')
    .select(MESSAGE_COLUMNS)
    .where('id', '=', p.messageId)
    .where('session_id', '=', p.sessionId)
    .where('org_id', '=', p.orgId),
);

export async function findMessage(
  db: Executor,
  orgId: string,
  sessionId: string,
  messageId: string,
): Promise<MessageRow> {
  const row = await messageOfSession.first(db, { orgId, sessionId, messageId });
  if (row === undefined) throw notFound('message', messageId);
  return row;
}

/** The session's unfinished turns, oldest first. */
export const openTurns = (trx: Executor, sessionId: string) =>
  trx
    .selectFrom('messages')
    .selectAll()
    .where('session_id', '=', sessionId)
    .where('status', 'in', OPEN_STATUSES)
    .orderBy('seq');
