/**
 * The organization's MCP connectors as the MCP provider reads and updates them. The provider names what it needs
 * here; domain/mcp-servers/mcp-server-store.ts, the one writer of `mcp_servers`, provides it (the composition root
 * hands its store to the provider).
 */
import type { Executor } from '../../storage/db.ts';
import type { Discovery, ListedMcpTool } from './discovery-types.ts';

/** The code of the `last_error` a listing leaves when it kept only part of the server's tools. */
export const TOOLS_TRUNCATED = 'tools_truncated';

/** A connector as the tool layer uses it: with its tools parsed. */
export interface Connector {
  id: string;
  orgId: string;
  name: string;
  url: string;
  sealedHeaders: string | null;
  protocol: string | null;
  tools: ListedMcpTool[] | null;
  toolsFetchedAt: number | null;
  toolsTtlMs: number | null;
  /** What its last listing left out (`TOOLS_TRUNCATED`), or null. */
  toolsNote: string | null;
  updatedAt: number;
}

export interface ConnectorStore {
  /** The organization's connectors with these ids (those it has). */
  connectors(db: Executor, orgId: string, ids: string[]): Promise<Connector[]>;
  /** The organization's connectors at these URLs (those it has). */
  connectorsAt(db: Executor, orgId: string, urls: string[]): Promise<Connector[]>;
  /** The headers of a connector in clear, for a connection. */
  openHeaders(sealed: string | null): Record<string, string>;
  /** A successful listing: the protocol and tools it found. */
  recordListing(db: Executor, id: string, discovery: Discovery, now: number): Promise<void>;
  recordFailure(db: Executor, id: string, error: { code: string; message: string }): Promise<void>;
  /** The stored tool list is to be fetched again before its next use. */
  markStale(db: Executor, id: string): Promise<void>;
}
