/**
 * The MCP SDK side of /v1/mcp and /v1/agents/{id}/mcp (http/routes/mcp-server.ts): the agents' tools, the
 * 2026-07-28 per-request handler (with the tasks extension, tasks-extension.ts) and the 2025-era sessions (with the
 * 2025-11-25 tasks, answered here). Loaded on the first MCP request, so a server that never
 * serves MCP never loads the SDK (test/startup-imports.test.ts).
 */
import {
  createMcpHandler,
  isLegacyRequest,
  localhostAllowedOrigins,
  originValidationResponse,
} from '@modelcontextprotocol/server';
import type { Deps } from '../../deps.ts';
import { createMcpTasks, TaskEnded, TaskNotFound, type TaskScope } from '../../domain/protocol-turns/mcp-tasks.ts';
import { isJsonObject } from '../../lib/guards.ts';
import { type AgentTools, createAgentTools, type ToolScope } from './agent-tools.ts';
import { createLegacySessions } from './legacy-sessions.ts';
import { createTasksExtension } from './tasks-extension.ts';

/** 2025-era sessions idle this long are closed (their client re-initializes on the 404 that follows). */
const LEGACY_IDLE_MS = 30 * 60_000;
const LEGACY_MAX_SESSIONS = 10_000;
/** A progress beat this often while a turn shows nothing, so clients that reset their timeout on progress wait. */
const BEAT_MS = 10_000;
/** A `tools/call` declaring the tasks extension answers with a task when its turn has not ended by then. */
const TASK_AFTER_MS = 2_000;

export type { ToolScope };

export interface McpEndpoint {
  /** Answers one MCP request of `scope`; `owner` (`<org>:<endpoint>`) binds a 2025-era session. */
  serve(request: Request, body: unknown, scope: ToolScope, owner: string): Promise<Response>;
  close(): Promise<void>;
}

const INVALID_PARAMS = -32602;

/**
 * Answers a 2025-era request of the tasks runtime (a `tools/call` asking for a task, `tasks/*`), which the SDK does
 * not have; null for any other message, which the SDK serves. The task lives in the database (the turn), so this
 * needs no session state.
 */
async function taskAnswer(
  tools: AgentTools,
  tasks: ReturnType<typeof createMcpTasks>,
  body: unknown,
  scope: ToolScope,
  signal: AbortSignal,
): Promise<Response | null> {
  if (!isJsonObject(body) || body.jsonrpc !== '2.0' || body.id === undefined || typeof body.method !== 'string') {
    return null;
  }
  const { id, method } = body;
  const params = isJsonObject(body.params) ? body.params : {};
  const isTaskCall = method === 'tools/call' && isJsonObject(params.task);
  if (!isTaskCall && !method.startsWith('tasks/')) return null;
  const taskScope: TaskScope = { orgId: scope.orgId, agentId: scope.agent?.id ?? null };
  const taskId = typeof params.taskId === 'string' ? params.taskId : '';
  const answer = (result: unknown) => Response.json({ jsonrpc: '2.0', id, result });
  try {
    if (isTaskCall) {
      const started = await tools.startTask(scope, String(params.name), params.arguments);
      if ('content' in started) return answer(started);
      return answer({ task: tasks.created(started.sessionId, started.message) });
    }
    if (method === 'tasks/get') return answer(await tasks.get(taskScope, taskId));
    if (method === 'tasks/cancel') return answer(await tasks.cancel(taskScope, taskId));
    if (method === 'tasks/list') {
      return answer(await tasks.list(taskScope, typeof params.cursor === 'string' ? params.cursor : undefined));
    }
    if (method === 'tasks/result') {
      const { sessionId, message, task } = await tasks.settled(taskScope, taskId, signal);
      const result = tools.resultOf(sessionId, message);
      return answer({ ...result, _meta: { 'io.modelcontextprotocol/related-task': { taskId: task.taskId } } });
    }
    return null;
  } catch (error) {
    if (!(error instanceof TaskNotFound || error instanceof TaskEnded)) throw error;
    return Response.json({ jsonrpc: '2.0', id, error: { code: INVALID_PARAMS, message: error.message } });
  }
}

export function createMcpEndpoint(
  deps: Deps,
  logError: (error: unknown) => void,
  logRefusal: (error: unknown) => void,
): McpEndpoint {
  const allowedOrigins = [...localhostAllowedOrigins(), ...deps.config.mcpAllowedOrigins];
  const tools: AgentTools = createAgentTools({
    turns: deps.protocolTurns,
    listAgents: (orgId) => deps.agents.list(orgId),
    logError,
    beatMs: BEAT_MS,
    version: '1.0.0',
  });
  const tasks = createMcpTasks({ turns: deps.protocolTurns, runs: deps.runs });
  const extension = createTasksExtension({ tools, tasks, turns: deps.protocolTurns, taskAfterMs: TASK_AFTER_MS });
  /** The scope of each request the modern handler serves (its factory sees the Request only). */
  const scopes = new WeakMap<Request, ToolScope>();
  const modern = createMcpHandler(
    ({ requestInfo }) => {
      const scope = requestInfo === undefined ? undefined : scopes.get(requestInfo);
      if (scope === undefined) throw new Error('MCP request without a scope');
      const server = tools.server(scope, 'modern');
      extension.register(server, scope);
      return server;
    },
    {
      legacy: 'reject',
      keepAliveMs: deps.config.sseHeartbeatMs,
      maxRequestBodySize: deps.config.bodyLimitBytes,
      onerror: logRefusal,
    },
  );
  const legacy = createLegacySessions({
    idleMs: LEGACY_IDLE_MS,
    max: LEGACY_MAX_SESSIONS,
    keepAliveMs: deps.config.sseHeartbeatMs,
  });
  return {
    async serve(request, body, scope, owner) {
      const refused = originValidationResponse(request, allowedOrigins);
      if (refused !== undefined) return refused;
      if (await isLegacyRequest(request, body)) {
        const answered = request.method === 'POST' ? await taskAnswer(tools, tasks, body, scope, request.signal) : null;
        if (answered !== null) return answered;
        return legacy.handle(request, body, owner, () => tools.server(scope, 'legacy'));
      }
      const asTask = await extension.call(request, body, scope);
      if (asTask !== null) return asTask;
      scopes.set(request, scope);
      return modern.fetch(request, body === undefined ? {} : { parsedBody: body });
    },
    async close() {
      await Promise.all([modern.close(), legacy.close()]);
    },
  };
}
