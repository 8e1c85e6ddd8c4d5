/**
 * Every change of a turn's state, written with its events in the caller's transaction. The API (cancel of a
 * waiting turn, answers) and the engine (start, steps, ends) share these, so a state never changes without its
 * session events and webhooks. The features built on turns add theirs through the change's hooks (turn-hooks.ts).
 * The rows a change writes (message, run, session status) are written by transition-rows.ts.
 */

import { formatTraceparent, runTrace } from '../../lib/trace-context.ts';
import type { MessageRow } from '../../storage/schema.ts';
import { type SessionEvent, type SessionEventInput, type WebhookEventInput, writeEvents } from '../outbox.ts';
import { preview } from '../runs/preview.ts';
import { closeOpenSpans } from '../runs/spans.ts';
import type { SessionStatus } from '../sessions/session-service.ts';
import { appendItems, loadMessageItems } from './item-store.ts';
import type { MessageError, RequiredAction } from './message-types.ts';
import { pendingCalls } from './pending-calls.ts';
import { markWorkPending } from './session-rows.ts';
import { type SessionState, setStatus } from './transition-rows.ts';
import type { ActionRequiredFields, TurnChange as Change, TurnTransition } from './turn-hooks.ts';

export type { TurnChange } from './turn-hooks.ts';

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
