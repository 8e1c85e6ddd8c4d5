/**
 * The `tools` of a Response: what the turn could use, in Responses tool shapes. Tools the caller (or a person)
 * answers are `function` tools, as their calls are `function_call` items: the agent's clientTools,
 * `ask_user_question` when the agent asks questions, and the response's own function tools (compatibility mode).
 * Tools the service runs are listed per configured server as `mcp` tools, as their calls are `mcp_call` items.
 * This is the one place that builds the list; it is stored with the message when the turn is accepted, so a
 * Response reads the same in its stream and on every later GET.
 */
import type { ToolSpec } from '../../models/types.ts';
import { serverModeOf } from '../../tools/approval-policy.ts';
import { ASK_USER_QUESTION, QUESTION_TOOL } from '../../tools/question.ts';
import type { AgentConfig, McpServer } from '../agents/agent-types.ts';
import { SERVER_LABEL } from './openai-items.ts';

export type ResponseTool =
  | { type: 'function'; name: string; description: string | null; parameters: Record<string, unknown>; strict: boolean }
  | {
      type: 'mcp';
      server_label: string;
      server_url?: string;
      allowed_tools?: string[];
      require_approval: 'always' | 'never';
    };

type Approval = 'always' | 'never';

/**
 * What a server's entry says about approval: its `<server>__*` override (for built-in entries also `agentry__*`),
 * else the policy's default. Overrides of single tools are not shown here (an `mcp_approval_request` says which
 * calls wait).
 */
function approvalOf(agent: AgentConfig, label: string, builtinEntry?: string): Approval {
  const server = builtinEntry === undefined ? { label } : { label, builtinEntry };
  return serverModeOf(agent.toolApprovals, server) === 'always_ask' ? 'always' : 'never';
}

function serverTool(agent: AgentConfig, server: McpServer): ResponseTool | null {
  if ('type' in server)
    return {
      type: 'mcp',
      server_label: server.name,
      server_url: server.url,
      require_approval: approvalOf(agent, server.name),
    };
  if (server.kind === 'internal') {
    // ask_user_question is answered by a person through function_call outputs: it is a function tool.
    if (server.name === 'ask_user_question') return null;
    return {
      type: 'mcp',
      server_label: SERVER_LABEL,
      allowed_tools: [server.name],
      require_approval: approvalOf(agent, SERVER_LABEL, server.name),
    };
  }
  if (server.kind === 'custom') {
    const label = server.name ?? server.serverId;
    return { type: 'mcp', server_label: label, require_approval: approvalOf(agent, label) };
  }
  return { type: 'mcp', server_label: server.toolkit, require_approval: approvalOf(agent, server.toolkit) };
}

/** The tools of a Response of `agent`, with the request's own function tools (compatibility mode) after its own. */
export function responseTools(agent: AgentConfig, requestTools: ToolSpec[]): ResponseTool[] {
  const asks = agent.mcpServers.some(
    (server) => !('type' in server) && server.kind === 'internal' && server.name === ASK_USER_QUESTION,
  );
  const answered: ToolSpec[] = [...agent.clientTools, ...(asks ? [QUESTION_TOOL] : [])];
  const functions: ResponseTool[] = [...answered, ...requestTools].map((spec) => ({
    type: 'function',
    name: spec.name,
    description: spec.description === '' ? null : spec.description,
    parameters: spec.parameters,
    strict: spec.strict,
  }));
  // Internal tools share one label: merge them into one entry naming each tool.
  const servers: ResponseTool[] = [];
  for (const server of agent.mcpServers) {
    const tool = serverTool(agent, server);
    if (tool === null) continue;
    const same = servers.find(
      (known) =>
        known.type === 'mcp' &&
        tool.type === 'mcp' &&
        known.server_label === tool.server_label &&
        known.allowed_tools !== undefined &&
        tool.allowed_tools !== undefined,
    );
    if (same?.type === 'mcp' && tool.type === 'mcp') {
      same.allowed_tools = [...(same.allowed_tools ?? []), ...(tool.allowed_tools ?? [])];
      if (tool.require_approval === 'always') same.require_approval = 'always';
    } else servers.push(tool);
  }
  return [...functions, ...servers];
}
