/**
 * How much of an MCP server's tool list an agent is offered: at most MAX_MCP_TOOLS tools (what model providers
 * accept in one request) and MAX_MCP_TOOL_LIST_CHARS of definitions (JSON), the first ones in the server's order.
 * Every definition is sent with every model call of every turn, so a server listing thousands of tools would
 * otherwise cost every turn its context window, and the stored list a database row of megabytes. What was left
 * out is said once, in a note the connector keeps and the accepted messages repeat (`tools_truncated`).
 */
import type { McpToolInfo } from './client.ts';

export const MAX_MCP_TOOLS = 128;
export const MAX_MCP_TOOL_LIST_CHARS = 512 * 1024;

export interface BoundedToolList<T> {
  tools: T[];
  /** Why some tools were left out, naming how many; null when the list is whole. */
  note: string | null;
}

/** The first tools of `tools` that fit the bounds, and a note when some did not. */
export function boundToolList<T extends McpToolInfo>(tools: T[]): BoundedToolList<T> {
  let chars = 0;
  let kept = 0;
  for (const tool of tools) {
    const size = JSON.stringify(tool).length;
    if (kept === MAX_MCP_TOOLS || chars + size > MAX_MCP_TOOL_LIST_CHARS) break;
    chars += size;
    kept++;
  }
  if (kept === tools.length) return { tools, note: null };
  const total = tools.reduce((sum, tool) => sum + JSON.stringify(tool).length, 0);
  return {
    tools: tools.slice(0, kept),
    note:
      `lists ${tools.length} tools (${total} characters of definitions); an agent is offered at most ` +
      `${MAX_MCP_TOOLS} tools and ${MAX_MCP_TOOL_LIST_CHARS} characters per server, so only the first ${kept} are used`,
  };
}

/** What a tool definition says of task-based execution (2025-11-25 `execution.taskSupport`). */
function taskSupportOf(tool: object): unknown {
  const execution: unknown = Reflect.get(tool, 'execution');
  return typeof execution === 'object' && execution !== null ? Reflect.get(execution, 'taskSupport') : undefined;
}

/**
 * The tools that can be called without the MCP tasks extension, and a note naming those left out. A tool whose
 * definition says `execution.taskSupport: "required"` answers a plain `tools/call` with -32601; the installed
 * client SDK (`@modelcontextprotocol/client` v2) has no runtime for task methods (`tasks/get`, `tasks/result`,
 * `tasks/cancel` are excluded from its typed request surface), so such a tool could never run: it is not offered.
 * Tools with `taskSupport: "optional"` are called the ordinary way.
 */
export function withoutTaskTools<T extends { name: string }>(tools: T[]): BoundedToolList<T> {
  const required = tools.filter((tool) => taskSupportOf(tool) === 'required');
  if (required.length === 0) return { tools, note: null };
  const names = required.slice(0, 8).map((tool) => JSON.stringify(tool.name));
  if (required.length > names.length) names.push(`and ${required.length - names.length} more`);
  return {
    tools: tools.filter((tool) => taskSupportOf(tool) !== 'required'),
    note:
      `lists ${required.length} tool${required.length === 1 ? '' : 's'} (${names.join(', ')}) that must run as MCP ` +
      'tasks (execution.taskSupport "required"); Agentry\'s MCP client cannot run task-based calls, so they are not offered',
  };
}
