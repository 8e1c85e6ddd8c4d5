/**
 * The MCP tools Agentry serves (docs/mcp-server.md): at /v1/mcp, `list_agents` and `message_agent` over every agent
 * of the key's organization; at /v1/agents/{id}/mcp, one `message` tool for that agent. A call runs one turn of the
 * agent (domain/protocol-turns/), in a new Session or in the `session_id` the caller continues, and answers its
 * reply with the ids to read or continue it.
 *
 * While the turn runs, a caller that sent a progressToken gets the turn's tool events (and a beat every few seconds)
 * as progress notifications, which also keep its request alive. A cancelled call cancels the turn. A question the
 * agent asks, or a client tool it calls, becomes an elicitation (an `input_required` result, which the SDK turns into
 * elicitation requests on 2025-era sessions) when the client can elicit; otherwise the result says what is pending
 * and how to answer it.
 */
import {
  type CallToolResult,
  fromJsonSchema,
  type InputRequests,
  type InputRequiredResult,
  inputRequired,
  inputResponse,
  McpServer,
  type ServerContext,
} from '@modelcontextprotocol/server';
import type { Agent } from '../../domain/agents/agent-types.ts';
import type { ProtocolTurns, TurnToolEvent } from '../../domain/protocol-turns/protocol-turns.ts';
import type { Message, RequiredAction } from '../../domain/turns/message-types.ts';
import { AppError } from '../../errors/app-error.ts';
import { errorCatalog } from '../../errors/catalog.ts';
import { isArrayOf, isJsonObject, isString } from '../../lib/guards.ts';

export interface AgentToolDeps {
  turns: ProtocolTurns;
  /** The agents of an organization (for `list_agents` and to resolve `agent`). */
  listAgents(orgId: string): Promise<Agent[]>;
  /** Logs what a caller must not see (an internal error of a call). */
  logError(error: unknown): void;
  /** How often a progress beat is sent while the turn shows nothing (ms). */
  beatMs: number;
  version: string;
}

/** What an endpoint serves: the whole organization, or one of its agents. */
export type ToolScope = { orgId: string; agent: null } | { orgId: string; agent: Agent };

type ToolResult = CallToolResult | InputRequiredResult;

const SESSION_ID = {
  type: 'string',
  maxLength: 100,
  description:
    'Continue this Session (returned as session_id by an earlier call); omit to start a new conversation with the agent.',
};
const MESSAGE = { type: 'string', minLength: 1, maxLength: 1_000_000, description: 'What to tell the agent.' };

const OUTPUT_SCHEMA = {
  type: 'object',
  properties: {
    session_id: { type: 'string', description: 'The Session of the turn: pass it back to continue the conversation' },
    message_id: { type: 'string', description: 'The turn: GET /v1/sessions/{session_id}/messages/{message_id}' },
    run_id: { type: 'string', description: 'The Run that records and traces the turn (source `mcp`)' },
    status: { type: 'string', enum: ['completed', 'failed', 'cancelled', 'requires_action', 'running', 'queued'] },
    text: { type: ['string', 'null'], description: "The agent's reply (null unless completed)" },
    error: { type: ['object', 'null'] },
    pending: { type: 'array', description: 'What the turn waits for (status requires_action)' },
  },
  required: ['session_id', 'message_id', 'run_id', 'status', 'text'],
};

/** The state an `input_required` result hands the client, echoed back with its answers. */
interface ElicitState {
  sessionId: string;
  messageId: string;
  /** The questions asked (their actionIds). */
  actionIds: number[];
  /** The client tool calls whose output is asked for (their callIds). */
  callIds: string[];
}

const MAX_STATE_CHARS = 20_000;

function parseState(raw: unknown): ElicitState | null {
  if (typeof raw !== 'string' || raw.length > MAX_STATE_CHARS) return null;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return null;
  }
  if (!isJsonObject(value)) return null;
  const { sessionId, messageId, actionIds, callIds } = value;
  if (typeof sessionId !== 'string' || typeof messageId !== 'string') return null;
  if (!isArrayOf(actionIds, (id): id is number => Number.isInteger(id))) return null;
  if (!isArrayOf(callIds, isString)) return null;
  return { sessionId, messageId, actionIds, callIds };
}

const questionKey = (actionId: number) => `question_${actionId}`;
const clientToolKey = (index: number) => `client_tool_${index}`;

function replyText(message: Message): string {
  return (message.response?.parts ?? []).map((part) => part.text).join('');
}

function describeEvent(event: TurnToolEvent): string {
  if (event.type === 'tool_call') return `calling ${event.name}`;
  if (event.type === 'tool_result') return `${event.name} ${event.isError ? 'failed' : 'done'}`;
  return event.message === undefined ? `${event.name} running` : `${event.name}: ${event.message}`;
}

function pendingText(sessionId: string, message: Message): string {
  const lines = message.requiredActions.map((action: RequiredAction) => {
    if (action.type === 'ask_user_question') return `- question (actionId ${action.actionId}): ${action.question}`;
    if (action.type === 'tool_approval') {
      return `- approval of ${action.tool} (actionId ${action.actionId}) with arguments ${action.arguments}`;
    }
    if (action.type === 'mcp_elicitation') {
      const what = action.mode === 'url' ? `open ${action.url ?? ''}, then accept or decline` : action.message;
      return `- input for ${action.tool} of ${action.server} (actionId ${action.actionId}): ${what}`;
    }
    return `- output of the client tool ${action.name} (call ${action.callId})`;
  });
  const base = `/v1/sessions/${sessionId}/messages/${message.id}`;
  return [
    'The agent is waiting for:',
    ...lines,
    `Answer a question or decide an approval with POST ${base}/answer {"actionId": <id>, "answer": <answer>}, then read the reply with GET ${base}?wait=60 (see docs/mcp-server.md).`,
  ].join('\n');
}

/** The tool result for a settled (or abandoned) turn. */
function resultOf(sessionId: string, message: Message): CallToolResult {
  const text = message.status === 'completed' ? replyText(message) : null;
  const structured: Record<string, unknown> = {
    session_id: sessionId,
    message_id: message.id,
    run_id: message.runId,
    status: message.status,
    text,
    error: message.error,
  };
  if (message.status === 'completed') {
    return { content: [{ type: 'text', text: text ?? '' }], structuredContent: structured };
  }
  if (message.status === 'requires_action') {
    structured.pending = message.requiredActions;
    return { content: [{ type: 'text', text: pendingText(sessionId, message) }], structuredContent: structured };
  }
  const reason =
    message.status === 'failed'
      ? `The turn failed: ${message.error?.message ?? 'no reason given'}`
      : message.status === 'cancelled'
        ? 'The turn was cancelled.'
        : `The turn is still ${message.status}; read it with GET /v1/sessions/${sessionId}/messages/${message.id}?wait=60.`;
  return { content: [{ type: 'text', text: reason }], structuredContent: structured, isError: true };
}

const errorResult = (text: string): CallToolResult => ({ content: [{ type: 'text', text }], isError: true });

/**
 * The elicitation of one thing the turn waits for: a question (one `answer` field, a choice when it offers options)
 * or a client tool call (its arguments shown, one `output` field); null for anything else (a tool approval, which is
 * decided through the HTTP API, or an MCP server's own elicitation).
 */
function elicitationOf(action: RequiredAction): InputRequests[string] | null {
  if (action.type === 'ask_user_question') {
    const options = (action.options ?? []).filter((option): option is string => typeof option === 'string');
    return inputRequired.elicit({
      message: action.question,
      requestedSchema: {
        type: 'object',
        properties: {
          answer: {
            type: 'string',
            title: 'Answer',
            description: action.question,
            ...(options.length === 0 ? {} : { enum: options }),
          },
        },
        required: ['answer'],
      },
    });
  }
  if (action.type === 'function_call') {
    return inputRequired.elicit({
      message: `The agent calls the tool ${action.name} with the arguments ${action.arguments}: what is its output?`,
      requestedSchema: {
        type: 'object',
        properties: {
          output: {
            type: 'string',
            title: `Output of ${action.name}`,
            description: `What ${action.name}(${action.arguments}) returns`,
          },
        },
        required: ['output'],
      },
    });
  }
  return null;
}

/**
 * The elicitations of everything the turn waits for, as an `input_required` result. Null when it also waits for a
 * tool approval, which is decided through the HTTP API.
 */
function elicitationsOf(sessionId: string, message: Message): ToolResult | null {
  const actions = message.requiredActions;
  if (actions.length === 0 || actions.some((action) => action.type === 'tool_approval')) return null;
  const inputRequests: InputRequests = {};
  const state: ElicitState = { sessionId, messageId: message.id, actionIds: [], callIds: [] };
  for (const action of actions) {
    const asked = elicitationOf(action);
    if (asked === null) continue;
    if (action.type === 'ask_user_question') {
      inputRequests[questionKey(action.actionId)] = asked;
      state.actionIds.push(action.actionId);
    } else if (action.type === 'function_call') {
      inputRequests[clientToolKey(state.callIds.length)] = asked;
      state.callIds.push(action.callId);
    }
  }
  const requestState = JSON.stringify(state);
  if (requestState.length > MAX_STATE_CHARS) return null;
  return inputRequired({ inputRequests, requestState });
}

/** The key of a pending question or client tool call in a task's `inputRequests`; null for other actions. */
export function taskInputKey(action: RequiredAction): string | null {
  if (action.type === 'ask_user_question') return questionKey(action.actionId);
  return action.type === 'function_call' ? `client_tool_${action.callId}` : null;
}

/**
 * The `inputRequests` of a task (the tasks extension) whose turn waits: keyed `question_<actionId>` and
 * `client_tool_<callId>`, keys no other request of the turn ever has. Null unless every pending action can be
 * elicited.
 */
function taskInputRequests(message: Message): InputRequests | null {
  const inputRequests: InputRequests = {};
  for (const action of message.requiredActions) {
    const asked = elicitationOf(action);
    const key = taskInputKey(action);
    if (asked === null || key === null) return null;
    inputRequests[key] = asked;
  }
  return Object.keys(inputRequests).length === 0 ? null : inputRequests;
}

/** The accepted value of one field of an elicitation the client answered, or undefined. */
function acceptedField(ctx: ServerContext, key: string, field: string): string | undefined {
  const view = inputResponse(ctx.mcpReq.inputResponses, key);
  const value = view.kind === 'elicit' && view.action === 'accept' ? view.content?.[field] : undefined;
  return typeof value === 'string' ? value : undefined;
}

/** How the message tools run as tasks (2025-11-25): a client may ask for one, or call and wait. */
const EXECUTION = { taskSupport: 'optional' } as const;

/** What the server supports of tasks (2025-11-25): tools/call as a task, tasks/list and tasks/cancel. */
const TASKS_CAPABILITY = { list: {}, cancel: {}, requests: { tools: { call: {} } } };

/** The tasks extension (SEP-2663) of the 2026-07-28 revision, advertised in `server/discover`. */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

export function createAgentTools(deps: AgentToolDeps) {
  const { turns } = deps;

  /** The agent `name` (an id or a unique name) of the organization, or the tool error saying why there is none. */
  async function findAgent(orgId: string, name: string): Promise<Agent | CallToolResult> {
    const agents = await deps.listAgents(orgId);
    const wanted = name.toLowerCase();
    const byId = agents.find((agent) => agent.id === wanted);
    const named = agents.filter((agent) => agent.name === name);
    const agent = byId ?? (named.length === 1 ? named[0] : undefined);
    if (agent !== undefined) return agent;
    return errorResult(
      named.length > 1
        ? `several agents are named ${JSON.stringify(name)}: use the id (list_agents)`
        : `no agent has the id or name ${JSON.stringify(name.slice(0, 200))} (list_agents lists them)`,
    );
  }

  /** Follows the turn to where it settles, with progress for the caller and cancellation when the call is. */
  async function follow(ctx: ServerContext, server: McpServer, orgId: string, sessionId: string, messageId: string) {
    const signal = ctx.mcpReq.signal;
    const token = ctx.mcpReq._meta?.progressToken;
    let progress = 0;
    const notify = (message: string) => {
      if (token === undefined) return;
      progress += 1;
      ctx.mcpReq
        .notify({ method: 'notifications/progress', params: { progressToken: token, progress, message } })
        .catch(() => {});
    };
    // First, where the turn is: a client that loses the call (a closed connection, a restart) reads it there.
    notify(`session_id ${sessionId} message_id ${messageId}`);
    const beat = token === undefined ? null : setInterval(() => notify('running'), deps.beatMs);
    const target = { sessionId, messageId };
    try {
      const message = await turns.follow(orgId, target, {
        signal,
        onToolEvent: (event: TurnToolEvent) => {
          const text = describeEvent(event);
          notify(text);
          ctx.mcpReq
            .log(event.type === 'tool_result' && event.isError ? 'warning' : 'info', text, 'agentry')
            .catch(() => {});
        },
      });
      if (signal.aborted && message.status !== 'completed') {
        await turns.cancel(orgId, messageId);
        return errorResult('The call was cancelled; so is the turn.');
      }
      if (message.status === 'requires_action' && server.server.getClientCapabilities()?.elicitation !== undefined) {
        const asked = elicitationsOf(sessionId, message);
        if (asked !== null) return asked;
      }
      return resultOf(sessionId, message);
    } finally {
      if (beat !== null) clearInterval(beat);
    }
  }

  /** A retried call carrying the answers to what an earlier `input_required` result asked for. */
  async function resume(ctx: ServerContext, server: McpServer, orgId: string, state: ElicitState) {
    // The state only names a turn of the caller's organization (answer() and clientOutputs() check it); a key that
    // can call these tools can answer any question of its organization through the HTTP API as well.
    const answers = state.actionIds.map((actionId) => acceptedField(ctx, questionKey(actionId), 'answer'));
    const outputs = state.callIds.map((callId, index) => ({
      callId,
      output: acceptedField(ctx, clientToolKey(index), 'output'),
    }));
    if (answers.some((answer) => answer === undefined) || outputs.some((each) => each.output === undefined)) {
      await turns.cancel(orgId, state.messageId);
      return errorResult('What the agent asked for was not given; the turn is cancelled.');
    }
    for (const [index, actionId] of state.actionIds.entries())
      await turns.answer(orgId, state, actionId, answers[index]);
    if (outputs.length > 0) {
      await turns.clientOutputs(
        orgId,
        state.sessionId,
        outputs.map(({ callId, output }) => ({ callId, output: output ?? '' })),
      );
    }
    return follow(ctx, server, orgId, state.sessionId, state.messageId);
  }

  /** Runs one turn of `agent` for a call (or resumes the one whose questions the call answers). */
  async function message(
    ctx: ServerContext,
    server: McpServer,
    scope: { orgId: string; agent: Agent },
    args: { message: string; session_id?: string | undefined },
  ): Promise<ToolResult> {
    const { orgId } = scope;
    try {
      const state = ctx.mcpReq.inputResponses === undefined ? null : parseState(ctx.mcpReq.requestState());
      if (state !== null) return await resume(ctx, server, orgId, state);
      const started = await turns.start({
        orgId,
        agentId: scope.agent.id,
        sessionId: args.session_id === undefined ? null : args.session_id.toLowerCase(),
        text: args.message,
        source: 'mcp',
      });
      return await follow(ctx, server, orgId, started.sessionId, started.message.id);
    } catch (error) {
      if (error instanceof AppError && errorCatalog[error.code].status < 500) return errorResult(error.message);
      deps.logError(error);
      return errorResult('The call failed on the server; it can be retried.');
    }
  }

  function agentTool(server: McpServer, scope: { orgId: string; agent: Agent }) {
    const { agent } = scope;
    const tool = server.registerTool(
      'message',
      {
        title: agent.name,
        description: `Send a message to the agent "${agent.name}"${agent.description === null ? '' : ` (${agent.description})`} and get its reply. Each call without session_id starts a new conversation.`,
        inputSchema: fromJsonSchema<{ message: string; session_id?: string }>({
          type: 'object',
          properties: { message: MESSAGE, session_id: SESSION_ID },
          required: ['message'],
          additionalProperties: false,
        }),
        outputSchema: fromJsonSchema<Record<string, unknown>>(OUTPUT_SCHEMA),
      },
      (args, ctx) => message(ctx, server, scope, args),
    );
    tool.execution = EXECUTION;
  }

  function orgTools(server: McpServer, orgId: string) {
    server.registerTool(
      'list_agents',
      {
        title: 'List agents',
        description: 'The agents you can message with message_agent: id, name, description and model.',
        inputSchema: fromJsonSchema<Record<string, never>>({ type: 'object', additionalProperties: false }),
        annotations: { readOnlyHint: true },
      },
      async () => {
        const agents = (await deps.listAgents(orgId)).map((agent) => ({
          id: agent.id,
          name: agent.name,
          description: agent.description,
          model: agent.model,
        }));
        return {
          content: [{ type: 'text', text: JSON.stringify(agents) }],
          structuredContent: { agents },
        };
      },
    );
    const tool = server.registerTool(
      'message_agent',
      {
        title: 'Message an agent',
        description:
          'Send a message to one of your agents (by id or name, see list_agents) and get its reply. Each call without session_id starts a new conversation.',
        inputSchema: fromJsonSchema<{ agent: string; message: string; session_id?: string }>({
          type: 'object',
          properties: {
            agent: { type: 'string', minLength: 1, maxLength: 200, description: 'The id or the name of the agent' },
            message: MESSAGE,
            session_id: SESSION_ID,
          },
          required: ['agent', 'message'],
          additionalProperties: false,
        }),
        outputSchema: fromJsonSchema<Record<string, unknown>>(OUTPUT_SCHEMA),
      },
      async (args, ctx) => {
        const agent = await findAgent(orgId, args.agent);
        return 'content' in agent ? agent : message(ctx, server, { orgId, agent }, args);
      },
    );
    tool.execution = EXECUTION;
  }

  /** Who answers at `scope`: the server's name and version. */
  const serverInfo = (scope: ToolScope) => ({
    name: scope.agent === null ? 'agentry' : `agentry-agent-${scope.agent.name}`,
    version: deps.version,
  });

  return {
    serverInfo,

    /**
     * Starts the turn a `tools/call` asks to run as a task (the arguments the tool's schema allows), or says why not
     * as the tool error a direct call would give.
     */
    async startTask(scope: ToolScope, name: string, args: unknown) {
      const wanted = scope.agent === null ? 'message_agent' : 'message';
      if (name !== wanted) return errorResult(`no tool ${JSON.stringify(name.slice(0, 200))} runs as a task here`);
      if (!isJsonObject(args) || typeof args.message !== 'string' || args.message.length === 0) {
        return errorResult('message: a non-empty string is required');
      }
      const sessionId = args.session_id;
      if (sessionId !== undefined && typeof sessionId !== 'string') return errorResult('session_id: must be a string');
      let agent: Agent | CallToolResult | null = scope.agent;
      if (agent === null) agent = typeof args.agent === 'string' ? await findAgent(scope.orgId, args.agent) : null;
      if (agent === null) return errorResult('agent: a string is required');
      if ('content' in agent) return agent;
      try {
        return await turns.start({
          orgId: scope.orgId,
          agentId: agent.id,
          sessionId: sessionId === undefined ? null : sessionId.toLowerCase(),
          text: args.message,
          source: 'mcp',
        });
      } catch (error) {
        if (error instanceof AppError && errorCatalog[error.code].status < 500) return errorResult(error.message);
        throw error;
      }
    },

    /** The tool result of a settled turn, as a direct call answers it. */
    resultOf,
    /** What a waiting turn waits for, and how to answer it through the HTTP API. */
    pendingText,
    taskInputRequests,

    /**
     * A fresh server for one request (`modern`: the 2026-07-28 revision, which has the tasks extension) or one
     * 2025-era session (`legacy`, which has the 2025-11-25 tasks) of `scope`.
     */
    server(scope: ToolScope, era: 'modern' | 'legacy'): McpServer {
      const server = new McpServer(serverInfo(scope), {
        // logging: the turn's tool events also go out as log messages, at the level the client set.
        capabilities: {
          tools: {},
          logging: {},
          ...(era === 'modern' ? { extensions: { [TASKS_EXTENSION]: {} } } : { tasks: TASKS_CAPABILITY }),
        },
        instructions:
          scope.agent === null
            ? 'Agentry: list your agents with list_agents, talk to one with message_agent.'
            : `Agentry agent "${scope.agent.name}": talk to it with the message tool.`,
      });
      if (scope.agent === null) orgTools(server, scope.orgId);
      else agentTool(server, { orgId: scope.orgId, agent: scope.agent });
      return server;
    },
  };
}

export type AgentTools = ReturnType<typeof createAgentTools>;
