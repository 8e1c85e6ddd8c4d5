/**
 * MCP tasks (protocol revision 2025-11-25, docs/mcp-server.md#tasks) of Agentry's MCP server: a `tools/call` that
 * asks for a task starts the turn and returns at once; the client then polls `tasks/get`, reads the tool result with
 * `tasks/result`, cancels with `tasks/cancel` and pages its organization's tasks with `tasks/list`.
 *
 * The tasks extension of the 2026-07-28 revision (http/mcp/tasks-extension.ts) finds its tasks here too (`turn`).
 *
 * A task is a turn (a Sessions API message): its id, `<session id>.<message id>`, is durable, so it survives a
 * restart and any process of a cluster answers for it. Its status is the message's. Nothing is kept in memory.
 */
import { AppError } from '../../errors/app-error.ts';
import type { Message, MessageStatus } from '../turns/message-types.ts';
import type { ProtocolTurns } from './protocol-turns.ts';

/** How often a client should poll `tasks/get` (ms). */
export const TASK_POLL_MS = 1_000;
const LIST_PAGE = 50;

export type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

export interface McpTask {
  taskId: string;
  status: TaskStatus;
  /** Null: a turn is kept as long as its Session is. */
  ttl: null;
  createdAt: string;
  lastUpdatedAt: string;
  pollInterval: number;
  statusMessage?: string;
}

const STATUS: Record<MessageStatus, TaskStatus> = {
  queued: 'working',
  running: 'working',
  requires_action: 'input_required',
  completed: 'completed',
  failed: 'failed',
  cancelled: 'cancelled',
};

const TERMINAL: ReadonlySet<TaskStatus> = new Set(['completed', 'failed', 'cancelled']);

/** A task id that names no task of the caller (unknown, malformed, or another organization's). */
export class TaskNotFound extends Error {
  constructor(taskId: string) {
    super(`Task not found: ${taskId.slice(0, 200)}`);
  }
}

/** A cancel of a task that already ended. */
export class TaskEnded extends Error {
  constructor(task: McpTask) {
    super(`Cannot cancel task: already in terminal status ${task.status}`);
  }
}

export const taskIdOf = (sessionId: string, messageId: string) => `${sessionId}.${messageId}`;

function parseTaskId(taskId: string): { sessionId: string; messageId: string } | null {
  const match = /^([0-9a-z_-]{1,100})\.([0-9a-z_-]{1,100})$/.exec(taskId);
  return match === null ? null : { sessionId: match[1] ?? '', messageId: match[2] ?? '' };
}

const iso = (unixSeconds: number) => new Date(unixSeconds * 1000).toISOString();

/** The task of a turn; its times are when the turn was created and last changed. */
function task(sessionId: string, messageId: string, status: MessageStatus, times: [string, string]): McpTask {
  return {
    taskId: taskIdOf(sessionId, messageId),
    status: STATUS[status],
    ttl: null,
    createdAt: times[0],
    lastUpdatedAt: times[1],
    pollInterval: TASK_POLL_MS,
  };
}

function taskOf(sessionId: string, message: Message): McpTask {
  const updated = message.completedAt ?? message.startedAt ?? message.createdAt;
  const base = task(sessionId, message.id, message.status, [message.createdAt, updated]);
  if (base.status === 'failed' && message.error !== null) return { ...base, statusMessage: message.error.message };
  if (base.status === 'input_required') {
    return { ...base, statusMessage: 'The agent waits for an answer (see the task result)' };
  }
  return base;
}

/** What a task listing reads of a Run (GET /v1/runs). */
interface TaskRun {
  session_id: string;
  message_id: string;
  source: string;
  status: MessageStatus;
  created_at: number;
  started_at: number | null;
  completed_at: number | null;
}

export interface McpTaskDeps {
  turns: ProtocolTurns;
  /** The organization's Runs, newest first (RunService.list). */
  runs: {
    list(
      orgId: string,
      filter: { agentId?: string },
      page: { limit: number; cursor?: string },
    ): Promise<{ data: TaskRun[]; next_cursor: string | null }>;
  };
}

/** The tasks of one caller: the organization, or one agent of it (the agent's MCP endpoint). */
export interface TaskScope {
  orgId: string;
  agentId: string | null;
}

export function createMcpTasks(deps: McpTaskDeps) {
  const { turns } = deps;

  /** The turn of `taskId` if it is one of the scope's MCP turns. */
  async function find(scope: TaskScope, taskId: string): Promise<{ sessionId: string; message: Message }> {
    const ids = parseTaskId(taskId);
    if (ids === null) throw new TaskNotFound(taskId);
    try {
      const message = await turns.read(scope.orgId, ids, scope.agentId);
      return { sessionId: ids.sessionId, message };
    } catch (error) {
      if (error instanceof AppError && error.code === 'not_found') throw new TaskNotFound(taskId);
      throw error;
    }
  }

  return {
    /** The turn of a task of the scope (TaskNotFound otherwise), as it is now. */
    turn: find,

    /** The task of a turn just started. */
    created: (sessionId: string, message: Message): McpTask => taskOf(sessionId, message),

    async get(scope: TaskScope, taskId: string): Promise<McpTask> {
      const { sessionId, message } = await find(scope, taskId);
      return taskOf(sessionId, message);
    },

    /** Waits until the turn settles (or `signal` aborts) and returns it, for the tool result of the task. */
    async settled(scope: TaskScope, taskId: string, signal: AbortSignal) {
      const { sessionId, message } = await find(scope, taskId);
      const settled = await turns.follow(scope.orgId, { sessionId, messageId: message.id }, { signal });
      return { sessionId, message: settled, task: taskOf(sessionId, settled) };
    },

    async cancel(scope: TaskScope, taskId: string): Promise<McpTask> {
      const { sessionId, message } = await find(scope, taskId);
      const task = taskOf(sessionId, message);
      if (TERMINAL.has(task.status)) throw new TaskEnded(task);
      await turns.cancel(scope.orgId, message.id);
      return taskOf(sessionId, await turns.read(scope.orgId, { sessionId, messageId: message.id }, null));
    },

    /** One page of the scope's MCP turns, newest first (a page may hold fewer than its size: other Runs are skipped). */
    async list(scope: TaskScope, cursor: string | undefined): Promise<{ tasks: McpTask[]; nextCursor?: string }> {
      const filter = scope.agentId === null ? {} : { agentId: scope.agentId };
      const page = await deps.runs.list(scope.orgId, filter, {
        limit: LIST_PAGE,
        ...(cursor === undefined ? {} : { cursor }),
      });
      const tasks = page.data
        .filter((run) => run.source === 'mcp')
        .map((run) => {
          const updated = run.completed_at ?? run.started_at ?? run.created_at;
          return task(run.session_id, run.message_id, run.status, [iso(run.created_at), iso(updated)]);
        });
      return page.next_cursor === null ? { tasks } : { tasks, nextCursor: page.next_cursor };
    },
  };
}

export type McpTasks = ReturnType<typeof createMcpTasks>;
