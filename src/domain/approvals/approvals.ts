/**
 * Approvals of tool calls (docs/tools.md, "Approvals"): the one writer of `tool_approvals`. A call that needs
 * approval gets a row when the model's step is stored (same transaction as its call item); the row takes exactly
 * one decision, through a conditional update, whoever sends it (the answer route, an `mcp_approval_response` on
 * the Responses surface, or the timeout); and an approved call is marked started once, before it runs, so it
 * never runs twice. Every function runs in the caller's transaction; callers hold the session's row lock or the
 * worker's lease.
 */

import { AppError, validationError } from '../../errors/app-error.ts';
import { newId } from '../../lib/ids.ts';
import type { Executor } from '../../storage/db.ts';
import type { MessageRow, ToolApprovalRow } from '../../storage/schema.ts';
import { type AuditContext, appendAudit, SYSTEM_AUDIT } from '../audit/audit-log.ts';
import { type SessionEvent, writeEvents } from '../outbox.ts';
import { endToolSpan } from '../runs/spans.ts';
import { appendItems, loadMessageItems } from '../turns/item-store.ts';
import type { Item } from '../turns/items.ts';
import { requiredActionsOf } from '../turns/message-view.ts';
import { type PendingCall, pendingCalls } from '../turns/pending-calls.ts';
import { lockSession } from '../turns/session-rows.ts';
import { resumeTurn } from '../turns/transitions.ts';
import type { TurnListeners } from '../turns/turn-hooks.ts';

export const newApprovalId = (): string => `mcpr_${newId().replaceAll('-', '')}`;

export type DecidedBy = 'answer' | 'responses' | 'timeout';

export interface Decision {
  approved: boolean;
  reason: string | null;
  by: DecidedBy;
  /** Who decided, for the audit log; without it the decision is recorded as the system's (a timeout). */
  audit?: AuditContext;
}

/** The longest reason kept with a decision (characters). */
export const MAX_REASON_CHARS = 2000;

export interface NewApproval {
  id: string;
  orgId: string;
  sessionId: string;
  messageId: string;
  callId: string;
  actionId: number;
  tool: string;
  serverLabel: string;
  serverTool: string;
  arguments: string;
  expiresAt: number | null;
}

export async function insertApprovals(trx: Executor, approvals: NewApproval[], now: number): Promise<void> {
  if (approvals.length === 0) return;
  await trx
    .insertInto('tool_approvals')
    .values(
      approvals.map((approval) => ({
        id: approval.id,
        org_id: approval.orgId,
        session_id: approval.sessionId,
        message_id: approval.messageId,
        call_id: approval.callId,
        action_id: approval.actionId,
        tool: approval.tool,
        server_label: approval.serverLabel,
        server_tool: approval.serverTool,
        arguments: approval.arguments,
        status: 'pending' as const,
        reason: null,
        decided_by: null,
        expires_at: approval.expiresAt,
        decided_at: null,
        started_at: null,
        created_at: now,
      })),
    )
    .execute();
}

export async function findApproval(
  db: Executor,
  orgId: string,
  sessionId: string,
  approvalId: string,
): Promise<ToolApprovalRow | undefined> {
  return db
    .selectFrom('tool_approvals')
    .selectAll()
    .where('id', '=', approvalId)
    .where('org_id', '=', orgId)
    .where('session_id', '=', sessionId)
    .executeTakeFirst();
}

/**
 * Marks an approved call started, once. False when it was started before (a restart after it began): the caller
 * must not run it again.
 */
export async function markStarted(trx: Executor, approvalId: string, now: number): Promise<boolean> {
  const result = await trx
    .updateTable('tool_approvals')
    .set({ started_at: now })
    .where('id', '=', approvalId)
    .where('status', '=', 'approved')
    .where('started_at', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Approvals whose deadline has passed, oldest first. */
export async function dueApprovals(db: Executor, now: number, limit: number) {
  return db
    .selectFrom('tool_approvals')
    .select(['id', 'org_id', 'session_id', 'message_id'])
    .where('status', '=', 'pending')
    .where('expires_at', 'is not', null)
    .where('expires_at', '<=', now)
    .orderBy('expires_at')
    .limit(limit)
    .execute();
}

/** What the model reads for a call that was denied. */
export function denialText(decision: Decision, timeoutSeconds?: number): string {
  if (decision.by === 'timeout') {
    return `Error: the call was not approved within ${timeoutSeconds === undefined ? 'the time allowed' : `${timeoutSeconds} seconds`}, so it was denied and did not run.`;
  }
  return `Error: the user denied this call, so it did not run.${decision.reason === null || decision.reason === '' ? '' : ` Reason: ${decision.reason}`}`;
}

/** Reads `{approved: boolean, reason?: string}`; anything else is a 400 naming the field. */
export function parseDecisionAnswer(answer: unknown): { approved: boolean; reason: string | null } {
  if (typeof answer !== 'object' || answer === null || Array.isArray(answer)) {
    throw validationError(
      'answer',
      'answer must be an object {approved: boolean, reason?: string} for a tool approval',
    );
  }
  for (const key of Object.keys(answer)) {
    if (key !== 'approved' && key !== 'reason') {
      throw validationError(`answer.${key}`, `answer.${key} is not a recognised field (approved, reason)`);
    }
  }
  const approved: unknown = Reflect.get(answer, 'approved');
  if (typeof approved !== 'boolean') throw validationError('answer.approved', 'answer.approved must be a boolean');
  return { approved, reason: checkReason(Reflect.get(answer, 'reason'), 'answer.reason') };
}

export function checkReason(value: unknown, param: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw validationError(param, `${param} must be a string`);
  if (value.length > MAX_REASON_CHARS)
    throw validationError(param, `${param} must be at most ${MAX_REASON_CHARS} characters`);
  if (!value.isWellFormed()) throw validationError(param, `${param} must be valid Unicode text`);
  if (value.includes('\u0000')) throw validationError(param, `${param} must not contain NUL characters`);
  return value;
}

export interface DecisionTarget {
  orgId: string;
  sessionId: string;
  now: number;
}

/**
 * Takes the one decision on a waiting call: the row changes from `pending` or the decision is refused (409
 * action_not_waiting). The decision item goes to `decisionMessageId` (the call's own message, or on the Responses
 * surface the Response that carried it); a denial also stores the call's output, which the model reads.
 */
export async function decide(
  trx: Executor,
  target: DecisionTarget,
  call: PendingCall,
  decision: Decision,
  decisionMessageId: string,
  timeoutSeconds?: number,
): Promise<{ events: SessionEvent[]; items: Item[] }> {
  const approvalId = call.approval?.id;
  if (approvalId === undefined) {
    throw new AppError('action_not_waiting', `action ${call.actionId} is not a tool approval`, { param: 'actionId' });
  }
  const updated = await trx
    .updateTable('tool_approvals')
    .set({
      status: decision.approved ? 'approved' : 'denied',
      reason: decision.reason,
      decided_by: decision.by,
      decided_at: target.now,
    })
    .where('id', '=', approvalId)
    .where('session_id', '=', target.sessionId)
    .where('status', '=', 'pending')
    .executeTakeFirst();
  if (updated.numUpdatedRows === 0n) {
    throw new AppError('action_not_waiting', `the approval of action ${call.actionId} was already decided`, {
      param: 'actionId',
    });
  }
  await appendAudit(
    trx,
    decision.audit ?? SYSTEM_AUDIT,
    {
      orgId: target.orgId,
      action: decision.approved ? 'tool_approval.approved' : 'tool_approval.denied',
      targetType: 'tool_approval',
      targetId: approvalId,
      before: { status: 'pending' },
      after: {
        status: decision.approved ? 'approved' : 'denied',
        tool: call.name,
        session_id: target.sessionId,
        message_id: call.item.messageId,
        decided_by: decision.by,
        reason: decision.reason,
      },
    },
    { now: () => target.now },
  );
  const items = await appendItems(trx, target, [
    {
      messageId: decisionMessageId,
      step: decisionMessageId === call.item.messageId ? call.item.step : 0,
      callId: call.callId,
      content: {
        type: 'approval_decision',
        approvalId,
        approved: decision.approved,
        reason: decision.reason,
        by: decision.by,
      },
    },
  ]);
  if (!decision.approved) {
    const output = denialText(decision, timeoutSeconds);
    items.push(
      ...(await appendItems(trx, target, [
        {
          messageId: call.item.messageId,
          step: call.item.step,
          callId: call.callId,
          content: { type: 'function_call_output', name: call.name, output, isError: true, source: 'answer' },
        },
      ])),
    );
    await endToolSpan(trx, {
      messageId: call.item.messageId,
      callId: call.callId,
      status: 'failed',
      output,
      now: target.now,
    });
  }
  const events = await writeEvents(trx, target, [
    {
      kind: 'message.event',
      messageId: call.item.messageId,
      data: {
        type: decision.approved ? 'approved' : 'denied',
        sourceType: 'tool_approval',
        actionId: call.actionId,
        callId: call.callId,
        approvalId,
        approved: decision.approved,
        reason: decision.reason,
        decidedBy: decision.by,
      },
    },
  ]);
  return { events, items };
}

/** The waiting call of `message` with this action id, if it is a tool approval. */
export function approvalCall(items: Item[], actionId: number): PendingCall | undefined {
  return pendingCalls(items).find((call) => call.actionId === actionId && call.approval !== undefined);
}

/**
 * Denies approvals whose deadline passed, each in its own transaction with the session locked, and resumes the
 * turns that no longer wait. Safe to run in every process: the decision is conditional, so only one wins.
 * Returns the events to publish and the sessions to wake.
 */
export async function expireApprovals(
  db: Executor,
  listeners: TurnListeners,
  now: number,
  timeoutOf: (trx: Executor, message: MessageRow) => Promise<number | undefined>,
): Promise<{ events: { sessionId: string; events: SessionEvent[] }[]; wake: string[] }> {
  const due = await dueApprovals(db, now, 50);
  const out: { sessionId: string; events: SessionEvent[] }[] = [];
  const wake: string[] = [];
  for (const row of due) {
    const result = await db.transaction().execute(async (trx) => {
      if (!(await lockSession(trx, { sessionId: row.session_id, now }))) return null;
      const current = await trx
        .selectFrom('tool_approvals')
        .select('status')
        .where('id', '=', row.id)
        .executeTakeFirst();
      if (current?.status !== 'pending') return null;
      const message = await trx.selectFrom('messages').selectAll().where('id', '=', row.message_id).executeTakeFirst();
      if (message === undefined) return null;
      const items = await loadMessageItems(trx, message.id);
      const call = pendingCalls(items).find((pending) => pending.approval?.id === row.id);
      const target = { orgId: row.org_id, sessionId: row.session_id, now };
      if (call === undefined || (message.status !== 'requires_action' && message.status !== 'running')) {
        // The turn ended (cancelled, failed) and closed the call: only the row is left to decide.
        await trx
          .updateTable('tool_approvals')
          .set({ status: 'denied', reason: null, decided_by: 'timeout', decided_at: now })
          .where('id', '=', row.id)
          .where('status', '=', 'pending')
          .execute();
        return { events: [] as SessionEvent[], resumed: false };
      }
      const decided = await decide(
        trx,
        target,
        call,
        { approved: false, reason: null, by: 'timeout' },
        message.id,
        await timeoutOf(trx, message),
      );
      const events = decided.events;
      // A running turn finds the denial itself; a waiting one is resumed once nothing else waits.
      if (message.status === 'running') return { events, resumed: false };
      const after = await loadMessageItems(trx, message.id);
      if (requiredActionsOf(pendingCalls(after)).length > 0) return { events, resumed: false };
      events.push(...(await resumeTurn({ trx, message, now, ...listeners })));
      return { events, resumed: true };
    });
    if (result === null) continue;
    out.push({ sessionId: row.session_id, events: result.events });
    if (result.resumed) wake.push(row.session_id);
  }
  return { events: out, wake };
}
