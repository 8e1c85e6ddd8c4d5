/**
 * What discovering an MCP server answers (connect, then list its tools): the tool layer discovers and caches; the
 * connectors of domain/mcp-servers store what it found.
 */

/** A tool as an MCP server lists it (tools/list), kept as listed. */
export interface ListedMcpTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  annotations?: Record<string, unknown>;
}

/** What a server offers besides tools, as announced in its capabilities. */
export interface ServerOffers {
  resources: boolean;
  prompts: boolean;
}

/** The answer of a successful discovery (connect + list tools). */
export interface Discovery {
  /** What the server offers besides tools; absent when the listing did not say. */
  offers?: ServerOffers | undefined;
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
