/**
 * Messages: submit work to a Session, read the transcript, answer questions, record client tool outputs and
 * interrupt. Every write is one transaction that locks the session row first (so it orders with the engine's
 * fenced writes) and writes its events through the outbox; wake-ups and live events go out after commit.
 */

import type { Bus } from '../../bus/bus.ts';
import { AppError, notFound, validationError } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import type { Executor } from '../../storage/db.ts';
import { prepare } from '../../storage/prepared.ts';
import type { MessageRow } from '../../storage/schema.ts';
import type { Agent } from '../agents/agent-types.ts';
import { approvalCall, decide, parseDecisionAnswer } from '../approvals/approvals.ts';
import type { AuditContext } from '../audit/audit-log.ts';
import { answerElicitation, elicitationItem, parseElicitationAnswer } from '../elicitations/elicitations.ts';
import type { Idempotency, IdempotencyRequest } from '../idempotency.ts';
import type { SessionEvent } from '../outbox.ts';
import { afterCommit, writeEvents } from '../outbox.ts';
import { parseResponseFormat } from '../output-format.ts';
import { clearSpanPreviews, endToolSpan } from '../runs/spans.ts';
import type { WebhookSubscriptions } from '../webhooks/subscriptions.ts';
import { acceptMessage, type ToolWarnings } from './accept.ts';
import { type ClientOutput, type ClientOutputMode, recordOutputs } from './client-outputs.ts';
import { type Attachment, appendItems, loadMessageItems, pendingCalls, turnText } from './items.ts';
import { type ResolveAttachment, resolveParts } from './message-parts.ts';
import type { AcceptedMessage, ExpandedPart, Message, RequestPart } from './message-types.ts';
import { isTerminal, OPEN_STATUSES } from './message-types.ts';
import { messageFromRow, messagesWithActions, requiredActionsOf } from './message-view.ts';
import { deleteSessionRow, lockSession, markWorkPending } from './session-rows.ts';
import { cancelTurn, resumeTurn } from './transitions.ts';
import type { TurnHooks, TurnListeners } from './turn-hooks.ts';

export interface MessageServiceDeps {
  db: Executor;
  clock: Clock;
  bus: Bus;
  idempotency: Idempotency;
  toolWarnings: ToolWarnings;
  subscriptions: WebhookSubscriptions;
  /** What the features add to the state changes of turns (src/deps.ts). */
  turnHooks: TurnHooks;
  /** Expands `mcp_prompt` parts (domain/mcp-servers/mcp-prompt-parts.ts); absent: such parts are refused. */
  promptParts?: PromptParts;
  /** Checks a file attached to a message (domain/files/attachments.ts `resolveAttachment`). */
  resolveAttachment: ResolveAttachment;
}

/**
 * A message's parts with its prompt parts expanded, in the order sent (its files checked later, in the accepting
 * transaction), and the files the prompts' images were stored as.
 */
export interface ExpandedParts {
  parts: ExpandedPart[];
  attachments: Attachment[];
}

/** Asks the servers of the session's agent for the prompts the parts name (network calls; no transaction open). */
export type PromptParts = (
  target: { orgId: string; sessionId: string },
  parts: RequestPart[],
  agentOf: (trx: Executor, agentId: string) => Promise<Agent>,
) => Promise<ExpandedParts>;

export interface SubmitInput {
  orgId: string;
  sessionId: string;
  parts: RequestPart[];
  idempotencyKey: string;
  source?: 'sessions' | 'responses' | 'tasks' | 'mcp' | 'a2a';
  /** The structure of the reply (domain/output-format.ts wire shape); absent: the agent's output format. */
  outputFormat?: Record<string, unknown>;
}

export type { ClientOutputMode } from './client-outputs.ts';

/** Locks the session row for this transaction (session-rows.ts `lockSession`); a 404 unless the org's session. */
export async function lockOwnSession(trx: Executor, orgId: string, sessionId: string, now: number): Promise<void> {
  if (!(await lockSession(trx, { sessionId, now, orgId }))) throw notFound('session', sessionId);
}

const messageOfSession = prepare((db, p: { orgId: string; sessionId: string; messageId: string }) =>
  db
    .selectFrom('messages')
    .selectAll()
    .where('id', '=', p.messageId)
    .where('session_id', '=', p.sessionId)
    .where('org_id', '=', p.orgId),
);

export async function findMessage(
  db: Executor,
  orgId: string,
  sessionId: string,
  messageId: string,
): Promise<MessageRow> {
  const row = await messageOfSession.first(db, { orgId, sessionId, messageId });
  if (row === undefined) throw notFound('message', messageId);
  return row;
}

/** Kept here for the engine's import (the text now lives beside the items it reads). */
export { turnText } from './items.ts';

/** The session's unfinished turns, oldest first. */
const openTurns = (trx: Executor, sessionId: string) =>
  trx
    .selectFrom('messages')
    .selectAll()
    .where('session_id', '=', sessionId)
    .where('status', 'in', OPEN_STATUSES)
    .orderBy('seq');

export function createMessageService(deps: MessageServiceDeps) {
  const { db, clock, bus } = deps;
  const listeners: TurnListeners = { subscriptions: deps.subscriptions, hooks: deps.turnHooks };

  function publish(sessionId: string, events: SessionEvent[], wake: boolean): void {
    afterCommit(bus, sessionId, events, wake);
  }

  /** Locks the session and cancels its unfinished turns, oldest first (before the session is deleted). */
  async function cancelOpenTurns(trx: Executor, orgId: string, sessionId: string): Promise<void> {
    const now = clock.now();
    await lockOwnSession(trx, orgId, sessionId, now);
    const open = await openTurns(trx, sessionId).execute();
    for (const message of open) await cancelTurn({ trx, message, now, ...listeners }, null);
  }

  /**
   * The parts as the message keeps them. Prompt parts ask MCP servers, so a stored answer for the key is looked up
   * first: a retried submission replays it without asking again. (Two concurrent first tries both ask; the
   * transaction then accepts one and replays it to the other.)
   */
  async function expandParts(
    keyed: IdempotencyRequest,
    input: SubmitInput,
    agentOf: (trx: Executor, agentId: string) => Promise<Agent>,
  ): Promise<ExpandedParts | { body: AcceptedMessage; replayed: true }> {
    const { parts } = input;
    if (parts.every((part): part is ExpandedPart => part.type !== 'mcp_prompt')) return { parts, attachments: [] };
    const earlier = await deps.idempotency.lookup<AcceptedMessage>(keyed);
    if (earlier !== null) return { body: earlier.body, replayed: true };
    if (deps.promptParts === undefined) {
      const index = input.parts.findIndex((part) => part.type === 'mcp_prompt');
      throw validationError(`parts[${index}]`, 'mcp_prompt parts are not accepted here');
    }
    return deps.promptParts({ orgId: input.orgId, sessionId: input.sessionId }, input.parts, agentOf);
  }

  return {
    /**
     * Accepts a message: one transaction checks idempotency, pending client outputs and credits, then writes the
     * queued message, its run, the user item and the events. The engine is woken after commit.
     */
    async submit(
      input: SubmitInput,
      agentOf: (trx: Executor, agentId: string) => Promise<Agent>,
    ): Promise<{ body: AcceptedMessage; replayed: boolean }> {
      const { orgId, sessionId } = input;
      let events: SessionEvent[] = [];
      const { outputFormat } = input;
      const responseFormat = outputFormat === undefined ? undefined : parseResponseFormat(outputFormat, 'outputFormat');
      // The parts alone when no format is given: keys used before formats existed keep matching their requests.
      const request = outputFormat === undefined ? input.parts : { parts: input.parts, outputFormat };
      const keyed = { orgId, scope: `POST /v1/sessions/${sessionId}/messages`, key: input.idempotencyKey, request };
      const expanded = await expandParts(keyed, input, agentOf);
      if ('replayed' in expanded) return expanded;
      const result = await deps.idempotency.run(keyed, async (trx) => {
        const { parts, text, attachments } = await resolveParts(trx, orgId, expanded.parts, deps.resolveAttachment);
        const all = [...expanded.attachments, ...attachments];
        const accepted = await acceptMessage(
          trx,
          { orgId, sessionId, now: clock.now() },
          {
            parts,
            text,
            ...(all.length === 0 ? {} : { attachments: all }),
            source: input.source ?? 'sessions',
            // Workspaces of legacy Tasks and tool runs are sessions, but not the Sessions API's to write to.
            visibleOnly: true,
            ...(responseFormat === undefined ? {} : { options: { responseFormat } }),
          },
          agentOf,
          deps.toolWarnings,
        );
        events = accepted.events;
        const body: AcceptedMessage = messageFromRow(accepted.row, []);
        return { status: 202, body };
      });
      publish(sessionId, events, true);
      return { body: result.body, replayed: result.replayed };
    },

    async list(orgId: string, sessionId: string, page: { limit: number; offset: number }) {
      const session = await db
        .selectFrom('sessions')
        .select('id')
        .where('id', '=', sessionId)
        .where('org_id', '=', orgId)
        .where('hidden', '=', 0)
        .executeTakeFirst();
      if (session === undefined) throw notFound('session', sessionId);
      const base = db.selectFrom('messages').where('session_id', '=', sessionId);
      const [rows, count] = await Promise.all([
        base.selectAll().orderBy('seq').limit(page.limit).offset(page.offset).execute(),
        base.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow(),
      ]);
      return {
        data: await messagesWithActions(db, rows),
        total: Number(count.total),
        limit: page.limit,
        offset: page.offset,
      };
    },

    async get(orgId: string, sessionId: string, messageId: string): Promise<Message> {
      const row = await findMessage(db, orgId, sessionId, messageId);
      const [message] = await messagesWithActions(db, [row]);
      if (message === undefined) throw notFound('message', messageId);
      return message;
    },

    /**
     * Answers a question, or decides a tool approval (`{approved, reason?}`); the turn resumes once none of its
     * actions is left waiting.
     */
    async answer(
      orgId: string,
      sessionId: string,
      messageId: string,
      actionId: number,
      answer: unknown,
      audit?: AuditContext,
    ) {
      let events: SessionEvent[] = [];
      const status = await db.transaction().execute(async (trx) => {
        const now = clock.now();
        await lockOwnSession(trx, orgId, sessionId, now);
        const message = await findMessage(trx, orgId, sessionId, messageId);
        const items = await loadMessageItems(trx, messageId);
        const asked = elicitationItem(items, actionId);
        if (asked !== undefined) {
          const parsed = parseElicitationAnswer(asked.content, answer);
          const target = { orgId, sessionId, now, listeners };
          const answered = await answerElicitation(trx, target, message, items, asked, parsed, 'answer');
          events = answered.events;
          return answered.resumed ? ('resuming' as const) : ('accepted' as const);
        }
        const approval = items.find(
          (item) =>
            item.content.type === 'function_call' &&
            item.content.approval !== undefined &&
            item.content.actionId === actionId,
        );
        if (approval !== undefined) {
          const decision = parseDecisionAnswer(answer);
          const call = approvalCall(items, actionId);
          // Decidable as soon as it is asked: also while the other calls of its step still run (the turn then
          // finds the decision without suspending).
          const open = message.status === 'requires_action' || message.status === 'running';
          if (!open || call === undefined || call.approval?.state !== 'pending') {
            throw new AppError('action_not_waiting', `action ${actionId} is no longer waiting for a decision`, {
              param: 'actionId',
            });
          }
          const target = { orgId, sessionId, now };
          const by = { by: 'answer' as const, ...(audit === undefined ? {} : { audit }) };
          const decided = await decide(trx, target, call, { ...decision, ...by }, messageId);
          events = decided.events;
          if (message.status === 'running') return 'accepted' as const;
          const after = await loadMessageItems(trx, messageId);
          if (requiredActionsOf(pendingCalls(after)).length > 0) return 'accepted' as const;
          events.push(...(await resumeTurn({ trx, message, now, ...listeners })));
          return 'resuming' as const;
        }
        const call = items.find(
          (item) =>
            item.content.type === 'function_call' &&
            item.content.kind === 'question' &&
            item.content.actionId === actionId,
        );
        if (call === undefined || call.callId === null || call.content.type !== 'function_call') {
          throw new AppError('action_not_waiting', `message ${messageId} has no action ${actionId}`, {
            param: 'actionId',
          });
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
        const target = { orgId, sessionId, now };
        events = await writeEvents(trx, target, [
          {
            kind: 'message.event',
            messageId,
            runId: message.run_id,
            data: { sourceType: 'tool_ask_user_question', actionId, type: 'answered' },
          },
        ]);
        const stillWaiting = requiredActionsOf(pending.filter((p) => p.callId !== call.callId));
        if (stillWaiting.length > 0) return 'accepted' as const;
        events.push(...(await resumeTurn({ trx, message, now, ...listeners })));
        return 'resuming' as const;
      });
      publish(sessionId, events, status === 'resuming');
      return { messageId, actionId, status };
    },

    /**
     * Records outputs of client tool calls (see recordOutputs). When a turn has no call left waiting it continues
     * (`continue`) or ends as completed with what it produced so far (`persist`).
     */
    async recordClientOutputs(orgId: string, sessionId: string, outputs: ClientOutput[], mode: ClientOutputMode) {
      const result = await db.transaction().execute(async (trx) => {
        const now = clock.now();
        await lockOwnSession(trx, orgId, sessionId, now);
        // Questions surface as function calls on the OpenAI surfaces, so they can be answered the same way.
        return recordOutputs(trx, listeners, { orgId, sessionId, now }, outputs, mode, ['client', 'question']);
      });
      publish(sessionId, result.events, result.resumed);
      return result.items;
    },

    /** Interrupts the session's active turn: at once when no worker runs it, else through the worker. */
    async interrupt(orgId: string, sessionId: string): Promise<{ status: 'interrupting' | 'no_turn' }> {
      let events: SessionEvent[] = [];
      /** The running turn a worker is to stop; a waiting or queued turn is cancelled here and needs no worker. */
      let running: string | undefined;
      const status = await db.transaction().execute(async (trx) => {
        const now = clock.now();
        await lockOwnSession(trx, orgId, sessionId, now);
        const active = await openTurns(trx, sessionId).limit(1).executeTakeFirst();
        if (active === undefined || isTerminal(active.status)) return 'no_turn' as const;
        if (active.status === 'running') {
          await trx.updateTable('messages').set({ cancel_requested: 1 }).where('id', '=', active.id).execute();
          running = active.id;
          return 'interrupting' as const;
        }
        events = await cancelTurn(
          { trx, message: active, now, ...listeners },
          turnText(await loadMessageItems(trx, active.id)) || null,
        );
        // Turns queued behind the cancelled one can run now.
        await markWorkPending(trx, { sessionId });
        return 'interrupting' as const;
      });
      publish(sessionId, events, true);
      if (running !== undefined) bus.publish('interrupt', { sessionId, messageId: running });
      return { status };
    },

    /**
     * Cancels one message's turn (POST /v1/responses/{id}/cancel): a running turn through its worker, a queued or
     * waiting one at once. A finished turn is left as it is. Returns the message's status after the request.
     */
    async cancelMessage(orgId: string, messageId: string): Promise<string> {
      let events: SessionEvent[] = [];
      let sessionId = '';
      const status = await db.transaction().execute(async (trx) => {
        const found = await trx
          .selectFrom('messages')
          .select(['session_id'])
          .where('id', '=', messageId)
          .where('org_id', '=', orgId)
          .where('deleted_at', 'is', null)
          .executeTakeFirst();
        if (found === undefined) throw notFound('response', `resp_${messageId}`);
        sessionId = found.session_id;
        const now = clock.now();
        await lockOwnSession(trx, orgId, sessionId, now);
        const message = await trx
          .selectFrom('messages')
          .selectAll()
          .where('id', '=', messageId)
          .executeTakeFirstOrThrow();
        if (isTerminal(message.status)) return message.status;
        if (message.status === 'running') {
          await trx.updateTable('messages').set({ cancel_requested: 1 }).where('id', '=', messageId).execute();
          return 'cancelling';
        }
        events = await cancelTurn(
          { trx, message, now, ...listeners },
          turnText(await loadMessageItems(trx, messageId)) || null,
        );
        await markWorkPending(trx, { sessionId });
        return 'cancelled';
      });
      publish(sessionId, events, status === 'cancelled');
      if (status === 'cancelling') bus.publish('interrupt', { sessionId, messageId });
      return status;
    },

    /**
     * Removes a Response from the Responses surface (DELETE /v1/responses/{id}): its turn is cancelled first when
     * unfinished; the message and its items stay in the session's log.
     */
    async deleteResponse(orgId: string, messageId: string): Promise<void> {
      await this.cancelMessage(orgId, messageId);
      await db
        .updateTable('messages')
        .set({ deleted_at: clock.now() })
        .where('id', '=', messageId)
        .where('org_id', '=', orgId)
        .execute();
    },

    /**
     * Forgets a Response created with `store: false` once its request is over: its conversation (the session,
     * with its messages, items and events) is deleted, an unfinished turn cancelled first. Its run stays, for usage
     * and billing, without content: the previews of the run and of its spans are cleared.
     */
    async forgetResponse(orgId: string, message: Pick<MessageRow, 'session_id' | 'run_id'>): Promise<void> {
      await db.transaction().execute(async (trx) => {
        await cancelOpenTurns(trx, orgId, message.session_id);
        await trx
          .updateTable('runs')
          .set({ input_preview: '', output_preview: null })
          .where('id', '=', message.run_id)
          .where('org_id', '=', orgId)
          .execute();
        await clearSpanPreviews(trx, message.run_id);
        await deleteSessionRow(trx, orgId, message.session_id);
      });
      bus.publish('interrupt', { sessionId: message.session_id });
    },

    /**
     * Deletes a session, cancelling its unfinished turns first (their turn.cancelled webhooks outlive it). A
     * worker still running its turn loses its lease with the row and stops at its next write.
     */
    async deleteSession(orgId: string, sessionId: string): Promise<void> {
      await db.transaction().execute(async (trx) => {
        await cancelOpenTurns(trx, orgId, sessionId);
        await deleteSessionRow(trx, orgId, sessionId);
      });
      bus.publish('interrupt', { sessionId });
    },
  };
}

export type MessageService = ReturnType<typeof createMessageService>;
