/**
 * Recording the outputs of tool calls answered by the API caller, in the caller's transaction (which holds the
 * session row lock). Shared by the conversation items route, the Responses surface and the engine's callers.
 */
import { AppError, validationError } from '../../errors/app-error.ts';
import { jsonEqual } from '../../lib/hash.ts';
import type { Executor } from '../../storage/db.ts';
import { prepare } from '../../storage/prepared.ts';
import type { SessionEvent } from '../outbox.ts';
import { endToolSpan } from '../runs/spans.ts';
import { appendItems, loadMessageItems } from './item-store.ts';
import { type CallKind, type Item, itemFromRow, turnText } from './items.ts';
import { requiredActionsOf } from './message-view.ts';
import { pendingCalls } from './pending-calls.ts';
import { lockSession, markWorkPending } from './session-rows.ts';
import { completeTurn, resumeTurn } from './transitions.ts';
import type { TurnListeners } from './turn-hooks.ts';

export type ClientOutputMode = 'continue' | 'persist';

export interface ClientOutput {
  callId: string;
  output: string;
}

export interface RecordedOutputs {
  /** The stored output items, in request order (an identical retry returns the item stored before). */
  items: Item[];
  events: SessionEvent[];
  /** True when a turn was resumed or ended and the engine must be woken (for it, or for turns queued behind it). */
  resumed: boolean;
  /** Messages whose last waiting call got its output by this request. */
  unblocked: string[];
}

/** Text the assistant produced in a turn so far. */
function textOf(items: Item[]): string {
  return items
    .map((item) => (item.content.type === 'assistant_message' ? item.content.text : ''))
    .filter((text) => text !== '')
    .join('\n');
}

/** How recordOutputs treats the outputs it is given. */
export interface RecordOptions {
  /** What a turn left with no call waiting does: it continues, or it ends completed with what it produced. */
  mode: ClientOutputMode;
  /** The calls the caller answers: client tools, and on the OpenAI surfaces also questions. */
  kinds: readonly CallKind[];
}

/**
 * Each call_id must name a call of this session answered by the caller (`kinds`); an identical retry returns the
 * stored item, a different output is a 409. When a turn has no call left waiting it continues (`continue`) or ends
 * completed with what it produced (`persist`).
 */
export async function recordOutputs(
  trx: Executor,
  listeners: TurnListeners,
  target: { orgId: string; sessionId: string; now: number },
  outputs: ClientOutput[],
  { mode, kinds }: RecordOptions,
): Promise<RecordedOutputs> {
  const recording: Recording = { trx, target, kinds };
  const byCall = await callsNamed(trx, target.sessionId, outputs);
  const { items, touched } = await storeOutputs(recording, outputs, byCall);
  const ended = await endUnblockedTurns(recording, listeners, touched, mode);
  return { items, ...ended };
}

/** A call of the session and its output, when one is stored. */
interface CallEntry {
  call?: Item;
  output?: Item;
}

/** The calls `outputs` name in the session, each with its stored output if any, by call id. */
async function callsNamed(trx: Executor, sessionId: string, outputs: ClientOutput[]): Promise<Map<string, CallEntry>> {
  const rows =
    outputs.length === 0
      ? []
      : await trx
          .selectFrom('items')
          .selectAll()
          .where('session_id', '=', sessionId)
          .where(
            'call_id',
            'in',
            outputs.map((output) => output.callId),
          )
          .orderBy('seq')
          .execute();
  const byCall = new Map<string, CallEntry>();
  for (const row of rows) {
    const entry = byCall.get(row.call_id ?? '') ?? {};
    const item = itemFromRow(row);
    if (item.content.type === 'function_call') entry.call = item;
    else entry.output = item;
    byCall.set(row.call_id ?? '', entry);
  }
  return byCall;
}

/** One recordOutputs request: the caller's transaction (holding the session row lock), its target and `kinds`. */
interface Recording {
  trx: Executor;
  target: { orgId: string; sessionId: string; now: number };
  kinds: readonly CallKind[];
}

/**
 * Stores each output in request order, ending its tool span; an identical retry takes the item stored before.
 * Returns the items and the messages that got an output.
 */
async function storeOutputs(
  { trx, target, kinds }: Recording,
  outputs: ClientOutput[],
  byCall: Map<string, CallEntry>,
): Promise<{ items: Item[]; touched: Set<string> }> {
  const items: Item[] = [];
  const touched = new Set<string>();
  const seen = new Set<string>();
  for (const [index, output] of outputs.entries()) {
    const entry = byCall.get(output.callId);
    const call = entry?.call;
    if (call === undefined || call.content.type !== 'function_call' || !kinds.includes(call.content.kind)) {
      throw validationError(
        `[${index}].call_id`,
        `call_id ${output.callId} does not name a client function call of this conversation`,
      );
    }
    if (seen.has(output.callId)) throw validationError(`[${index}].call_id`, `call_id ${output.callId} appears twice`);
    seen.add(output.callId);
    const existing = entry?.output;
    if (existing !== undefined) {
      if (existing.content.type === 'function_call_output' && jsonEqual(existing.content.output, output.output)) {
        items.push(existing);
        continue;
      }
      throw new AppError(
        'function_call_output_conflict',
        `a different output is already recorded for call_id ${output.callId}`,
        {
          param: `[${index}].output`,
        },
      );
    }
    const [created] = await appendItems(trx, target, [
      {
        messageId: call.messageId,
        step: call.step,
        callId: output.callId,
        content: {
          type: 'function_call_output',
          name: call.content.name,
          output: output.output,
          isError: false,
          source: call.content.kind === 'question' ? 'answer' : 'client',
        },
      },
    ]);
    if (created !== undefined) items.push(created);
    await endToolSpan(trx, { ...output, messageId: call.messageId, status: 'completed', now: target.now });
    touched.add(call.messageId);
  }
  return { items, touched };
}

/**
 * Continues (`continue`) or completes (`persist`) each message among `touched` that waits for input and has no
 * call left waiting.
 */
async function endUnblockedTurns(
  { trx, target }: Recording,
  listeners: TurnListeners,
  touched: Set<string>,
  mode: ClientOutputMode,
): Promise<Omit<RecordedOutputs, 'items'>> {
  const { orgId, sessionId, now } = target;
  const events: SessionEvent[] = [];
  let resumed = false;
  const unblocked: string[] = [];
  for (const messageId of touched) {
    const message = await trx
      .selectFrom('messages')
      .selectAll()
      .where('id', '=', messageId)
      .where('org_id', '=', orgId)
      .executeTakeFirst();
    if (message === undefined || message.status !== 'requires_action') continue;
    const messageItems = await loadMessageItems(trx, messageId);
    if (requiredActionsOf(pendingCalls(messageItems)).length > 0) continue;
    unblocked.push(messageId);
    const change = { trx, message, now, ...listeners };
    if (mode === 'continue') {
      events.push(...(await resumeTurn(change)));
    } else {
      events.push(...(await completeTurn(change, textOf(messageItems))));
      // Turns queued behind the one that just ended can run now.
      await markWorkPending(trx, { sessionId });
    }
    resumed = true;
  }
  return { events, resumed, unblocked };
}

/**
 * Ends the waiting turns among `messageIds` that wait for nothing but the calls in `answered` (decided by this
 * request, their outputs left to the turn that continues them), completed with the text they produced: on the
 * Responses surface the new Response continues such a turn, as after persisted client outputs.
 */
export async function completeAnsweredTurns(
  trx: Executor,
  listeners: TurnListeners,
  now: number,
  messageIds: Iterable<string>,
  answered: ReadonlySet<string>,
): Promise<SessionEvent[]> {
  const events: SessionEvent[] = [];
  for (const messageId of messageIds) {
    const message = await trx.selectFrom('messages').selectAll().where('id', '=', messageId).executeTakeFirst();
    if (message === undefined || message.status !== 'requires_action') continue;
    const items = await loadMessageItems(trx, messageId);
    const waiting = pendingCalls(items).filter((call) => !answered.has(call.callId));
    if (requiredActionsOf(waiting).length > 0) continue;
    events.push(...(await completeTurn({ trx, message, now, ...listeners }, turnText(items))));
  }
  return events;
}

/**
 * Ends a turn waiting only for calls its caller answers elsewhere, completed with the text it produced: a stateless
 * chat completion hands its client tool calls back, and the caller sends their outputs with a new call. Locks the
 * session first; a turn no longer waiting, or waiting for something else too (an approval), is left as it is.
 */
export async function completeHandedBackTurn(
  trx: Executor,
  listeners: TurnListeners,
  target: { sessionId: string; now: number },
  messageId: string,
): Promise<SessionEvent[]> {
  await lockSession(trx, target);
  const calls = pendingCalls(await loadMessageItems(trx, messageId)).filter((call) => call.kind === 'client');
  const answered = new Set(calls.map((call) => call.callId));
  return completeAnsweredTurns(trx, listeners, target.now, [messageId], answered);
}

/** The ids of the session's messages waiting for client outputs or approvals. */
export const waitingMessages = prepare((db, p: { sessionId: string }) =>
  db.selectFrom('messages').select('id').where('session_id', '=', p.sessionId).where('status', '=', 'requires_action'),
);

/** Client calls of the session still waiting for their output. */
export async function pendingClientCalls(trx: Executor, sessionId: string) {
  const waiting = await waitingMessages.all(trx, { sessionId });
  const calls = [];
  for (const message of waiting) {
    calls.push(...pendingCalls(await loadMessageItems(trx, message.id)).filter((call) => call.kind === 'client'));
  }
  return calls;
}
