/**
 * Every change of a turn's state, written with its events in the caller's transaction. The API (cancel of a
 * waiting turn, answers) and the engine (start, steps, ends) share these, so a state never changes without its
 * session events and webhooks. The features built on turns add theirs through the change's hooks (turn-hooks.ts).
 */

import { type Kysely, PostgresAdapter } from 'kysely';
import { formatTraceparent, runTrace } from '../../lib/trace-context.ts';
import { type Prepared, prepare, prepareUpdate } from '../../storage/prepared.ts';
import type { Database, MessageRow, RunRow } from '../../storage/schema.ts';
import { transactionMemo } from '../../storage/transaction-memo.ts';
import { type SessionEvent, type SessionEventInput, type WebhookEventInput, writeEvents } from '../outbox.ts';
import { preview } from '../runs/preview.ts';
import { closeOpenSpans } from '../runs/spans.ts';
import type { SessionStatus } from '../sessions/session-service.ts';
import { appendItems, loadMessageItems, pendingCalls } from './items.ts';
import type { MessageError, MessageStatus, RequiredAction } from './message-types.ts';
import { markWorkPending } from './session-rows.ts';
import type { ActionRequiredFields, TurnChange as Change, TurnTransition } from './turn-hooks.ts';

export type { TurnChange } from './turn-hooks.ts';

const sessionStatus = prepare((db, p: { id: string }) =>
  db.selectFrom('sessions').select(['status', 'hidden']).where('id', '=', p.id),
);
const updateSession = prepareUpdate('sessions');
/**
 * Postgres: the session's status and hidden flag as they were, and its status set unless it already was `status`,
 * in one statement (the update a data-modifying CTE, which does not change what `old` reads).
 */
const moveSessionStatus = prepare((db, p: { id: string; status: SessionStatus; now: number }) =>
  db
    .with('old', (qb) => qb.selectFrom('sessions').select(['status', 'hidden']).where('id', '=', p.id))
    .with('moved', (qb) =>
      qb
        .updateTable('sessions')
        .set({ status: p.status, updated_at: p.now })
        .where('id', '=', p.id)
        .where('status', '<>', p.status)
        .returning('id'),
    )
    .selectFrom('old')
    .select(['old.status', 'old.hidden']),
);
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

/**
 * Moves the session to `status`, with its event and webhook. Returns whether the session is hidden (the
 * workspace of legacy Tasks and tool runs, which the Sessions API does not show).
 */
async function sessionStatusEvents(
  change: Change,
  status: SessionStatus,
  events: SessionEventInput[],
  webhooks: WebhookEventInput[],
): Promise<boolean> {
  const { trx, message, now } = change;
  const written = writtenStatuses.get(trx, message.session_id);
  const moved = written === undefined && trx.getExecutor().adapter instanceof PostgresAdapter;
  const session =
    written ??
    (moved
      ? await moveSessionStatus.first(trx, { id: message.session_id, status, now })
      : await sessionStatus.first(trx, { id: message.session_id }));
  if (session === undefined) return false;
  const hidden = session.hidden === 1;
  if (session.status === status) return hidden;
  if (!moved) await updateSession.run(trx, message.session_id, { status, updated_at: now });
  writtenStatuses.set(trx, message.session_id, { status, hidden: session.hidden });
  events.push({ kind: 'session.status', data: { status, previous: session.status } });
  if (status === 'running') webhooks.push({ type: 'agent.session.in_progress', data: { id: message.session_id } });
  if (status === 'idle') webhooks.push({ type: 'agent.session.idle', data: { id: message.session_id } });
  if (status === 'failed') webhooks.push({ type: 'agent.session.failed', data: { id: message.session_id } });
  return hidden;
}

/** The message-and-run updates of Postgres, by the columns they set. */
const pairedUpdates = new Map<string, Prepared<Record<string, unknown>, unknown>>();

const setColumns = (values: Readonly<Record<string, unknown>>) =>
  Object.keys(values).filter((column) => values[column] !== undefined);

/**
 * Updates a message row and its run's. On Postgres in one statement (the message's update a data-modifying CTE of
 * the run's: one round trip instead of two); on SQLite, where statements cost no round trip, in two.
 */
async function updateMessageAndRun(
  trx: Kysely<Database>,
  ids: { messageId: string; runId: string },
  messageValues: Readonly<Record<string, unknown>>,
  runValues: Readonly<Record<string, unknown>>,
): Promise<void> {
  if (!(trx.getExecutor().adapter instanceof PostgresAdapter)) {
    await updateMessage.run(trx, ids.messageId, messageValues);
    await updateRun.run(trx, ids.runId, runValues);
    return;
  }
  const messageColumns = setColumns(messageValues);
  const runColumns = setColumns(runValues);
  const key = `${messageColumns.join(',')}|${runColumns.join(',')}`;
  let query = pairedUpdates.get(key);
  if (query === undefined) {
    const set = (columns: string[], prefix: string, p: Record<string, unknown>) =>
      Object.fromEntries(columns.map((column) => [column, p[`${prefix}.${column}`]])) as never;
    query = prepare((db, p: Record<string, unknown>) =>
      db
        .with('message', (qb) =>
          qb
            .updateTable('messages')
            .set(set(messageColumns, 'm', p))
            .where('id', '=', p.messageId as never)
            .returning('id'),
        )
        .updateTable('runs')
        .set(set(runColumns, 'r', p))
        .where('id', '=', p.runId as never),
    );
    pairedUpdates.set(key, query);
  }
  const params: Record<string, unknown> = { messageId: ids.messageId, runId: ids.runId };
  for (const column of messageColumns) params[`m.${column}`] = messageValues[column];
  for (const column of runColumns) params[`r.${column}`] = runValues[column];
  await query.run(trx, params);
}

/** Moves the message and its run together; `run` carries the run's own extra columns for the same update. */
async function setStatus(
  change: Change,
  status: MessageStatus,
  fields: Partial<MessageRow> = {},
  run: Partial<Pick<RunRow, 'agent_version' | 'output_preview' | 'error'>> = {},
): Promise<void> {
  const { trx, message, now } = change;
  writtenMessageStatuses.set(trx, message.id, status);
  await updateMessageAndRun(
    trx,
    { messageId: message.id, runId: message.run_id },
    { ...fields, status, updated_at: now },
    {
      ...run,
      status,
      ...(fields.started_at === undefined ? {} : { started_at: fields.started_at }),
      ...(fields.completed_at === undefined ? {} : { completed_at: fields.completed_at }),
    },
  );
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
  await setStatus(change, 'running', fields, { agent_version: agentVersion });
  const events: SessionEventInput[] = [
    { kind: 'message.status', messageId: message.id, runId: message.run_id, data: { status: 'running' } },
  ];
  const webhooks: WebhookEventInput[] = [];
  const hidden = await sessionStatusEvents(change, 'running', events, webhooks);
  await runHooks(change, { status: 'running', resumed: false }, webhooks);
  return {
    events: await emit(change, events, webhooks, hidden),
    message: { ...message, ...fields, status: 'running', updated_at: now },
  };
}

/** Back to running after its actions were resolved; the engine picks it up again. */
export async function resumeTurn(change: Change): Promise<SessionEvent[]> {
  const { message } = change;
  await setStatus(change, 'running');
  await markWorkPending(change.trx, { sessionId: message.session_id });
  const events: SessionEventInput[] = [
    { kind: 'message.status', messageId: message.id, runId: message.run_id, data: { status: 'running' } },
  ];
  const webhooks: WebhookEventInput[] = [];
  const hidden = await sessionStatusEvents(change, 'running', events, webhooks);
  await runHooks(change, { status: 'running', resumed: true }, webhooks);
  return emit(change, events, webhooks, hidden);
}

export async function requireAction(change: Change, actions: RequiredAction[]): Promise<SessionEvent[]> {
  const { message } = change;
  await setStatus(change, 'requires_action');
  const events: SessionEventInput[] = [
    {
      kind: 'message.status',
      messageId: message.id,
      runId: message.run_id,
      data: { status: 'requires_action', requiredActions: actions },
    },
  ];
  const webhooks: WebhookEventInput[] = [];
  const hidden = await sessionStatusEvents(change, 'requires_action', events, webhooks);
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
  await setStatus(
    change,
    'completed',
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
  const hidden = await sessionStatusEvents(change, 'idle', events, webhooks);
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
  await setStatus(
    change,
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
  const hidden = await sessionStatusEvents(change, 'failed', events, webhooks);
  await runHooks(change, { status: 'failed', error }, webhooks);
  return emit(change, events, webhooks, hidden);
}

export async function cancelTurn(change: Change, partialText: string | null): Promise<SessionEvent[]> {
  const { message, now } = change;
  const error: MessageError = { code: 'cancelled', message: 'The turn was interrupted' };
  const reason = 'Tool call cancelled: the turn was interrupted';
  await closePendingCalls(change, reason);
  await closeOpenSpans(change.trx, message.run_id, 'cancelled', reason, now);
  await setStatus(
    change,
    'cancelled',
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
  const hidden = await sessionStatusEvents(change, 'idle', events, webhooks);
  await runHooks(change, { status: 'cancelled' }, webhooks);
  return emit(change, events, webhooks, hidden);
}
