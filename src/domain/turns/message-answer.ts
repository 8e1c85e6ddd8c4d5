/**
 * Answering a message's action through the Sessions API (and the protocols built on it): an MCP server's
 * elicitation, a tool approval's decision (`{approved, reason?}`) or an ask_user_question question. One transaction
 * locks the session first; the turn resumes once none of its actions is left waiting.
 */
import { AppError } from '../../errors/app-error.ts';
import type { Executor } from '../../storage/db.ts';
import type { MessageRow } from '../../storage/schema.ts';
import { approvalCall, decide, parseDecisionAnswer } from '../approvals/approvals.ts';
import type { AuditContext } from '../audit/audit-log.ts';
import { answerElicitation, elicitationItem, parseElicitationAnswer } from '../elicitations/elicitations.ts';
import { afterCommit, type SessionEvent, writeEvents } from '../outbox.ts';
import { endToolSpan } from '../runs/spans.ts';
import { appendItems, loadMessageItems } from './item-store.ts';
import type { Item } from './items.ts';
import { findMessage, lockOwnSession, type MessageContext } from './message-context.ts';
import { requiredActionsOf } from './message-view.ts';
import { pendingCalls } from './pending-calls.ts';
import { resumeTurn } from './transitions.ts';
import type { TurnListeners } from './turn-hooks.ts';

/** An answer to action `actionId` of a message. */
export interface ActionAnswer {
  orgId: string;
  sessionId: string;
  messageId: string;
  actionId: number;
  /** Any JSON value: a question's answer, an elicitation's content or an approval's decision. */
  answer: unknown;
  /** Who decided an approval, for the audit log. */
  audit?: AuditContext | undefined;
}

/** `resuming` when the answer left the turn waiting for nothing, so it goes on; `accepted` otherwise. */
export type AnswerStatus = 'accepted' | 'resuming';

interface Answered {
  status: AnswerStatus;
  events: SessionEvent[];
}

/** One answer being applied, in the transaction that locked its session: the message and its items as read. */
interface Answering {
  trx: Executor;
  listeners: TurnListeners;
  request: ActionAnswer;
  message: MessageRow;
  items: Item[];
  now: number;
}

/**
 * Answers a question or an elicitation, or decides a tool approval; the turn resumes once none of its actions is
 * left waiting. Events go out after commit, with a wake-up when the turn resumes.
 */
export async function answerAction(
  ctx: MessageContext,
  request: ActionAnswer,
): Promise<{ messageId: string; actionId: number; status: AnswerStatus }> {
  const { status, events } = await ctx.db.transaction().execute((trx) => answerInTransaction(trx, ctx, request));
  afterCommit(ctx.bus, request.sessionId, events, status === 'resuming');
  return { messageId: request.messageId, actionId: request.actionId, status };
}

async function answerInTransaction(trx: Executor, ctx: MessageContext, request: ActionAnswer): Promise<Answered> {
  const { orgId, sessionId, messageId, actionId } = request;
  const now = ctx.clock.now();
  await lockOwnSession(trx, orgId, sessionId, now);
  const message = await findMessage(trx, orgId, sessionId, messageId);
  const items = await loadMessageItems(trx, messageId);
  const answering: Answering = { trx, listeners: ctx.listeners, request, message, items, now };
  const asked = elicitationItem(items, actionId);
  if (asked !== undefined) {
    const parsed = parseElicitationAnswer(asked.content, request.answer);
    const target = { orgId, sessionId, now, listeners: ctx.listeners };
    const answered = await answerElicitation(trx, target, { message, items, asked }, parsed, 'answer');
    return { status: answered.resumed ? 'resuming' : 'accepted', events: answered.events };
  }
  const approval = items.find(
    (item) =>
      item.content.type === 'function_call' &&
      item.content.approval !== undefined &&
      item.content.actionId === actionId,
  );
  return approval === undefined ? answerQuestion(answering) : decideApproval(answering);
}

/**
 * Decides a tool approval. Decidable as soon as it is asked: also while the other calls of its step still run (the
 * turn then finds the decision without suspending).
 */
async function decideApproval({ trx, listeners, request, message, items, now }: Answering): Promise<Answered> {
  const { orgId, sessionId, messageId, actionId, audit } = request;
  const decision = parseDecisionAnswer(request.answer);
  const call = approvalCall(items, actionId);
  const open = message.status === 'requires_action' || message.status === 'running';
  if (!open || call === undefined || call.approval?.state !== 'pending') {
    throw new AppError('action_not_waiting', `action ${actionId} is no longer waiting for a decision`, {
      param: 'actionId',
    });
  }
  const target = { orgId, sessionId, now };
  const by = { by: 'answer' as const, ...(audit === undefined ? {} : { audit }) };
  const { events } = await decide(trx, target, call, { ...decision, ...by }, messageId);
  if (message.status === 'running') return { status: 'accepted', events };
  const after = await loadMessageItems(trx, messageId);
  if (requiredActionsOf(pendingCalls(after)).length > 0) return { status: 'accepted', events };
  events.push(...(await resumeTurn({ trx, message, now, ...listeners })));
  return { status: 'resuming', events };
}

/** Answers an ask_user_question call still waiting: its output is the answer (a string as is, else its JSON). */
async function answerQuestion({ trx, listeners, request, message, items, now }: Answering): Promise<Answered> {
  const { orgId, sessionId, messageId, actionId, answer } = request;
  const call = items.find(
    (item) =>
      item.content.type === 'function_call' && item.content.kind === 'question' && item.content.actionId === actionId,
  );
  if (call === undefined || call.callId === null || call.content.type !== 'function_call') {
    throw new AppError('action_not_waiting', `message ${messageId} has no action ${actionId}`, { param: 'actionId' });
  }
  const pending = pendingCalls(items);
  if (message.status !== 'requires_action' || !pending.some((p) => p.callId === call.callId)) {
    throw new AppError('action_not_waiting', `action ${actionId} is no longer waiting for an answer`, {
      param: 'actionId',
    });
  }
  const output = typeof answer === 'string' ? answer : JSON.stringify(answer);
  await appendItems(trx, { orgId, sessionId, now }, [
    {
      messageId,
      step: call.step,
      callId: call.callId,
      content: {
        type: 'function_call_output',
        name: call.content.name,
        output,
        isError: false,
        source: 'answer',
        answer,
      },
    },
  ]);
  await endToolSpan(trx, { messageId, callId: call.callId, status: 'completed', output, now });
  const events = await writeEvents(trx, { orgId, sessionId, now }, [
    {
      kind: 'message.event',
      messageId,
      runId: message.run_id,
      data: { sourceType: 'tool_ask_user_question', actionId, type: 'answered' },
    },
  ]);
  const stillWaiting = requiredActionsOf(pending.filter((p) => p.callId !== call.callId));
  if (stillWaiting.length > 0) return { status: 'accepted', events };
  events.push(...(await resumeTurn({ trx, message, now, ...listeners })));
  return { status: 'resuming', events };
}
