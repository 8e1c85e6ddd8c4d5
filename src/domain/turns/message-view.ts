/** Projects stored rows to the Message resource, with its unresolved actions. */
import { iso } from '../../lib/clock.ts';
import type { Executor } from '../../storage/db.ts';
import { parseJsonColumn } from '../../storage/json-column.ts';
import type { MessageRow } from '../../storage/schema.ts';
import { itemFromRow } from './items.ts';
import {
  type AttachmentPart,
  isMessageError,
  isMessageParts,
  type Message,
  type MessagePart,
  type RequiredAction,
  warningsOf,
} from './message-types.ts';
import { type PendingCall, pendingCalls, waitingElicitation } from './pending-calls.ts';

export function requiredActionsOf(pending: PendingCall[]): RequiredAction[] {
  const actions: RequiredAction[] = [];
  for (const call of pending) {
    if (call.kind === 'question') {
      let question = '';
      let options: unknown[] | null = null;
      try {
        const args: unknown = JSON.parse(call.arguments);
        if (typeof args === 'object' && args !== null) {
          const q: unknown = Reflect.get(args, 'question');
          const o: unknown = Reflect.get(args, 'options');
          question = typeof q === 'string' ? q : '';
          options = Array.isArray(o) ? o : null;
        }
      } catch {
        question = call.arguments;
      }
      actions.push({ type: 'ask_user_question', actionId: call.actionId, question, options });
    } else if (call.kind === 'client') {
      actions.push({ type: 'function_call', callId: call.callId, name: call.name, arguments: call.arguments });
    } else if (call.approval?.state === 'pending') {
      const content = call.item.content;
      const server = content.type === 'function_call' ? content.server : undefined;
      actions.push({
        type: 'tool_approval',
        actionId: call.actionId,
        callId: call.callId,
        tool: call.name,
        server: server?.label ?? 'agentry',
        serverTool: server?.tool ?? call.name,
        arguments: call.arguments,
        approvalId: call.approval.id,
        expiresAt: call.approval.expiresAt === null ? null : iso(call.approval.expiresAt),
      });
    } else {
      const asked = waitingElicitation(call);
      if (asked?.item.content.type !== 'elicitation') continue;
      const { content } = asked.item;
      actions.push({
        type: 'mcp_elicitation',
        actionId: asked.actionId,
        callId: call.callId,
        tool: call.name,
        server: content.server,
        elicitationId: asked.id,
        mode: content.mode,
        message: content.message,
        requestedSchema: content.requestedSchema,
        url: content.url,
      });
    }
  }
  return actions;
}

/**
 * The text and prompt parts as shown: consecutive text parts joined with newlines (as the model read them), prompt
 * parts kept; a message of files alone shows one empty text part.
 */
function shownParts(parts: MessagePart[]): MessagePart[] {
  const shown: MessagePart[] = [];
  for (const part of parts) {
    if (part.type === 'image' || part.type === 'file') continue;
    const last = shown.at(-1);
    if (part.type === 'text' && last?.type === 'text')
      shown[shown.length - 1] = { type: 'text', text: `${last.text}\n${part.text}` };
    else shown.push(part);
  }
  return shown.length === 0 ? [{ type: 'text', text: '' }] : shown;
}

export function messageFromRow(row: MessageRow, actions: RequiredAction[]): Message {
  const parts = parseJsonColumn(row.parts, isMessageParts, 'messages.parts');
  const attachments = parts.filter((part): part is AttachmentPart => part.type === 'image' || part.type === 'file');
  return {
    id: row.id,
    object: 'message',
    sessionId: row.session_id,
    status: row.status,
    parts: [...shownParts(parts), ...attachments],
    response:
      row.status === 'completed' || row.response_text !== null
        ? { parts: [{ type: 'text', text: row.response_text ?? '' }] }
        : null,
    error: row.error === null ? null : parseJsonColumn(row.error, isMessageError, 'messages.error'),
    requiredActions: row.status === 'requires_action' ? actions : [],
    usage: {
      inputTokens: row.input_tokens,
      outputTokens: row.output_tokens,
      totalTokens: row.input_tokens + row.output_tokens,
    },
    runId: row.run_id,
    warnings: warningsOf(row.warnings, 'messages.warnings'),
    createdAt: iso(row.created_at),
    startedAt: row.started_at === null ? null : iso(row.started_at),
    completedAt: row.completed_at === null ? null : iso(row.completed_at),
  };
}

/** Messages with their required actions, loading the call items of all of them in one query. */
export async function messagesWithActions(db: Executor, rows: MessageRow[]): Promise<Message[]> {
  const waiting = rows.filter((row) => row.status === 'requires_action').map((row) => row.id);
  const byMessage = new Map<string, RequiredAction[]>();
  if (waiting.length > 0) {
    const itemRows = await db
      .selectFrom('items')
      .selectAll()
      .where('message_id', 'in', waiting)
      .where('type', 'in', [
        'function_call',
        'function_call_output',
        'approval_decision',
        'elicitation',
        'elicitation_response',
      ])
      .orderBy('seq')
      .execute();
    const items = itemRows.map(itemFromRow);
    for (const id of waiting) {
      byMessage.set(id, requiredActionsOf(pendingCalls(items.filter((item) => item.messageId === id))));
    }
  }
  return rows.map((row) => messageFromRow(row, byMessage.get(row.id) ?? []));
}
