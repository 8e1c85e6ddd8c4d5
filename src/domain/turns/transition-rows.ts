/**
 * The rows a turn's state change writes: the message, its run and the session's status, in one statement on
 * Postgres, and what this transaction wrote of them so a second change in it skips the read. The changes
 * themselves, with their events and hooks, are transitions.ts.
 */

import { type ExpressionBuilder, type Kysely, PostgresAdapter } from 'kysely';
import { type Prepared, prepare, prepareUpdate } from '../../storage/prepared.ts';
import type { Database, MessageRow, RunRow } from '../../storage/schema.ts';
import { transactionMemo } from '../../storage/transaction-memo.ts';
import type { SessionStatus } from '../sessions/session-service.ts';
import type { MessageStatus } from './message-types.ts';
import type { TurnChange as Change } from './turn-hooks.ts';
import { addStepUsage, messageUsageFields, runUsageFields } from './turn-store.ts';

const sessionStatus = prepare((db, p: { id: string }) =>
  db.selectFrom('sessions').select(['status', 'hidden']).where('id', '=', p.id),
);
const updateSession = prepareUpdate('sessions');
/** A session's status as this transaction set it (a turn's start and end can share one transaction). */
const writtenStatuses = transactionMemo<{ status: SessionStatus; hidden: number }>();
const updateMessage = prepareUpdate('messages');
const updateRun = prepareUpdate('runs');
/** The status each message got from the last transition of this transaction. */
const writtenMessageStatuses = transactionMemo<MessageStatus>();

/**
 * The status the message got from this transaction's last transition, if one moved it (every change of a
 * message's status is a transition of transitions.ts): a writer that only needs to know whether the turn ended need
 * not read the message again.
 */
export function statusWritten(trx: Kysely<Database>, messageId: string): MessageStatus | undefined {
  return writtenMessageStatuses.get(trx, messageId);
}

/** A session's status and hidden flag, as a change found them. */
export interface SessionState {
  status: SessionStatus;
  hidden: number;
}

/**
 * What a change does to the session's status: `move` reads it and sets it unless it already is the target (its
 * status was not written by this transaction); `set` writes it (this transaction wrote another one); `none`: this
 * transaction already left it at the target.
 */
type SessionWrite = 'move' | 'set' | 'none';

/** The message-run-session updates of Postgres, by what they write. */
const pairedUpdates = new Map<string, Prepared<Record<string, unknown>, unknown>>();

const setColumns = (values: Readonly<Record<string, unknown>>) =>
  Object.keys(values).filter((column) => values[column] !== undefined);

/** The shape of a statement of updateTurnRows: the columns it sets and what it does to the session. */
interface PairedShape {
  messageColumns: readonly string[];
  runColumns: readonly string[];
  session: SessionWrite;
  /** It adds a step's usage to the message and run. */
  usage: boolean;
}

const settings = (columns: readonly string[], prefix: string, p: Record<string, unknown>): Record<string, unknown> =>
  Object.fromEntries(columns.map((column) => [column, p[`${prefix}.${column}`]]));

/** The message's and run's updates of a paired statement (a step's usage first, the change's own columns after). */
function pairedSets(shape: PairedShape, p: Record<string, unknown>) {
  // The parameters are markers read by name: spreading them would read none.
  const added = {
    inputTokens: p.inputTokens as number,
    cachedInputTokens: p.cachedInputTokens as number,
    outputTokens: p.outputTokens as number,
    costMicros: p.costMicros as number,
    now: p.now as number,
  };
  return {
    message: (eb: ExpressionBuilder<Database, 'messages'>) =>
      ({
        ...(shape.usage ? messageUsageFields(added)(eb) : {}),
        ...settings(shape.messageColumns, 'm', p),
      }) as never,
    run: (eb: ExpressionBuilder<Database, 'runs'>) =>
      ({ ...(shape.usage ? runUsageFields(added)(eb) : {}), ...settings(shape.runColumns, 'r', p) }) as never,
  };
}

/** Postgres: the statement of updateTurnRows of this shape. */
function pairedStatement(db: Kysely<Database>, p: Record<string, unknown>, shape: PairedShape) {
  const sets = pairedSets(shape, p);
  const message = db.with('message', (qb) =>
    qb
      .updateTable('messages')
      .set(sets.message)
      .where('id', '=', p.messageId as never)
      .returning('id'),
  );
  const sessionSet = { status: p.status as never, updated_at: p.now as never };
  const sessionId = p.sessionId as never;
  const runId = p.runId as never;
  if (shape.session === 'none') return message.updateTable('runs').set(sets.run).where('id', '=', runId);
  if (shape.session === 'set') {
    return message
      .with('session', (qb) => qb.updateTable('sessions').set(sessionSet).where('id', '=', sessionId).returning('id'))
      .updateTable('runs')
      .set(sets.run)
      .where('id', '=', runId);
  }
  // `old` reads the session as the statement found it: the data-modifying CTEs do not change what it sees.
  return message
    .with('run', (qb) => qb.updateTable('runs').set(sets.run).where('id', '=', runId).returning('id'))
    .with('old', (qb) => qb.selectFrom('sessions').select(['status', 'hidden']).where('id', '=', sessionId))
    .with('moved', (qb) =>
      qb
        .updateTable('sessions')
        .set(sessionSet)
        .where('id', '=', sessionId)
        .where('status', '<>', p.status as never)
        .returning('id'),
    )
    .selectFrom('old')
    .select(['old.status', 'old.hidden']);
}

/** Postgres: the prepared statement of updateTurnRows of this shape. */
function pairedUpdate(shape: PairedShape): Prepared<Record<string, unknown>, unknown> {
  const key = `${shape.session}|${shape.usage}|${shape.messageColumns.join(',')}|${shape.runColumns.join(',')}`;
  let query = pairedUpdates.get(key);
  if (query === undefined) {
    query = prepare((db, p: Record<string, unknown>) => pairedStatement(db, p, shape));
    pairedUpdates.set(key, query);
  }
  return query;
}

/**
 * Updates a message row, its run's and its session's status; the session as it was. On Postgres in one statement
 * (the message's and session's updates data-modifying CTEs of the run's: one round trip instead of three); on
 * SQLite, where statements cost no round trip, one by one.
 */
async function updateTurnRows(
  change: Change,
  messageValues: Readonly<Record<string, unknown>>,
  runValues: Readonly<Record<string, unknown>>,
  target: SessionStatus,
): Promise<SessionState | undefined> {
  const { trx, message, now } = change;
  const written = writtenStatuses.get(trx, message.session_id);
  const session: SessionWrite = written === undefined ? 'move' : written.status === target ? 'none' : 'set';
  const usage = change.stepUsage;
  if (!(trx.getExecutor().adapter instanceof PostgresAdapter)) {
    if (usage !== undefined) await addStepUsage(trx, message, usage, now);
    await updateMessage.run(trx, message.id, messageValues);
    await updateRun.run(trx, message.run_id, runValues);
    const before = written ?? (await sessionStatus.first(trx, { id: message.session_id }));
    if (before !== undefined && before.status !== target) {
      await updateSession.run(trx, message.session_id, { status: target, updated_at: now });
    }
    return before;
  }
  const messageColumns = setColumns(messageValues);
  const runColumns = setColumns(runValues);
  const params: Record<string, unknown> = {
    messageId: message.id,
    runId: message.run_id,
    sessionId: message.session_id,
    status: target,
    now,
    ...usage,
  };
  for (const column of messageColumns) params[`m.${column}`] = messageValues[column];
  for (const column of runColumns) params[`r.${column}`] = runValues[column];
  const query = pairedUpdate({ messageColumns, runColumns, session, usage: usage !== undefined });
  if (session !== 'move') {
    await query.run(trx, params);
    return written;
  }
  // The `move` statement selects the session as it was (pairedUpdate).
  return (await query.first(trx, params)) as SessionState | undefined;
}

/**
 * Moves the message and its run together, and the session to `session`; `run` carries the run's own extra
 * columns for the same update. The session as the change found it (undefined: there is none).
 */
export async function setStatus(
  change: Change,
  status: MessageStatus,
  session: SessionStatus,
  fields: Partial<MessageRow> = {},
  run: Partial<Pick<RunRow, 'agent_version' | 'output_preview' | 'error'>> = {},
): Promise<SessionState | undefined> {
  const { trx, message, now } = change;
  writtenMessageStatuses.set(trx, message.id, status);
  const before = await updateTurnRows(
    change,
    { ...fields, status, updated_at: now },
    {
      ...run,
      status,
      ...(fields.started_at === undefined ? {} : { started_at: fields.started_at }),
      ...(fields.completed_at === undefined ? {} : { completed_at: fields.completed_at }),
    },
    session,
  );
  if (before !== undefined) writtenStatuses.set(trx, message.session_id, { status: session, hidden: before.hidden });
  return before;
}
