/**
 * The tool calls of a message's log that still wait: for their output, for the decision on their approval, or for
 * the answer to what their server asked (an elicitation); and the action ids the log's calls and elicitations took.
 * Read from the items alone, so the engine, the answer route and the Responses surface agree on what waits.
 */
import type { ElicitationAction } from '../../events/session-values.ts';
import type { CallKind, Item } from './items.ts';

export interface PendingCall {
  item: Item;
  callId: string;
  name: string;
  arguments: string;
  kind: CallKind;
  actionId: number;
  /**
   * Server calls that need approval: `pending` until decided, then `approved` (a denied call has its output).
   * Absent for calls that run without asking.
   */
  approval?: { id: string; state: 'pending' | 'approved'; expiresAt: number | null };
  /**
   * Server calls during which the server asked for input: every request so far, in order, with its answer once
   * given. The call waits (runs no more) while the last one has none.
   */
  elicitations?: CallElicitation[];
}

export interface CallElicitation {
  item: Item;
  id: string;
  actionId: number;
  index: number;
  answer: { action: ElicitationAction; content: Record<string, unknown> | null } | null;
}

/** The elicitations of each call in `items`, with their answers, by call id. */
function elicitationsByCall(items: Item[]): Map<string, CallElicitation[]> {
  const byCall = new Map<string, CallElicitation[]>();
  const byId = new Map<string, CallElicitation>();
  for (const item of items) {
    const content = item.content;
    if (content.type === 'elicitation' && item.callId !== null) {
      const entry: CallElicitation = {
        item,
        id: content.elicitationId,
        actionId: content.actionId,
        index: content.index,
        answer: null,
      };
      byId.set(entry.id, entry);
      byCall.set(item.callId, [...(byCall.get(item.callId) ?? []), entry]);
    } else if (content.type === 'elicitation_response') {
      const entry = byId.get(content.elicitationId);
      if (entry !== undefined) entry.answer = { action: content.action, content: content.content };
    }
  }
  return byCall;
}

/**
 * Action ids a message's items took so far: one per call item and per elicitation, numbered from 0 in the order
 * they were made, so the next one made takes this number.
 */
export function actionsTaken(items: Item[]): number {
  return items.filter((item) => item.content.type === 'function_call' || item.content.type === 'elicitation').length;
}

/** The elicitation a call waits for (its last one, unanswered), if any. */
export function waitingElicitation(call: PendingCall): CallElicitation | undefined {
  const last = call.elicitations?.at(-1);
  return last !== undefined && last.answer === null ? last : undefined;
}

/** Tool calls that have no output yet, in call order. */
export function pendingCalls(items: Item[]): PendingCall[] {
  const answered = new Set(
    items.filter((item) => item.content.type === 'function_call_output').map((item) => item.callId),
  );
  const approved = new Set(
    items.flatMap((item) =>
      item.content.type === 'approval_decision' && item.content.approved ? [item.content.approvalId] : [],
    ),
  );
  const elicitations = elicitationsByCall(items);
  const pending: PendingCall[] = [];
  for (const item of items) {
    const content = item.content;
    if (content.type !== 'function_call' || item.callId === null || answered.has(item.callId)) continue;
    const asked = elicitations.get(item.callId);
    pending.push({
      ...(asked === undefined ? {} : { elicitations: asked }),
      item,
      callId: item.callId,
      name: content.name,
      arguments: content.arguments,
      kind: content.kind,
      actionId: content.actionId,
      ...(content.approval === undefined
        ? {}
        : {
            approval: {
              id: content.approval.id,
              state: approved.has(content.approval.id) ? ('approved' as const) : ('pending' as const),
              expiresAt: content.approval.expiresAt ?? null,
            },
          }),
    });
  }
  return pending;
}
