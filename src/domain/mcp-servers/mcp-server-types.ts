/**
 * Organization MCP connectors (`/v1/mcp_servers`): what the API returns and what discovery reports. A connector is
 * an MCP server the organization's agents may use: a URL, optional static headers (stored encrypted, shown by
 * name only), the protocol that worked, and the cached tool list.
 */

export {
  type Discover,
  type Discovery,
  DiscoveryError,
  type ListedMcpTool,
} from '../../tools/mcp/discovery-types.ts';

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
  auth: 'none' | 'oauth';
  oauth: { client_id: string | null; registration: 'pre_registered' | 'dynamic' | null; scope: string | null } | null;
  last_error: { code: string; message: string } | null;
  created_at: number;
  updated_at: number;
}

/** OAuth settings of a connector: a pre-registered client (optional) and the scope to ask for. */
export interface McpOAuthInput {
  client_id?: string;
  client_secret?: string;
  scope?: string;
}

export interface McpServerCreateInput {
  name: string;
  url: string;
  headers?: Record<string, string>;
  oauth?: McpOAuthInput;
}

export interface McpServerUpdateInput {
  name?: string;
  url?: string;
  /** Replaces every header; null removes them all. */
  headers?: Record<string, string> | null;
  /** Replaces the OAuth settings; null: the server no longer signs in. */
  oauth?: McpOAuthInput | null;
}
