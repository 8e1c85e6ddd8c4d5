/**
 * Agentry's agents as A2A servers (docs/a2a.md), over the turn engine: a task is a message accepted with source
 * `a2a` into a session of the agent (the A2A context), so it runs, recovers and is billed like any other turn, and
 * every read answers from the database. A message naming an input-required task answers what the turn waits for
 * (a question, a tool approval, a client tool's output) and the turn resumes. This service speaks in our own
 * terms and the SDK's data types; the protocol's request handler (a2a-handler.ts) frames calls to it.
 */
import type { Part } from '@a2a-js/sdk';
import type { StreamHub } from '../../bus/live-hub.ts';
import { AppError, notFound, validationError } from '../../errors/app-error.ts';
import { isJsonObject } from '../../lib/guards.ts';
import type { Executor } from '../../storage/db.ts';
import type { Agent } from '../agents/agent-types.ts';
import type { SessionService } from '../sessions/session-service.ts';
import type { MessageService } from '../turns/message-service.ts';
import type { MessageStatus, Message as TurnMessage } from '../turns/message-types.ts';
import { endsStream } from './task-end.ts';

export interface A2aServiceDeps {
  db: Executor;
  live: StreamHub;
  messages: MessageService;
  sessions: SessionService;
  agentOf(orgId: string, agentId: string, db?: Executor): Promise<Agent>;
  /** How often a waiting call reads the turn again when no live event woke it (a turn on another process). */
  pollMs: number;
}

/** Where a call acts: an organization's agent. */
export interface A2aTarget {
  orgId: string;
  agentId: string;
}

export interface A2aSendInput {
  messageId: string;
  /** The A2A context: a session of the agent; absent, a new session. */
  contextId?: string;
  /** A task waiting for input that this message answers. */
  taskId?: string;
  parts: Part[];
}

export interface A2aListQuery {
  contextId?: string;
  statuses?: MessageStatus[];
  /** Epoch ms: only tasks updated at or after. */
  updatedAfter?: number;
  limit: number;
  offset: number;
}

/** The parts' text (joined) and data objects; files are refused with the part named. */
function readParts(parts: Part[]): { text: string; data: Record<string, unknown>[] } {
  if (parts.length === 0) throw validationError('message.parts', 'message.parts: at least one part is required');
  const texts: string[] = [];
  const data: Record<string, unknown>[] = [];
  for (const [index, part] of parts.entries()) {
    const content = part.content;
    if (content?.$case === 'text') texts.push(content.value);
    else if (content?.$case === 'data' && isJsonObject(content.value)) data.push(content.value);
    else {
      throw validationError(
        `message.parts[${index}]`,
        `message.parts[${index}]: only text parts and data parts holding an object are accepted`,
      );
    }
  }
  return { text: texts.join('\n'), data };
}

const MAX_MESSAGE_ID = 200;

/** A report a turn wrote. */
export interface TurnReport {
  name: string;
  path: string;
  format: 'markdown' | 'html';
  bytes: number;
}

/** What build_report answers when it saved a report (tools/builtin/report-builder.ts). */
const SAVED_REPORT = /^saved (reports\/([^/\s]+\.(md|html))) \((\d+) bytes\)/;

function reportOf(content: string): TurnReport | null {
  let item: unknown;
  try {
    item = JSON.parse(content);
  } catch {
    return null;
  }
  if (!isJsonObject(item) || item.isError === true || typeof item.output !== 'string') return null;
  if (typeof item.name !== 'string' || !item.name.endsWith('build_report')) return null;
  const match = SAVED_REPORT.exec(item.output);
  if (match === null) return null;
  return {
    path: match[1] ?? '',
    name: match[2] ?? '',
    format: match[3] === 'html' ? 'html' : 'markdown',
    bytes: Number(match[4]),
  };
}

export function createA2aService(deps: A2aServiceDeps) {
  const { db } = deps;

  /** The task (message) of this agent started over A2A; 404 otherwise, other organizations included. */
  async function findTask(target: A2aTarget, taskId: string): Promise<{ id: string; sessionId: string }> {
    const row = await db
      .selectFrom('messages as m')
      .innerJoin('sessions as s', 's.id', 'm.session_id')
      .select(['m.id', 'm.session_id'])
      .where('m.org_id', '=', target.orgId)
      .where('m.id', '=', taskId.toLowerCase())
      .where('m.source', '=', 'a2a')
      .where('m.deleted_at', 'is', null)
      .where('s.agent_id', '=', target.agentId)
      .executeTakeFirst();
    if (row === undefined) throw notFound('task', taskId);
    return { id: row.id, sessionId: row.session_id };
  }

  async function read(target: A2aTarget, taskId: string): Promise<TurnMessage> {
    const task = await findTask(target, taskId);
    return deps.messages.get(target.orgId, task.sessionId, task.id);
  }

  /** Answers what a waiting turn asks for: data parts name their action; text answers the first question. */
  async function answer(target: A2aTarget, turn: TurnMessage, text: string, data: Record<string, unknown>[]) {
    const { orgId } = target;
    const outputs: { callId: string; output: string }[] = [];
    let answered = 0;
    for (const [index, item] of data.entries()) {
      if (typeof item.callId === 'string') {
        const output = typeof item.output === 'string' ? item.output : JSON.stringify(item.output ?? null);
        outputs.push({ callId: item.callId, output });
      } else if (typeof item.actionId === 'number') {
        const value = 'approved' in item ? { approved: item.approved, reason: item.reason } : item.answer;
        await deps.messages.answer(orgId, { sessionId: turn.sessionId, messageId: turn.id }, item.actionId, value);
        answered += 1;
      } else {
        throw validationError(
          `message.parts[${index}]`,
          `message.parts[${index}]: a data part answers an action ({actionId, answer} or {actionId, approved}) or a client tool call ({callId, output})`,
        );
      }
    }
    if (outputs.length > 0) await deps.messages.recordClientOutputs(orgId, turn.sessionId, outputs, 'continue');
    if (answered === 0 && outputs.length === 0) {
      const first = turn.requiredActions.find(
        (action) => action.type === 'ask_user_question' || action.type === 'tool_approval',
      );
      if (first === undefined || text.trim() === '') {
        throw validationError(
          'message.parts',
          'message.parts: this task waits for client tool output; send a data part {callId, output} per call',
        );
      }
      const value =
        first.type === 'tool_approval' ? { approved: /^\s*(y|yes|approve|approved|ok)\s*$/i.test(text) } : text;
      await deps.messages.answer(orgId, { sessionId: turn.sessionId, messageId: turn.id }, first.actionId, value);
    }
  }

  return {
    read,

    /**
     * The reports the task's turn wrote with build_report (its successful calls, by the path their output names),
     * in the order written; a report written twice is listed once.
     */
    async reportsOf(orgId: string, taskId: string): Promise<TurnReport[]> {
      const rows = await db
        .selectFrom('items')
        .select('content')
        .where('org_id', '=', orgId)
        .where('message_id', '=', taskId)
        .where('type', '=', 'function_call_output')
        .orderBy('seq')
        .execute();
      const reports = new Map<string, TurnReport>();
      for (const row of rows) {
        const report = reportOf(row.content);
        if (report !== null) reports.set(report.name, report);
      }
      return [...reports.values()];
    },

    /**
     * Accepts a message: a new task in the given context (or a new one), or, naming an input-required task, the
     * answer to what it waits for. Returns the task as it stands after the write.
     */
    async send(target: A2aTarget, input: A2aSendInput): Promise<TurnMessage> {
      if (input.messageId === '' || input.messageId.length > MAX_MESSAGE_ID) {
        throw validationError('message.messageId', `message.messageId: 1 to ${MAX_MESSAGE_ID} characters`);
      }
      const { text, data } = readParts(input.parts);
      if (input.taskId !== undefined) {
        const turn = await read(target, input.taskId);
        if (input.contextId !== undefined && input.contextId.toLowerCase() !== turn.sessionId) {
          throw validationError(
            'message.contextId',
            `message.contextId: task ${turn.id} is of context ${turn.sessionId}`,
          );
        }
        if (turn.status !== 'requires_action') {
          throw new AppError(
            'action_not_waiting',
            `task ${turn.id} is ${turn.status} and waits for no input; send a message without taskId to start a new task`,
            { param: 'message.taskId' },
          );
        }
        await answer(target, turn, text, data);
        return read(target, turn.id);
      }
      if (text.trim() === '') throw validationError('message.parts', 'message.parts: a new task needs a text part');
      let sessionId: string;
      if (input.contextId === undefined) {
        const title = text.trim().split('\n', 1)[0]?.slice(0, 100) ?? '';
        sessionId = (await deps.sessions.create(target.orgId, { agentId: target.agentId, title })).id;
      } else {
        const session = await deps.sessions.get(target.orgId, input.contextId).catch(() => null);
        if (session === null || session.agentId !== target.agentId) throw notFound('context', input.contextId);
        sessionId = session.id;
      }
      const accepted = await deps.messages.submit(
        {
          orgId: target.orgId,
          sessionId,
          parts: [{ type: 'text', text }],
          idempotencyKey: `a2a:${input.messageId}`,
          source: 'a2a',
        },
        (trx, agentId) => deps.agentOf(target.orgId, agentId, trx),
      );
      return accepted.body;
    },

    async list(target: A2aTarget, query: A2aListQuery): Promise<{ tasks: TurnMessage[]; total: number }> {
      let base = db
        .selectFrom('messages as m')
        .innerJoin('sessions as s', 's.id', 'm.session_id')
        .where('m.org_id', '=', target.orgId)
        .where('m.source', '=', 'a2a')
        .where('m.deleted_at', 'is', null)
        .where('s.agent_id', '=', target.agentId);
      if (query.contextId !== undefined) base = base.where('m.session_id', '=', query.contextId.toLowerCase());
      if (query.statuses !== undefined) {
        if (query.statuses.length === 0) return { tasks: [], total: 0 };
        base = base.where('m.status', 'in', query.statuses);
      }
      if (query.updatedAfter !== undefined) base = base.where('m.updated_at', '>=', query.updatedAfter);
      const [rows, count] = await Promise.all([
        base
          .select(['m.id', 'm.session_id'])
          .orderBy('m.created_at', 'desc')
          .orderBy('m.id', 'desc')
          .limit(query.limit)
          .offset(query.offset)
          .execute(),
        base.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow(),
      ]);
      const tasks = await Promise.all(rows.map((row) => deps.messages.get(target.orgId, row.session_id, row.id)));
      return { tasks, total: Number(count.total) };
    },

    /** Cancels a task that has not ended: at once when queued or waiting, through its worker when running. */
    async cancel(target: A2aTarget, taskId: string): Promise<TurnMessage> {
      const task = await findTask(target, taskId);
      await deps.messages.cancelMessage(target.orgId, task.id);
      return read(target, task.id);
    },

    /**
     * The task each time its status changes, from how it stands now, until it ends or waits for input. Woken by
     * the session's live events, and reading again every `pollMs` besides (a turn may run on another process).
     */
    async *follow(target: A2aTarget, taskId: string, signal: AbortSignal): AsyncGenerator<TurnMessage> {
      const task = await findTask(target, taskId);
      let wake: (() => void) | null = null;
      const unsubscribe = deps.live.subscribe(task.sessionId, () => wake?.());
      const onAbort = () => wake?.();
      signal.addEventListener('abort', onAbort);
      try {
        let last: string | null = null;
        while (!signal.aborted) {
          const turn = await deps.messages.get(target.orgId, task.sessionId, task.id);
          const seen = `${turn.status}:${turn.requiredActions.length}`;
          if (seen !== last) {
            last = seen;
            yield turn;
          }
          if (endsStream(turn.status)) return;
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, deps.pollMs);
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          wake = null;
        }
      } finally {
        signal.removeEventListener('abort', onAbort);
        unsubscribe();
      }
    },
  };
}

export type A2aService = ReturnType<typeof createA2aService>;
