/**
 * What an organization connector offers besides tools, for the API and the console: a page of its resources or
 * prompts (`GET /v1/mcp_servers/{id}/resources|prompts`), asked of the server now, as the organization (its
 * credential, if it holds one). Each page is bounded by the transport's read bound; the server chooses its size.
 */
import { AppError, notFound, validationError } from '../../errors/app-error.ts';
import { isMcpError, type McpConnection, type McpPage } from '../../tools/mcp/client.ts';
import type { McpProviderTools } from '../../tools/mcp/provider.ts';
import { McpAuthorizationRequired } from '../../tools/mcp/provider.ts';

export interface McpServerCatalogDeps {
  browse: McpProviderTools['browse'];
  /** Bound on one request to the server. */
  requestTimeoutMs: number;
}

const list = <T>(page: McpPage<T>) => ({
  object: 'list' as const,
  data: page.items,
  has_more: page.nextCursor !== null,
  next_cursor: page.nextCursor,
});

export function createMcpServerCatalog(deps: McpServerCatalogDeps) {
  async function ask<T>(
    orgId: string,
    serverId: string,
    cursor: string | null,
    offered: (connection: McpConnection) => boolean,
    operation: (connection: McpConnection, signal: AbortSignal) => Promise<McpPage<T>>,
  ) {
    const signal = AbortSignal.timeout(deps.requestTimeoutMs + 1000);
    let page: McpPage<T> | undefined;
    try {
      page = await deps.browse(orgId, serverId, signal, (connection) =>
        offered(connection) ? operation(connection, signal) : Promise.resolve({ items: [], nextCursor: null }),
      );
    } catch (error) {
      if (cursor !== null && isMcpError(error) && error.code === 'tool_error') {
        throw validationError('cursor', `the MCP server refused the cursor: ${error.message}`);
      }
      const message = error instanceof Error ? error.message : String(error);
      const why = error instanceof McpAuthorizationRequired ? `authorization_required: ${message}` : message;
      throw new AppError('mcp_server_unreachable', `the MCP server could not be asked: ${why}`, { cause: error });
    }
    if (page === undefined) throw notFound('mcp server', serverId);
    return list(page);
  }

  return {
    resources: (orgId: string, serverId: string, cursor: string | null) =>
      ask(
        orgId,
        serverId,
        cursor,
        (connection) => connection.capabilities.resources,
        (connection, signal) => connection.listResources(cursor, signal),
      ),
    prompts: (orgId: string, serverId: string, cursor: string | null) =>
      ask(
        orgId,
        serverId,
        cursor,
        (connection) => connection.capabilities.prompts,
        (connection, signal) => connection.listPrompts(cursor, signal),
      ),
  };
}

export type McpServerCatalog = ReturnType<typeof createMcpServerCatalog>;
