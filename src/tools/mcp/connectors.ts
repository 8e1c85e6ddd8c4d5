/**
 * The organization's MCP connectors as the MCP provider reads and updates them. The provider names what it needs
 * here; domain/mcp-servers/mcp-server-store.ts, the one writer of `mcp_servers`, provides it (the composition root
 * hands its store to the provider).
 */
import type { Executor } from '../../storage/db.ts';
import type { Discovery, ListedMcpTool, ServerOffers } from './discovery-types.ts';

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
  /** What the server offered besides tools at its last listing; null when not known. */
  offers: ServerOffers | null;
  /** What its last listing left out (`TOOLS_TRUNCATED`), or null. */
  toolsNote: string | null;
  /** `oauth`: connections carry a credential from the vault (`ConnectorCredentials`); `none`: only `sealedHeaders`. */
  auth: 'none' | 'oauth';
  /** The scope asked for at sign-in (grown by step-up), or null. */
  oauthScope: string | null;
  updatedAt: number;
}

/** The code of a tool result whose server needs a person to sign in again. */
export const AUTHORIZATION_REQUIRED = 'authorization_required';

export type CredentialResult =
  /** `key` names the credential and its version: the pool keeps one connection per key. */
  { ok: true; key: string; headers: Record<string, string> } | { ok: false; message: string };

/**
 * The credential vault as the MCP provider uses it (domain/mcp-servers/credential-vault.ts provides it). A turn
 * uses its end user's credential for a connector when one exists, the organization's otherwise, never another
 * user's.
 */
export interface ConnectorCredentials {
  /**
   * The headers of a connection as `endUser`: refreshed first when the token expires within a minute, or when
   * `rejected` (the key of a credential a server just answered 401) is still the current one.
   */
  headersFor(db: Executor, connector: Connector, endUser: string | null, rejected?: string): Promise<CredentialResult>;
  /** The server asked for more scope than the credential has: a person must connect again (returns the message). */
  needsScope(db: Executor, connector: Connector, endUser: string | null, key: string, scope: string): Promise<string>;
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
