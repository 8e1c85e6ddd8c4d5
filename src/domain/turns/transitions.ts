/**
 * Every change of a turn's state, written with its events in the caller's transaction. The API (cancel of a
 * waiting turn, answers) and the engine (start, steps, ends) share these, so a state never changes without its
 * session events and webhooks. The features built on turns add theirs through the change's hooks (turn-hooks.ts).
 */

import { type ExpressionBuilder, type Kysely, PostgresAdapter } from 'kysely';
import { formatTraceparent, runTrace } from '../../lib/trace-context.ts';
import { type Prepared, prepare, prepareUpdate } from '../../storage/prepared.ts';
import type { Database, MessageRow, RunRow } from '../../storage/schema.ts';
import { transactionMemo } from '../../storage/transaction-memo.ts';
import { type SessionEvent, type SessionEventInput, type WebhookEventInput, writeEvents } from '../outbox.ts';
import { preview } from '../runs/preview.ts';
import { closeOpenSpans } from '../runs/spans.ts';
import type { SessionStatus } from '../sessions/session-service.ts';
import { appendItems, loadMessageItems } from './item-store.ts';
import type { MessageError, MessageStatus, RequiredAction } from './message-types.ts';
import { pendingCalls } from './pending-calls.ts';
import { markWorkPending } from './session-rows.ts';
import type { ActionRequiredFields, TurnChange as Change, TurnTransition } from './turn-hooks.ts';
import { addStepUsage, messageUsageFields, runUsageFields } from './turn-store.ts';

export type { TurnChange } from './turn-hooks.ts';

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
 * message's status is a transition of this file): a writer that only needs to know whether the turn ended need
 * not read the message again.
 */
export function statusWritten(trx: Kysely<Database>, messageId: string): MessageStatus | undefined {
  return writtenMessageStatuses.get(trx, messageId);
}

/** A session's status and hidden flag, as a change found them. */
interface SessionState {
  status: SessionStatus;
  hidden: number;
}

/**
 * The session's event and webhook for its move to `status` from `before` (as setStatus found it; undefined: no such
 * session). Returns whether the session is hidden (the workspace of legacy Tasks and tool runs, which the Sessions
 * API does not show).
 */
function sessionStatusEvents(
  change: Change,
  status: SessionStatus,
  before: SessionState | undefined,
  events: SessionEventInput[],
  webhooks: WebhookEventInput[],
): boolean {
  if (before === undefined) return false;
  const hidden = before.hidden === 1;
  if (before.status === status) return hidden;
  const id = change.message.session_id;
  events.push({ kind: 'session.status', data: { status, previous: before.status } });
  if (status === 'running') webhooks.push({ type: 'agent.session.in_progress', data: { id } });
  if (status === 'idle') webhooks.push({ type: 'agent.session.idle', data: { id } });
  if (status === 'failed') webhooks.push({ type: 'agent.session.failed', data: { id } });
  return hidden;
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
async function setStatus(
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

/** Runs the hooks of the change (what they write joins its transaction); their webhooks join the change's. */
async function runHooks(change: Change, transition: TurnTransition, webhooks: WebhookEventInput[]): Promise<void> {
  for (const hook of change.hooks) {
    if (hook.changed !== undefined) webhooks.push(...(await hook.changed(change, transition)));
  }
}

async function emit(
  change: Change,
  events: SessionEventInput[],
  webhooks: WebhookEventInput[],
  hidden: boolean,
): Promise<SessionEvent[]> {
  // Hidden sessions (legacy Tasks, tool runs) are not the Sessions API's: they report through the notifications of
  // their features (task.*, workflow.run.*) instead of agent.session.* ones.
  // Deliveries of a turn with trace context (a traced submission) name its invoke_agent span.
  const traced =
    change.message.traceparent === null ? null : runTrace(change.message.run_id, change.message.traceparent);
  const traceparent =
    traced === null
      ? null
      : formatTraceparent({ traceId: traced.traceId, spanId: traced.spanId, flags: traced.sampled ? 1 : 0 });
  const sent = hidden ? webhooks.filter((webhook) => !webhook.type.startsWith('agent.session.')) : webhooks;
  return writeEvents(
    change.trx,
    { orgId: change.message.org_id, sessionId: change.message.session_id, now: change.now },
    events,
    {
      subscriptions: change.subscriptions,
      events: traceparent === null ? sent : sent.map((webhook) => ({ ...webhook, traceparent })),
    },
  );
}

/** Starts a queued turn; its events, and the message as this change left it. */
export async function startTurn(
  change: Change,
  agentVersion: number,
): Promise<{ events: SessionEvent[]; message: MessageRow }> {
  const { message, now } = change;
  const fields = { started_at: now, agent_version: agentVersion };
  const before = await setStatus(change, 'running', 'running', fields, { agent_version: agentVersion });
  const events: SessionEventInput[] = [
    { kind: 'message.status', messageId: message.id, runId: message.run_id, data: { status: 'running' } },
  ];
  const webhooks: WebhookEventInput[] = [];
  const hidden = sessionStatusEvents(change, 'running', before, events, webhooks);
  await runHooks(change, { status: 'running', resumed: false }, webhooks);
  return {
    events: await emit(change, events, webhooks, hidden),
    message: { ...message, ...fields, status: 'running', updated_at: now },
  };
}

/** Back to running after its actions were resolved; the engine picks it up again. */
export async function resumeTurn(change: Change): Promise<SessionEvent[]> {
  const { message } = change;
  const before = await setStatus(change, 'running', 'running');
  await markWorkPending(change.trx, { sessionId: message.session_id });
  const events: SessionEventInput[] = [
    { kind: 'message.status', messageId: message.id, runId: message.run_id, data: { status: 'running' } },
  ];
  const webhooks: WebhookEventInput[] = [];
  const hidden = sessionStatusEvents(change, 'running', before, events, webhooks);
  await runHooks(change, { status: 'running', resumed: true }, webhooks);
  return emit(change, events, webhooks, hidden);
}

export async function requireAction(change: Change, actions: RequiredAction[]): Promise<SessionEvent[]> {
  const { message } = change;
  const before = await setStatus(change, 'requires_action', 'requires_action');
  const events: SessionEventInput[] = [
    {
      kind: 'message.status',
      messageId: message.id,
      runId: message.run_id,
      data: { status: 'requires_action', requiredActions: actions },
    },
  ];
  const webhooks: WebhookEventInput[] = [];
  const hidden = sessionStatusEvents(change, 'requires_action', before, events, webhooks);
  const first = actions[0];
  if (first !== undefined) {
    // A feature may name what it started the turn for (a scheduled turn: its schedule, spec 6).
    let added: ActionRequiredFields = {};
    for (const hook of change.hooks) {
      if (hook.actionRequired !== undefined) added = { ...added, ...(await hook.actionRequired(change)) };
    }
    webhooks.push({
      type: 'agent.session.action_required',
      data: {
        id: message.session_id,
        turn_id: message.id,
        required_action:
          first.type === 'function_call'
            ? { type: 'function_call', call_id: first.callId, name: first.name }
            : first.type === 'tool_approval'
              ? {
                  type: 'tool_approval',
                  action_id: first.actionId,
                  call_id: first.callId,
                  tool: first.tool,
                  server: first.server,
                }
              : { type: 'ask_user_question', action_id: first.actionId },
        required_actions_count: actions.length,
        ...added,
      },
    });
  }
  await runHooks(change, { status: 'requires_action', actions }, webhooks);
  return emit(change, events, webhooks, hidden);
}

/** Closes tool calls left open by a turn that ends, so the log stays a valid model context. */
async function closePendingCalls(change: Change, reason: string): Promise<void> {
  const { trx, message, now } = change;
  const pending = pendingCalls(await loadMessageItems(trx, message.id));
  await appendItems(
    trx,
    { orgId: message.org_id, sessionId: message.session_id, now },
    pending.map((call) => ({
      messageId: message.id,
      step: call.item.step,
      callId: call.callId,
      content: { type: 'function_call_output', name: call.name, output: reason, isError: true, source: 'cancelled' },
    })),
  );
}

export async function completeTurn(change: Change, responseText: string): Promise<SessionEvent[]> {
  const { message, now } = change;
  const before = await setStatus(
    change,
    'completed',
    'idle',
    { response_text: responseText, completed_at: now },
    { output_preview: preview(responseText) },
  );
  const events: SessionEventInput[] = [
    { kind: 'message.status', messageId: message.id, runId: message.run_id, data: { status: 'completed' } },
    {
      kind: 'message.completed',
      messageId: message.id,
      runId: message.run_id,
      data: { response: { parts: [{ type: 'text', text: responseText }] } },
    },
  ];
  const webhooks: WebhookEventInput[] = [
    { type: 'agent.session.turn.completed', data: { id: message.id, session_id: message.session_id } },
  ];
  const hidden = sessionStatusEvents(change, 'idle', before, events, webhooks);
  await runHooks(change, { status: 'completed' }, webhooks);
  return emit(change, events, webhooks, hidden);
}

export async function failTurn(
  change: Change,
  error: MessageError,
  partialText: string | null,
): Promise<SessionEvent[]> {
  const { message, now } = change;
  const reason = `Turn failed: ${error.message}`;
  await closePendingCalls(change, reason);
  await closeOpenSpans(change.trx, message.run_id, 'failed', reason, now);
  const before = await setStatus(
    change,
    'failed',
    'failed',
    { error: JSON.stringify(error), completed_at: now, response_text: partialText },
    { error: JSON.stringify(error), output_preview: partialText === null ? null : preview(partialText) },
  );
  const events: SessionEventInput[] = [
    { kind: 'message.status', messageId: message.id, runId: message.run_id, data: { status: 'failed' } },
    { kind: 'message.failed', messageId: message.id, runId: message.run_id, data: { error } },
  ];
  const webhooks: WebhookEventInput[] = [
    { type: 'agent.session.turn.failed', data: { id: message.id, session_id: message.session_id, error } },
  ];
  const hidden = sessionStatusEvents(change, 'failed', before, events, webhooks);
  await runHooks(change, { status: 'failed', error }, webhooks);
  return emit(change, events, webhooks, hidden);
}

export async function cancelTurn(change: Change, partialText: string | null): Promise<SessionEvent[]> {
  const { message, now } = change;
  const error: MessageError = { code: 'cancelled', message: 'The turn was interrupted' };
  const reason = 'Tool call cancelled: the turn was interrupted';
  await closePendingCalls(change, reason);
  await closeOpenSpans(change.trx, message.run_id, 'cancelled', reason, now);
  const before = await setStatus(
    change,
    'cancelled',
    'idle',
    { error: JSON.stringify(error), completed_at: now, response_text: partialText },
    { error: JSON.stringify(error), output_preview: partialText === null ? null : preview(partialText) },
  );
  const events: SessionEventInput[] = [
    { kind: 'message.status', messageId: message.id, runId: message.run_id, data: { status: 'cancelled' } },
    { kind: 'message.cancelled', messageId: message.id, runId: message.run_id, data: { error } },
  ];
  const webhooks: WebhookEventInput[] = [
    { type: 'agent.session.turn.cancelled', data: { id: message.id, session_id: message.session_id } },
  ];
  const hidden = sessionStatusEvents(change, 'idle', before, events, webhooks);
  await runHooks(change, { status: 'cancelled' }, webhooks);
  return emit(change, events, webhooks, hidden);
}
