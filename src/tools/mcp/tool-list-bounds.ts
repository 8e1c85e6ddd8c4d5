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
