/**
 * Discovery: connect to an MCP server and list its tools, as agent create/update and connector create/refresh
 * need before they write anything. The connection is opened for this purpose and closed after; the protocol that
 * worked is returned so later connections start with it.
 */
import { connectMcp, isMcpProtocol, type McpConnection, McpError } from './client.ts';
import type { Discover } from './discovery-types.ts';
import { DiscoveryError } from './discovery-types.ts';

export interface DiscoveryOptions {
  fetch: typeof fetch;
  requestTimeoutMs: number;
  maxResponseBytes?: number | undefined;
}

export function createDiscover(options: DiscoveryOptions): Discover {
  return async (endpoint, { prefer, signal }) => {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), options.requestTimeoutMs);
    const combined = signal === undefined ? controller.signal : AbortSignal.any([signal, controller.signal]);
    let connection: McpConnection | null = null;
    try {
      connection = await connectMcp(endpoint, {
        fetch: options.fetch,
        requestTimeoutMs: options.requestTimeoutMs,
        maxResponseBytes: options.maxResponseBytes,
        prefer: isMcpProtocol(prefer) ? prefer : undefined,
        signal: combined,
      });
      const listed = await connection.listTools(combined);
      return {
        protocol: connection.protocol,
        tools: listed.tools,
        ttlMs: listed.ttlMs,
        note: listed.note,
        offers: connection.capabilities,
      };
    } catch (error) {
      if (error instanceof McpError) throw new DiscoveryError(error.code, error.message, { cause: error });
      if (controller.signal.aborted)
        throw new DiscoveryError('timeout', `no answer within ${options.requestTimeoutMs} ms`, { cause: error });
      throw new DiscoveryError('unreachable', error instanceof Error ? error.message : String(error), { cause: error });
    } finally {
      clearTimeout(timer);
      await connection?.close().catch(() => undefined);
    }
  };
}
