/**
 * The webhook follow-up read (GET /v1/agents/sessions/{id}): a notification only names the session; the receiver
 * fetches its current state here, including the calls it must answer. `required_actions` lists every unresolved
 * action of the session's waiting turns, oldest first, each with the turn (message) it belongs to.
 */
import { notFound } from '../../errors/app-error.ts';
import type { Executor } from '../../storage/db.ts';
import { type Session, sessionFromRow } from '../sessions/session-service.ts';
import { messagesWithActions } from '../turns/message-view.ts';

export type FollowUpAction =
  | { type: 'function_call'; turn_id: string; call_id: string; name: string; arguments: string }
  | { type: 'ask_user_question'; turn_id: string; action_id: number; question: string; options: unknown[] | null }
  | {
      type: 'tool_approval';
      turn_id: string;
      action_id: number;
      call_id: string;
      tool: string;
      server: string;
      arguments: string;
      approval_id: string;
    }
  | {
      type: 'mcp_elicitation';
      turn_id: string;
      action_id: number;
      call_id: string;
      tool: string;
      server: string;
      elicitation_id: string;
      mode: 'form' | 'url';
      message: string;
      requested_schema: Record<string, unknown> | null;
      url: string | null;
    };

export type FollowUpSession = Session & { required_actions: FollowUpAction[] };

export async function followUpSession(db: Executor, orgId: string, sessionId: string): Promise<FollowUpSession> {
  const row = await db
    .selectFrom('sessions')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('id', '=', sessionId.toLowerCase())
    .executeTakeFirst();
  if (row === undefined) throw notFound('session', sessionId);
  const waiting = await db
    .selectFrom('messages')
    .selectAll()
    .where('session_id', '=', row.id)
    .where('status', '=', 'requires_action')
    .orderBy('seq')
    .execute();
  const actions: FollowUpAction[] = [];
  for (const message of await messagesWithActions(db, waiting)) {
    for (const action of message.requiredActions) {
      if (action.type === 'mcp_elicitation') {
        actions.push({
          type: 'mcp_elicitation',
          turn_id: message.id,
          action_id: action.actionId,
          call_id: action.callId,
          tool: action.tool,
          server: action.server,
          elicitation_id: action.elicitationId,
          mode: action.mode,
          message: action.message,
          requested_schema: action.requestedSchema,
          url: action.url,
        });
        continue;
      }
      actions.push(
        action.type === 'function_call'
          ? {
              type: 'function_call',
              turn_id: message.id,
              call_id: action.callId,
              name: action.name,
              arguments: action.arguments,
            }
          : action.type === 'tool_approval'
            ? {
                type: 'tool_approval',
                turn_id: message.id,
                action_id: action.actionId,
                call_id: action.callId,
                tool: action.tool,
                server: action.server,
                arguments: action.arguments,
                approval_id: action.approvalId,
              }
            : {
                type: 'ask_user_question',
                turn_id: message.id,
                action_id: action.actionId,
                question: action.question,
                options: action.options,
              },
      );
    }
  }
  return { ...sessionFromRow(row), required_actions: actions };
}
