/**
 * The MCP tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) of the 2026-07-28 revision
 * (docs/mcp-server.md#the-tasks-extension). `server/discover` advertises it; a `tools/call` of `message_agent` or
 * `message` whose per-request client capabilities declare it starts the turn and, when the turn has not ended
 * within a short wait, answers with a task (`resultType: "task"`) instead of the tool result. The client then polls
 * `tasks/get` (the final result inline once completed, the turn's questions and client tool calls as
 * `inputRequests` while it waits), answers those with `tasks/update` and cancels with `tasks/cancel`.
 *
 * A task is the turn, with the 2025-11-25 tasks' id (`<session id>.<message id>`, domain/protocol-turns/mcp-tasks.ts):
 * durable, answered by any process, found only with a key of its organization (and, at an agent endpoint, of
 * that agent). `tasks/*` go through the SDK's per-request handler as custom methods, which checks the `Mcp-Name`
 * header against the taskId; a task-making `tools/call` is answered here, once its headers are known to agree
 * with its body, because the SDK's tool result has no task shape. Anything else is left to the SDK.
 */
import {
  type CallToolResult,
  CLIENT_CAPABILITIES_META_KEY,
  classifyInboundRequest,
  fromJsonSchema,
  type InputRequests,
  isJsonContentType,
  type McpServer,
  MissingRequiredClientCapabilityError,
  ProtocolError,
  ProtocolErrorCode,
  SERVER_INFO_META_KEY,
} from '@modelcontextprotocol/server';
import {
  type McpTasks,
  TASK_POLL_MS,
  TaskNotFound,
  type TaskScope,
  taskIdOf,
} from '../../domain/protocol-turns/mcp-tasks.ts';
import type { ProtocolTurns } from '../../domain/protocol-turns/protocol-turns.ts';
import type { Message } from '../../domain/turns/message-types.ts';
import { AppError } from '../../errors/app-error.ts';
import { errorCatalog } from '../../errors/catalog.ts';
import { isJsonObject } from '../../lib/guards.ts';
import { type AgentTools, TASKS_EXTENSION, type ToolScope, taskInputKey } from './agent-tools.ts';

export interface TasksExtensionDeps {
  tools: AgentTools;
  tasks: McpTasks;
  turns: ProtocolTurns;
  /** How long a task-capable `tools/call` waits for its turn to end before answering with a task (ms). */
  taskAfterMs: number;
}

/** The protocol revision this extension is served on (a request of another is left to the SDK). */
const EXTENSION_REVISION = '2026-07-28';

type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

/** A task of the extension (`Task`), with the payload of its status (`DetailedTask`) when `tasks/get` reads it. */
interface ExtensionTask {
  taskId: string;
  status: TaskStatus;
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  /** Null: a turn is kept as long as its Session is. */
  ttlMs: null;
  pollIntervalMs: number;
  result?: CallToolResult;
  inputRequests?: InputRequests;
}

/** A `tools/call` this module answers: the JSON-RPC id, the tool and its arguments. */
interface TaskCall {
  id: string | number;
  name: string;
  args: Record<string, unknown>;
}

const TASK_PARAMS = fromJsonSchema<{ taskId: string }>({
  type: 'object',
  properties: { taskId: { type: 'string', description: 'The task (the taskId of the task the call returned)' } },
  required: ['taskId'],
});

const invalidParams = (message: string) => new ProtocolError(ProtocolErrorCode.InvalidParams, message);

/** Whether the request's per-request client capabilities declare the tasks extension. */
function declaresTasks(params: Record<string, unknown>): boolean {
  const meta = params._meta;
  const capabilities = isJsonObject(meta) ? meta[CLIENT_CAPABILITIES_META_KEY] : undefined;
  const extensions = isJsonObject(capabilities) ? capabilities.extensions : undefined;
  return isJsonObject(extensions) && isJsonObject(extensions[TASKS_EXTENSION]);
}

/**
 * Whether a 2026-07-28 request's standard headers agree with its body as the SDK requires (the revision, the
 * `Mcp-Method` and `Mcp-Name` headers, a JSON body) and it accepts a JSON answer; a request that does not is left to the SDK,
 * which refuses it.
 */
function headersAgree(request: Request, body: unknown, name: string): boolean {
  const header = (key: string) => request.headers.get(key)?.trim();
  const protocolVersionHeader = header('mcp-protocol-version');
  const route = classifyInboundRequest({
    httpMethod: request.method,
    body,
    ...(protocolVersionHeader === undefined ? {} : { protocolVersionHeader }),
  });
  if (route.kind !== 'modern' || route.messageKind !== 'request') return false;
  const revision = route.classification.revision;
  const accept = request.headers.get('accept') ?? '';
  return (
    revision === EXTENSION_REVISION &&
    protocolVersionHeader === revision &&
    header('mcp-method') === 'tools/call' &&
    header('mcp-name') === name &&
    isJsonContentType(request.headers.get('content-type')) &&
    /application\/json|\*\/\*/.test(accept)
  );
}

/** Whether `args` fit the input schema of the tool `name` of the scope (the SDK answers those that do not). */
function fitsTool(scope: ToolScope, name: string, args: unknown): args is Record<string, unknown> {
  const allowed = scope.agent === null ? ['agent', 'message', 'session_id'] : ['message', 'session_id'];
  if (name !== (scope.agent === null ? 'message_agent' : 'message') || !isJsonObject(args)) return false;
  if (Object.keys(args).some((key) => !allowed.includes(key))) return false;
  const { agent, message, session_id: sessionId } = args;
  if (typeof message !== 'string' || message.length === 0 || message.length > 1_000_000) return false;
  if (sessionId !== undefined && (typeof sessionId !== 'string' || sessionId.length > 100)) return false;
  return scope.agent !== null || (typeof agent === 'string' && agent.length > 0 && agent.length <= 200);
}

/** The `tools/call` this module answers with a task when its turn runs long, or null (the SDK serves it). */
function taskCallOf(request: Request, body: unknown, scope: ToolScope): TaskCall | null {
  if (request.method !== 'POST' || !isJsonObject(body) || body.method !== 'tools/call') return null;
  const { id, params } = body;
  if ((typeof id !== 'string' && typeof id !== 'number') || !isJsonObject(params) || !declaresTasks(params)) {
    return null;
  }
  // A retried call answering an input_required result of the direct path is that path's.
  if (params.inputResponses !== undefined || params.requestState !== undefined) return null;
  const name = params.name;
  if (typeof name !== 'string' || !fitsTool(scope, name, params.arguments ?? {})) return null;
  if (!headersAgree(request, body, name)) return null;
  return { id, name, args: isJsonObject(params.arguments) ? params.arguments : {} };
}

const STATUS: Record<Message['status'], TaskStatus> = {
  queued: 'working',
  running: 'working',
  requires_action: 'input_required',
  completed: 'completed',
  // A failed turn is a tool result with isError (SEP-2663 keeps `failed` for JSON-RPC errors).
  failed: 'completed',
  cancelled: 'cancelled',
};

export function createTasksExtension(deps: TasksExtensionDeps) {
  const { tools, tasks, turns } = deps;

  /** The task of a turn; `canElicit` (the polling client declared elicitation) decides how a waiting turn shows. */
  function taskOf(sessionId: string, message: Message, canElicit: boolean): ExtensionTask {
    const base: ExtensionTask = {
      taskId: taskIdOf(sessionId, message.id),
      status: STATUS[message.status],
      createdAt: message.createdAt,
      lastUpdatedAt: message.completedAt ?? message.startedAt ?? message.createdAt,
      ttlMs: null,
      pollIntervalMs: TASK_POLL_MS,
    };
    if (message.status === 'completed' || message.status === 'failed') {
      const result = tools.resultOf(sessionId, message);
      return message.error === null ? { ...base, result } : { ...base, result, statusMessage: message.error.message };
    }
    if (message.status === 'cancelled') return { ...base, statusMessage: 'The turn was cancelled.' };
    if (message.status !== 'requires_action') return base;
    const inputRequests = canElicit ? tools.taskInputRequests(message) : null;
    if (inputRequests !== null) return { ...base, inputRequests };
    // Waiting for what this client cannot give here (a tool approval, or elicitation it did not declare): the
    // task works on until that is decided through the HTTP API.
    return { ...base, status: 'working', statusMessage: tools.pendingText(sessionId, message) };
  }

  /** The turn of `taskId`, or the invalid-params error the SEP asks for an unknown task. */
  async function found(scope: ToolScope, taskId: string) {
    const taskScope: TaskScope = { orgId: scope.orgId, agentId: scope.agent?.id ?? null };
    try {
      return await tasks.turn(taskScope, taskId);
    } catch (error) {
      if (error instanceof TaskNotFound) throw invalidParams(error.message);
      throw error;
    }
  }

  /** Starts the call's turn and waits a little for it: its tool result if it ended, else its task. */
  async function run(request: Request, scope: ToolScope, call: TaskCall, canElicit: boolean) {
    const started = await tools.startTask(scope, call.name, call.args);
    if ('content' in started) return { ...started, resultType: 'complete' };
    const target = { sessionId: started.sessionId, messageId: started.message.id };
    const signal = AbortSignal.any([request.signal, AbortSignal.timeout(deps.taskAfterMs)]);
    const message = await turns.follow(scope.orgId, target, { signal });
    if (request.signal.aborted && message.status !== 'completed') await turns.cancel(scope.orgId, message.id);
    if (message.status === 'completed' || message.status === 'failed' || message.status === 'cancelled') {
      return { ...tools.resultOf(started.sessionId, message), resultType: 'complete' };
    }
    const { result: _result, inputRequests: _inputRequests, ...task } = taskOf(started.sessionId, message, canElicit);
    return { ...task, resultType: 'task' };
  }

  /** The outputs and answers `inputResponses` give to what the turn waits for; `declined` when one is refused. */
  function inputsOf(message: Message, responses: Record<string, unknown>) {
    const answers: { actionId: number; answer: string }[] = [];
    const outputs: { callId: string; output: string }[] = [];
    let declined = false;
    for (const action of message.requiredActions) {
      const key = taskInputKey(action);
      // Keys of nothing outstanding are ignored (SEP-2663).
      if (key === null || !Object.hasOwn(responses, key)) continue;
      const field = action.type === 'function_call' ? 'output' : 'answer';
      const response = responses[key];
      const verdict = isJsonObject(response) ? response.action : undefined;
      if (verdict === 'decline' || verdict === 'cancel') {
        declined = true;
        continue;
      }
      const value = isJsonObject(response) && isJsonObject(response.content) ? response.content[field] : undefined;
      if (verdict !== 'accept' || typeof value !== 'string') {
        throw invalidParams(
          `inputResponses.${key}: expected {"action": "accept", "content": {"${field}": <string>}}, or the action decline or cancel`,
        );
      }
      if (action.type === 'function_call') outputs.push({ callId: action.callId, output: value });
      else if (action.type === 'ask_user_question') answers.push({ actionId: action.actionId, answer: value });
    }
    return { answers, outputs, declined };
  }

  /** Gives the turn what `inputResponses` answer; a declined request cancels the turn. */
  async function update(scope: ToolScope, taskId: string, responses: Record<string, unknown>) {
    const { sessionId, message } = await found(scope, taskId);
    if (message.status !== 'requires_action') return {};
    const { answers, outputs, declined } = inputsOf(message, responses);
    const { orgId } = scope;
    try {
      if (declined) {
        await turns.cancel(orgId, message.id);
        return {};
      }
      for (const { actionId, answer } of answers) {
        await turns.answer(orgId, { sessionId, messageId: message.id }, actionId, answer);
      }
      if (outputs.length > 0) await turns.clientOutputs(orgId, sessionId, outputs);
    } catch (error) {
      // Answered meanwhile by another request, for instance.
      if (error instanceof AppError && errorCatalog[error.code].status < 500) throw invalidParams(error.message);
      throw error;
    }
    return {};
  }

  return {
    /**
     * Answers a `tools/call` that declares the extension (its turn's result, or a task when the turn runs on);
     * null for any other request, which the SDK serves.
     */
    async call(request: Request, body: unknown, scope: ToolScope): Promise<Response | null> {
      const call = taskCallOf(request, body, scope);
      if (call === null) return null;
      const params = isJsonObject(body) && isJsonObject(body.params) ? body.params : {};
      const meta = isJsonObject(params._meta) ? params._meta[CLIENT_CAPABILITIES_META_KEY] : undefined;
      const canElicit = isJsonObject(meta) && meta.elicitation !== undefined;
      const result = await run(request, scope, call, canElicit);
      // Identified as the SDK identifies the answers it gives on this revision.
      const _meta = { [SERVER_INFO_META_KEY]: tools.serverInfo(scope) };
      return Response.json({ jsonrpc: '2.0', id: call.id, result: { ...result, _meta } });
    },

    /** Adds `tasks/get`, `tasks/update` and `tasks/cancel` to a 2026-07-28 request's server. */
    register(server: McpServer, scope: ToolScope): void {
      const canElicit = () => server.server.getClientCapabilities()?.elicitation !== undefined;
      // The methods are the extension's: a request that does not declare it is refused as the SEP says.
      const requireExtension = () => {
        if (!isJsonObject(server.server.getClientCapabilities()?.extensions?.[TASKS_EXTENSION])) {
          throw new MissingRequiredClientCapabilityError({
            requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } },
          });
        }
      };
      server.server.setRequestHandler('tasks/get', { params: TASK_PARAMS }, async ({ taskId }) => {
        requireExtension();
        const { sessionId, message } = await found(scope, taskId);
        return { ...taskOf(sessionId, message, canElicit()) };
      });
      // The SDK lifts a request's `inputResponses` out of its params into the context, dropping entries that are
      // not objects (named in droppedInputResponseKeys, which is how they are told apart from absent ones).
      server.server.setRequestHandler('tasks/update', { params: TASK_PARAMS }, ({ taskId }, ctx) => {
        requireExtension();
        const { inputResponses, droppedInputResponseKeys: dropped = [] } = ctx.mcpReq;
        if (inputResponses === undefined) {
          throw invalidParams(
            'inputResponses: required, the responses to the inputRequests of tasks/get by their keys',
          );
        }
        const responses: Record<string, unknown> = { ...inputResponses };
        for (const key of dropped) responses[key] = null;
        return update(scope, taskId, responses);
      });
      server.server.setRequestHandler('tasks/cancel', { params: TASK_PARAMS }, async ({ taskId }) => {
        requireExtension();
        const { message } = await found(scope, taskId);
        // Cooperative and acknowledged either way: a turn that already ended stays as it ended.
        await turns.cancel(scope.orgId, message.id);
        return {};
      });
    },
  };
}

export type TasksExtension = ReturnType<typeof createTasksExtension>;
