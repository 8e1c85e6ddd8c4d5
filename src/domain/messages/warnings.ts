/**
 * Non-fatal warnings for an accepted message: tools configured on the agent that this deployment cannot run
 * (yet). The turn still runs; the model simply does not see those tools.
 */
import type { Agent, McpServer } from '../agents/agent-types.ts';
import type { Warning } from './message-types.ts';

/** Internal tool servers this deployment runs. */
export const RUNNABLE_INTERNAL_TOOLS: ReadonlySet<string> = new Set(['ask_user_question']);

function describe(server: McpServer): string {
  if ('type' in server) return `remote MCP server "${server.name}" (${server.url})`;
  if (server.kind === 'internal') return `internal tool "${server.name}"`;
  if (server.kind === 'custom') return `custom MCP server ${server.serverId}`;
  return `${server.kind} toolkit "${server.toolkit}"`;
}

export function unavailableToolWarnings(agent: Pick<Agent, 'mcpServers' | 'skills'>): Warning[] {
  const warnings: Warning[] = [];
  for (const server of agent.mcpServers) {
    if (!('type' in server) && server.kind === 'internal' && RUNNABLE_INTERNAL_TOOLS.has(server.name)) continue;
    warnings.push({
      code: 'tool_unavailable',
      message: `${describe(server)} is configured on the agent but this deployment cannot run it; the turn runs without it`,
    });
  }
  if (agent.skills.length > 0) {
    warnings.push({
      code: 'skills_unavailable',
      message: 'skills are configured on the agent but this deployment does not load skills yet',
    });
  }
  return warnings;
}
