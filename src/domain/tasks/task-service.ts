/**
 * Legacy Tasks (spec 4.5, docs/legacy.md) on the turn engine: a Task owns a workspace, a hidden Session of an
 * Agent (the organization's default unless given), and each prompt is a message of that Session accepted with
 * source `tasks`, so it runs, recovers and is traced like any other turn. This service is the one writer of
 * `tasks` and `task_prompts`; a Task's status is derived from its prompts on every read.
 */
import type { Bus } from '../../bus/bus.ts';
import type { StreamHub } from '../../bus/live-hub.ts';
import { AppError, notFound, validationError } from '../../errors/app-error.ts';
import { type Clock, iso } from '../../lib/clock.ts';
import { newId } from '../../lib/ids.ts';
import type { Executor } from '../../storage/db.ts';
import type { MessageRow, TaskRow } from '../../storage/schema.ts';
import type { Agent } from '../agents/agent-types.ts';
import type { SessionEvent } from '../outbox.ts';
import { afterCommit } from '../outbox.ts';
import { acceptMessage, type ToolWarnings } from '../turns/accept.ts';
import type { Attachment } from '../turns/items.ts';
import type { MessageService } from '../turns/message-service.ts';
import { isTerminal } from '../turns/message-types.ts';
import { createHiddenSession } from '../turns/session-rows.ts';
import { storedError, taskEvents } from './task-events.ts';
import type { TaskStreamDone } from './task-stream-schema.ts';
import {
  isPromptFinished,
  promptStatusOf,
  type Task,
  type TaskContent,
  type TaskPage,
  type TaskStreamEvent,
  taskStatusOf,
} from './task-types.ts';

export interface TaskServiceDeps {
  db: Executor;
  clock: Clock;
  bus: Bus;
  live: StreamHub;
  messages: MessageService;
  agentOf(orgId: string, agentId: string, db: Executor): Promise<Agent>;
  toolWarnings: ToolWarnings;
  checkAttachment(trx: Executor, orgId: string, attachment: Attachment, param: string): Promise<'image' | 'file'>;
}

export interface TaskCreateInput {
  prompt: string;
  agentId?: string;
  workspaceId?: string;
  files?: { id: string; filename?: string }[];
}

/** What the event stream yields: normalized events, then one `done` when the Task is no longer running. */
export type TaskStreamItem = { type: 'event'; event: TaskStreamEvent } | { type: 'done'; data: TaskStreamDone };

type PromptMessage = MessageRow & { task_seq: number; task_id: string };

/** How often a stream looks again when no live event woke it (a turn on another process of a cluster). */
const STREAM_POLL_MS = 1000;

function titleOf(prompt: string): string {
  const line = prompt.trim().split('\n', 1)[0] ?? '';
  return line.length > 100 ? `${line.slice(0, 99)}…` : line;
}

function taskView(task: TaskRow, prompts: PromptMessage[]): Task {
  const statuses = prompts.map((prompt) => promptStatusOf(prompt.status));
  const status = taskStatusOf(statuses);
  const last = prompts.at(-1);
  return {
    id: task.id,
    object: 'task',
    workspaceId: task.workspace_id,
    agentId: task.agent_id,
    title: task.title,
    status,
    createdAt: iso(task.created_at),
    updatedAt: iso(Math.max(task.updated_at, ...prompts.map((prompt) => prompt.updated_at))),
    completedAt: status === 'running' || last?.completed_at == null ? null : iso(last.completed_at),
    prompts: prompts.map((prompt, index) => ({
      id: prompt.id,
      status: statuses[index] ?? 'pending',
      submittedAt: iso(prompt.created_at),
      startedAt: prompt.started_at === null ? null : iso(prompt.started_at),
      completedAt: prompt.completed_at === null ? null : iso(prompt.completed_at),
      runId: prompt.run_id,
    })),
  };
}

function promptText(prompt: MessageRow): string {
  try {
    const parts: unknown = JSON.parse(prompt.parts);
    if (Array.isArray(parts)) {
      return parts
        .map((part: unknown) =>
          typeof part === 'object' && part !== null && 'text' in part && typeof part.text === 'string' ? part.text : '',
        )
        .join('\n');
    }
  } catch {
    // Parts are always written as JSON; an unreadable row shows no text rather than failing the read.
  }
  return '';
}

export function createTaskService(deps: TaskServiceDeps) {
  const { db, clock, bus } = deps;

  function publish(sessionId: string, events: SessionEvent[]): void {
    afterCommit(bus, sessionId, events, true);
  }

  async function findTask(orgId: string, id: string, executor: Executor = db): Promise<TaskRow> {
    const row = await executor
      .selectFrom('tasks')
      .selectAll()
      .where('org_id', '=', orgId)
      .where('id', '=', id.toLowerCase())
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    if (row === undefined) throw notFound('task', id);
    return row;
  }

  async function promptsOf(taskIds: string[], executor: Executor = db): Promise<PromptMessage[]> {
    if (taskIds.length === 0) return [];
    return executor
      .selectFrom('task_prompts as tp')
      .innerJoin('messages as m', 'm.id', 'tp.message_id')
      .selectAll('m')
      .select(['tp.seq as task_seq', 'tp.task_id'])
      .where('tp.task_id', 'in', taskIds)
      .orderBy('tp.task_id')
      .orderBy('tp.seq')
      .execute();
  }

  /** Accepts one prompt as a message of the Task's workspace and records it as the Task's next prompt. */
  async function acceptPrompt(
    trx: Executor,
    task: { id: string; orgId: string; workspaceId: string },
    text: string,
    attachments: Attachment[],
    now: number,
  ) {
    const accepted = await acceptMessage(
      trx,
      { orgId: task.orgId, sessionId: task.workspaceId, now },
      {
        parts: [{ type: 'text', text }],
        text,
        source: 'tasks',
        ...(attachments.length === 0 ? {} : { attachments }),
      },
      (executor, agentId) => deps.agentOf(task.orgId, agentId, executor),
      deps.toolWarnings,
    );
    const last = await trx
      .selectFrom('task_prompts')
      .select((eb) => eb.fn.max<number | null>('seq').as('seq'))
      .where('task_id', '=', task.id)
      .executeTakeFirst();
    await trx
      .insertInto('task_prompts')
      .values({
        message_id: accepted.row.id,
        task_id: task.id,
        org_id: task.orgId,
        seq: Number(last?.seq ?? 0) + 1,
        created_at: now,
      })
      .execute();
    return accepted;
  }

  async function get(orgId: string, id: string): Promise<Task> {
    const task = await findTask(orgId, id);
    return taskView(task, await promptsOf([task.id]));
  }

  return {
    get,

    async list(orgId: string, page: { limit: number; offset: number }): Promise<TaskPage> {
      const base = db.selectFrom('tasks').where('org_id', '=', orgId).where('deleted_at', 'is', null);
      const [rows, count] = await Promise.all([
        base
          .selectAll()
          .orderBy('created_at', 'desc')
          .orderBy('id', 'desc')
          .limit(page.limit)
          .offset(page.offset)
          .execute(),
        base.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow(),
      ]);
      const prompts = await promptsOf(rows.map((row) => row.id));
      return {
        data: rows.map((row) =>
          taskView(
            row,
            prompts.filter((prompt) => prompt.task_id === row.id),
          ),
        ),
        total: Number(count.total),
        limit: page.limit,
        offset: page.offset,
      };
    },

    /**
     * Creates a Task and accepts its first prompt in one transaction. Without `workspaceId` a new workspace (hidden
     * Session) of the Agent is made; with it, the workspace of an earlier Task is reused (404 when unknown, 409
     * `workspace_reserved` when it is a Session of the Agents API).
     */
    async create(orgId: string, input: TaskCreateInput): Promise<Task> {
      let workspaceId = '';
      let events: SessionEvent[] = [];
      const taskId = await db.transaction().execute(async (trx) => {
        const now = clock.now();
        let agentId: string;
        if (input.workspaceId !== undefined) {
          const workspace = await trx
            .selectFrom('sessions')
            .select(['id', 'agent_id', 'hidden'])
            .where('org_id', '=', orgId)
            .where('id', '=', input.workspaceId.toLowerCase())
            .executeTakeFirst();
          if (workspace === undefined) throw notFound('workspace', input.workspaceId);
          if (workspace.hidden !== 1 || workspace.agent_id === null) {
            throw new AppError(
              'workspace_reserved',
              `workspace ${input.workspaceId} is reserved for an Agent API Session; omit workspaceId to create a new workspace`,
              { param: 'workspaceId' },
            );
          }
          if (input.agentId !== undefined && input.agentId.toLowerCase() !== workspace.agent_id) {
            throw validationError(
              'agentId',
              `agentId: workspace ${workspace.id} belongs to agent ${workspace.agent_id}; omit agentId or give that one`,
            );
          }
          workspaceId = workspace.id;
          agentId = workspace.agent_id;
        } else {
          if (input.agentId !== undefined) agentId = (await deps.agentOf(orgId, input.agentId.toLowerCase(), trx)).id;
          else {
            const fallback = await trx
              .selectFrom('agents')
              .select('id')
              .where('org_id', '=', orgId)
              .where('is_default', '=', 1)
              .executeTakeFirst();
            if (fallback === undefined) throw notFound('default agent of organization', orgId);
            agentId = fallback.id;
          }
          workspaceId = newId();
          await createHiddenSession(trx, { id: workspaceId, orgId, agentId, title: titleOf(input.prompt), now });
        }
        const attachments: Attachment[] = [];
        for (const [index, file] of (input.files ?? []).entries()) {
          const attachment: Attachment = { kind: 'file', fileId: file.id.toLowerCase() };
          attachment.kind = await deps.checkAttachment(trx, orgId, attachment, `files[${index}].id`);
          attachments.push(attachment);
        }
        const id = newId();
        await trx
          .insertInto('tasks')
          .values({
            id,
            org_id: orgId,
            workspace_id: workspaceId,
            agent_id: agentId,
            title: titleOf(input.prompt),
            created_at: now,
            updated_at: now,
            deleted_at: null,
            notified_state: 'none',
            notify_pending: 1,
          })
          .execute();
        const accepted = await acceptPrompt(trx, { id, orgId, workspaceId }, input.prompt, attachments, now);
        events = accepted.events;
        return id;
      });
      // Read before the wake-up: a quick turn would otherwise often have ended before the answer was read, and the
      // creation answers with the Task as created.
      const task = await get(orgId, taskId);
      publish(workspaceId, events);
      return task;
    },

    /** A follow-up prompt: queued behind any prompt still running in the workspace. */
    async addPrompt(orgId: string, id: string, prompt: string): Promise<{ promptId: string; taskId: string }> {
      let workspaceId = '';
      let events: SessionEvent[] = [];
      const promptId = await db.transaction().execute(async (trx) => {
        const now = clock.now();
        const task = await findTask(orgId, id, trx);
        workspaceId = task.workspace_id;
        const accepted = await acceptPrompt(trx, { id: task.id, orgId, workspaceId }, prompt, [], now);
        // A settled Task runs again: its next task.running and ending are new notifications.
        const settled = ['completed', 'failed', 'canceled'].includes(task.notified_state);
        await trx
          .updateTable('tasks')
          .set({ updated_at: now, notify_pending: 1, ...(settled ? { notified_state: 'created' } : {}) })
          .where('id', '=', task.id)
          .execute();
        events = accepted.events;
        return accepted.row.id;
      });
      publish(workspaceId, events);
      return { promptId, taskId: id.toLowerCase() };
    },

    /** Cancels every unfinished prompt: queued ones at once, a running one through its worker. */
    async cancel(orgId: string, id: string): Promise<Task> {
      const task = await findTask(orgId, id);
      for (const prompt of await promptsOf([task.id])) {
        if (!isTerminal(prompt.status)) await deps.messages.cancelMessage(orgId, prompt.id);
      }
      return get(orgId, task.id);
    },

    /** Soft delete: unfinished prompts are cancelled, the Task leaves every read; its workspace stays. */
    async delete(orgId: string, id: string): Promise<void> {
      const task = await findTask(orgId, id);
      for (const prompt of await promptsOf([task.id])) {
        if (!isTerminal(prompt.status)) await deps.messages.cancelMessage(orgId, prompt.id);
      }
      await db
        .updateTable('tasks')
        .set({ deleted_at: clock.now() })
        .where('id', '=', task.id)
        .where('org_id', '=', orgId)
        .execute();
    },

    /** Top-level prompts and their final responses; with `includeEvents`, each prompt's normalized events. */
    async content(orgId: string, id: string, includeEvents: boolean): Promise<TaskContent> {
      const task = await findTask(orgId, id);
      const prompts = await promptsOf([task.id]);
      const events = includeEvents ? await taskEvents(db, prompts) : [];
      const view = taskView(task, prompts);
      return {
        id: task.id,
        object: 'task.content',
        status: view.status,
        prompts: prompts.map((prompt, index) => {
          const status = view.prompts[index]?.status ?? 'pending';
          return {
            id: prompt.id,
            status,
            prompt: promptText(prompt),
            response: isPromptFinished(status) ? prompt.response_text : null,
            error: storedError(prompt.error),
            submittedAt: iso(prompt.created_at),
            completedAt: prompt.completed_at === null ? null : iso(prompt.completed_at),
            ...(includeEvents ? { events: events.filter((event) => event.promptId === prompt.id) } : {}),
          };
        }),
      };
    },

    /** Checks the Task exists (for a route to answer 404 before it starts streaming). */
    async exists(orgId: string, id: string): Promise<void> {
      await findTask(orgId, id);
    },

    /**
     * The Task's normalized events from the first, as they are persisted, until it is no longer running; then one
     * `done`. Woken by the workspace's live events, and polling besides (a turn may run on another process).
     */
    async *follow(orgId: string, id: string, signal: AbortSignal): AsyncGenerator<TaskStreamItem> {
      const task = await findTask(orgId, id);
      let wake: (() => void) | null = null;
      const unsubscribe = deps.live.subscribe(task.workspace_id, () => wake?.());
      const onAbort = () => wake?.();
      signal.addEventListener('abort', onAbort);
      try {
        let sent = 0;
        while (!signal.aborted) {
          const current = await db
            .selectFrom('tasks')
            .select('deleted_at')
            .where('id', '=', task.id)
            .executeTakeFirst();
          const prompts = await promptsOf([task.id]);
          const events = await taskEvents(db, prompts);
          for (const event of events.slice(sent)) yield { type: 'event', event };
          sent = Math.max(sent, events.length);
          const view = taskView(task, prompts);
          if (view.status !== 'running' || current?.deleted_at != null) {
            const last = prompts.at(-1);
            yield {
              type: 'done',
              data: {
                status: view.prompts.at(-1)?.status ?? 'canceled',
                lastSeq: events.length === 0 ? -1 : events.length,
                finalResult: last?.response_text ?? null,
              },
            };
            return;
          }
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, STREAM_POLL_MS);
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

export type TaskService = ReturnType<typeof createTaskService>;
