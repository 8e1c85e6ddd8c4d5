/**
 * Organization MCP connectors (`/v1/mcp_servers`): what the API returns and what discovery reports. A connector is
 * an MCP server the organization's agents may use: a URL, optional static headers (stored encrypted, shown by
 * name only), the protocol that worked, and the cached tool list.
 */

/** A tool as an MCP server lists it (tools/list), kept as listed. */
export interface ListedMcpTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  annotations?: Record<string, unknown>;
}

/** The answer of a successful discovery (connect + list tools). */
export interface Discovery {
  protocol: string;
  tools: ListedMcpTool[];
  /** The server's cache hint for its tool list, if it gave one. */
  ttlMs: number | null;
  /** Why some of the server's tools were left out (it "lists … tools …"), or null when none were. */
  note?: string | null | undefined;
}

/** Why discovery failed, in a sentence a user can act on (the caller names the field). */
export class DiscoveryError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** Connects to an MCP server and lists its tools, under the egress guard. */
export type Discover = (
  endpoint: { url: string; headers: Record<string, string> },
  options: { prefer: string | null; signal?: AbortSignal },
) => Promise<Discovery>;

export interface McpServerView {
  id: string;
  object: 'mcp_server';
  name: string;
  url: string;
  /** Names of the static headers sent to the server; their values are never returned. */
  header_names: string[];
  /** The protocol negotiation settled on, or null before the first connection. */
  protocol: string | null;
  tools: { name: string; title: string | null; description: string | null; input_schema: Record<string, unknown> }[];
  /** When the tool list was fetched (Unix seconds), or null. */
  tools_fetched_at: number | null;
  last_error: { code: string; message: string } | null;
  created_at: number;
  updated_at: number;
}

export interface McpServerCreateInput {
  name: string;
  url: string;
  headers?: Record<string, string>;
}

export interface McpServerUpdateInput {
  name?: string;
  url?: string;
  /** Replaces every header; null removes them all. */
  headers?: Record<string, string> | null;
}
