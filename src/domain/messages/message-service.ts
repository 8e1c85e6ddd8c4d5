/**
 * Messages: submit work to a Session, read the transcript, answer questions, record client tool outputs and
 * interrupt. Every write is one transaction that locks the session row first (so it orders with the engine's
 * fenced writes) and writes its events through the outbox; wake-ups and live events go out after commit.
 */
import type { Bus } from '../../bus/bus.ts';
import { AppError, notFound, validationError } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import { jsonEqual } from '../../lib/hash.ts';
import { newId } from '../../lib/ids.ts';
import { isPriced } from '../../models/pricing.ts';
import type { Executor } from '../../storage/db.ts';
import type { MessageRow } from '../../storage/schema.ts';
import type { Agent } from '../agents/agent-types.ts';
import type { Idempotency } from '../idempotency.ts';
import type { SessionEvent } from '../outbox.ts';
import { writeEvents } from '../outbox.ts';
import { preview } from '../runs/preview.ts';
import { endToolSpan } from '../runs/spans.ts';
import { appendItems, type Item, itemFromRow, loadMessageItems, pendingCalls } from './items.ts';
import type { AcceptedMessage, Message, Warning } from './message-types.ts';
import { isTerminal } from './message-types.ts';
import { messageFromRow, messagesWithActions, requiredActionsOf } from './message-view.ts';
import { cancelTurn, completeTurn, resumeTurn } from './transitions.ts';
import { unavailableToolWarnings } from './warnings.ts';

export interface MessageServiceDeps {
  db: Executor;
  clock: Clock;
  bus: Bus;
  idempotency: Idempotency;
}

export interface SubmitInput {
  orgId: string;
  sessionId: string;
  parts: { type: 'text'; text: string }[];
  idempotencyKey: string;
  source?: 'sessions' | 'responses' | 'tasks';
}

export type ClientOutputMode = 'continue' | 'persist';

/** Locks the session row for this transaction (Postgres) and proves it belongs to the org. */
async function lockSession(trx: Executor, orgId: string, sessionId: string, now: number) {
  const result = await trx
    .updateTable('sessions')
    .set({ updated_at: now })
    .where('id', '=', sessionId)
    .where('org_id', '=', orgId)
    .executeTakeFirst();
  if (result.numUpdatedRows === 0n) throw notFound('session', sessionId);
}

async function findMessage(db: Executor, orgId: string, sessionId: string, messageId: string): Promise<MessageRow> {
  const row = await db
    .selectFrom('messages')
    .selectAll()
    .where('id', '=', messageId)
    .where('session_id', '=', sessionId)
    .where('org_id', '=', orgId)
    .executeTakeFirst();
  if (row === undefined) throw notFound('message', messageId);
  return row;
}

/** Text the assistant produced in a turn so far. */
export function turnText(items: Item[]): string {
  return items
    .map((item) => (item.content.type === 'assistant_message' ? item.content.text : ''))
    .filter((text) => text !== '')
    .join('\n');
}

export function createMessageService(deps: MessageServiceDeps) {
  const { db, clock, bus } = deps;

  function publish(sessionId: string, events: SessionEvent[], wake: boolean): void {
    for (const event of events) bus.publish('live', { sessionId, event: { ...event } });
    if (wake) bus.publish('wake', { sessionId });
  }

  async function pendingClientCalls(trx: Executor, sessionId: string) {
    const waiting = await trx
      .selectFrom('messages')
      .select('id')
      .where('session_id', '=', sessionId)
      .where('status', '=', 'requires_action')
      .execute();
    const calls = [];
    for (const message of waiting) {
      calls.push(...pendingCalls(await loadMessageItems(trx, message.id)).filter((call) => call.kind === 'client'));
    }
    return calls;
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
      const result = await deps.idempotency.run(
        { orgId, scope: `POST /v1/sessions/${sessionId}/messages`, key: input.idempotencyKey, request: input.parts },
        async (trx) => {
          const now = clock.now();
          const session = await trx
            .updateTable('sessions')
            .set((eb) => ({ work_pending: 1, work_version: eb('work_version', '+', 1), updated_at: now }))
            .where('id', '=', sessionId)
            .where('org_id', '=', orgId)
            .returning(['agent_id'])
            .executeTakeFirst();
          if (session === undefined) throw notFound('session', sessionId);
          if ((await pendingClientCalls(trx, sessionId)).length > 0) {
            throw new AppError(
              'client_tool_output_required',
              'a client tool call of this session is waiting for its output; submit it before sending new input',
            );
          }
          const agent = await agentOf(trx, session.agent_id);
          const org = await trx
            .selectFrom('orgs')
            .select('credit_balance_micros')
            .where('id', '=', orgId)
            .executeTakeFirstOrThrow();
          if (org.credit_balance_micros !== null && org.credit_balance_micros <= 0 && isPriced(agent.model)) {
            throw new AppError('insufficient_credits', `the organization has no credits left for model ${agent.model}`);
          }
          const last = await trx
            .selectFrom('messages')
            .select((eb) => eb.fn.max<number | null>('seq').as('seq'))
            .where('session_id', '=', sessionId)
            .executeTakeFirst();
          const text = input.parts.map((part) => part.text).join('\n');
          const row: MessageRow = {
            id: newId(),
            org_id: orgId,
            session_id: sessionId,
            seq: Number(last?.seq ?? 0) + 1,
            status: 'queued',
            parts: JSON.stringify(input.parts),
            response_text: null,
            error: null,
            input_tokens: 0,
            output_tokens: 0,
            cost_micros: 0,
            step_count: 0,
            cancel_requested: 0,
            agent_id: agent.id,
            agent_version: null,
            run_id: newId(),
            source: input.source ?? 'sessions',
            created_at: now,
            started_at: null,
            completed_at: null,
            updated_at: now,
          };
          await trx.insertInto('messages').values(row).execute();
          await trx
            .insertInto('runs')
            .values({
              id: row.run_id,
              org_id: orgId,
              agent_id: agent.id,
              session_id: sessionId,
              message_id: row.id,
              source: row.source,
              status: 'queued',
              model: agent.model,
              agent_version: null,
              input_preview: preview(text),
              output_preview: null,
              input_tokens: 0,
              output_tokens: 0,
              cost_micros: 0,
              error: null,
              created_at: now,
              started_at: null,
              completed_at: null,
            })
            .execute();
          await appendItems(trx, { orgId, sessionId, now }, [
            { messageId: row.id, step: 0, content: { type: 'user_message', text } },
          ]);
          events = await writeEvents(trx, { orgId, sessionId, now }, [
            { kind: 'message.created', messageId: row.id, runId: row.run_id, data: { status: 'queued' } },
          ]);
          const warnings: Warning[] = unavailableToolWarnings(agent);
          const body: AcceptedMessage = { ...messageFromRow(row, []), warnings };
          return { status: 202, body };
        },
      );
      publish(sessionId, events, true);
      return { body: result.body, replayed: result.replayed };
    },

    async list(orgId: string, sessionId: string, page: { limit: number; offset: number }) {
      const session = await db
        .selectFrom('sessions')
        .select('id')
        .where('id', '=', sessionId)
        .where('org_id', '=', orgId)
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

    /** Answers a question; the turn resumes once none of its actions is left waiting. */
    async answer(orgId: string, sessionId: string, messageId: string, actionId: number, answer: unknown) {
      let events: SessionEvent[] = [];
      const status = await db.transaction().execute(async (trx) => {
        const now = clock.now();
        await lockSession(trx, orgId, sessionId, now);
        const message = await findMessage(trx, orgId, sessionId, messageId);
        const items = await loadMessageItems(trx, messageId);
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
        const stillWaiting = pending.filter((p) => p.callId !== call.callId && p.kind !== 'server');
        if (stillWaiting.length > 0) return 'accepted' as const;
        events.push(...(await resumeTurn({ trx, message, now })));
        return 'resuming' as const;
      });
      publish(sessionId, events, status === 'resuming');
      return { messageId, actionId, status };
    },

    /**
     * Records outputs of client tool calls. Each call_id must name a client call of this session; an identical
     * retry returns the stored item, a different output is a 409. When a turn has no call left waiting it
     * continues (`continue`) or ends as completed with what it produced so far (`persist`).
     */
    async recordClientOutputs(
      orgId: string,
      sessionId: string,
      outputs: { callId: string; output: string }[],
      mode: ClientOutputMode,
    ) {
      const events: SessionEvent[] = [];
      let resumed = false;
      const items = await db.transaction().execute(async (trx) => {
        const now = clock.now();
        await lockSession(trx, orgId, sessionId, now);
        const callIds = outputs.map((output) => output.callId);
        const rows = await trx
          .selectFrom('items')
          .selectAll()
          .where('session_id', '=', sessionId)
          .where('call_id', 'in', callIds)
          .orderBy('seq')
          .execute();
        const byCall = new Map<string, { call?: Item; output?: Item }>();
        for (const row of rows) {
          const entry = byCall.get(row.call_id ?? '') ?? {};
          const item = itemFromRow(row);
          if (item.content.type === 'function_call') entry.call = item;
          else entry.output = item;
          byCall.set(row.call_id ?? '', entry);
        }
        const result: Item[] = [];
        const touched = new Set<string>();
        const seen = new Set<string>();
        for (const [index, output] of outputs.entries()) {
          const entry = byCall.get(output.callId);
          const call = entry?.call;
          if (call === undefined || call.content.type !== 'function_call' || call.content.kind !== 'client') {
            throw validationError(
              `[${index}].call_id`,
              `call_id ${output.callId} does not name a client function call of this conversation`,
            );
          }
          if (seen.has(output.callId))
            throw validationError(`[${index}].call_id`, `call_id ${output.callId} appears twice`);
          seen.add(output.callId);
          const existing = entry?.output;
          if (existing !== undefined) {
            if (existing.content.type === 'function_call_output' && jsonEqual(existing.content.output, output.output)) {
              result.push(existing);
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
          const [created] = await appendItems(trx, { orgId, sessionId, now }, [
            {
              messageId: call.messageId,
              step: call.step,
              callId: output.callId,
              content: {
                type: 'function_call_output',
                name: call.content.name,
                output: output.output,
                isError: false,
                source: 'client',
              },
            },
          ]);
          if (created !== undefined) result.push(created);
          await endToolSpan(trx, { ...output, messageId: call.messageId, status: 'completed', now });
          touched.add(call.messageId);
        }
        for (const messageId of touched) {
          const message = await findMessage(trx, orgId, sessionId, messageId);
          if (message.status !== 'requires_action') continue;
          const messageItems = await loadMessageItems(trx, messageId);
          if (requiredActionsOf(pendingCalls(messageItems)).length > 0) continue;
          const change = { trx, message, now };
          if (mode === 'continue') {
            events.push(...(await resumeTurn(change)));
            resumed = true;
          } else {
            events.push(...(await completeTurn(change, turnText(messageItems))));
          }
        }
        return result;
      });
      publish(sessionId, events, resumed);
      return items;
    },

    /** Interrupts the session's active turn: at once when no worker runs it, else through the worker. */
    async interrupt(orgId: string, sessionId: string): Promise<{ status: 'interrupting' | 'no_turn' }> {
      let events: SessionEvent[] = [];
      const status = await db.transaction().execute(async (trx) => {
        const now = clock.now();
        await lockSession(trx, orgId, sessionId, now);
        const active = await trx
          .selectFrom('messages')
          .selectAll()
          .where('session_id', '=', sessionId)
          .where('status', 'in', ['queued', 'running', 'requires_action'])
          .orderBy('seq')
          .limit(1)
          .executeTakeFirst();
        if (active === undefined || isTerminal(active.status)) return 'no_turn' as const;
        if (active.status === 'running') {
          await trx.updateTable('messages').set({ cancel_requested: 1 }).where('id', '=', active.id).execute();
          return 'interrupting' as const;
        }
        events = await cancelTurn(
          { trx, message: active, now },
          turnText(await loadMessageItems(trx, active.id)) || null,
        );
        // Turns queued behind the cancelled one can run now.
        await trx
          .updateTable('sessions')
          .set((eb) => ({ work_pending: 1, work_version: eb('work_version', '+', 1) }))
          .where('id', '=', sessionId)
          .execute();
        return 'interrupting' as const;
      });
      publish(sessionId, events, true);
      if (status === 'interrupting') bus.publish('interrupt', { sessionId });
      return { status };
    },

    /**
     * Deletes a session, cancelling its unfinished turns first (their turn.cancelled webhooks outlive it). A
     * worker still running its turn loses its lease with the row and stops at its next write.
     */
    async deleteSession(orgId: string, sessionId: string): Promise<void> {
      await db.transaction().execute(async (trx) => {
        const now = clock.now();
        await lockSession(trx, orgId, sessionId, now);
        const open = await trx
          .selectFrom('messages')
          .selectAll()
          .where('session_id', '=', sessionId)
          .where('status', 'in', ['queued', 'running', 'requires_action'])
          .orderBy('seq')
          .execute();
        for (const message of open) await cancelTurn({ trx, message, now }, null);
        await trx.deleteFrom('sessions').where('id', '=', sessionId).where('org_id', '=', orgId).execute();
      });
      bus.publish('interrupt', { sessionId });
    },
  };
}

export type MessageService = ReturnType<typeof createMessageService>;
