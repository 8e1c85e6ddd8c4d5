/**
 * The MCP SDK side of /v1/mcp and /v1/agents/{id}/mcp (http/routes/mcp-server.ts): the agents' tools, the
 * 2026-07-28 per-request handler and the 2025-era sessions. Loaded on the first MCP request, so a server that never
 * serves MCP never loads the SDK (test/startup-imports.test.ts).
 */
import {
  createMcpHandler,
  isLegacyRequest,
  localhostAllowedOrigins,
  originValidationResponse,
} from '@modelcontextprotocol/server';
import type { Deps } from '../../deps.ts';
import { type AgentTools, createAgentTools, type ToolScope } from './agent-tools.ts';
import { createLegacySessions } from './legacy-sessions.ts';

/** 2025-era sessions idle this long are closed (their client re-initializes on the 404 that follows). */
const LEGACY_IDLE_MS = 30 * 60_000;
const LEGACY_MAX_SESSIONS = 10_000;
/** A progress beat this often while a turn shows nothing, so clients that reset their timeout on progress wait. */
const BEAT_MS = 10_000;

export type { ToolScope };

export interface McpEndpoint {
  /** Answers one MCP request of `scope`; `owner` (`<org>:<endpoint>`) binds a 2025-era session. */
  serve(request: Request, body: unknown, scope: ToolScope, owner: string): Promise<Response>;
  close(): Promise<void>;
}

export function createMcpEndpoint(
  deps: Deps,
  logError: (error: unknown) => void,
  logRefusal: (error: unknown) => void,
): McpEndpoint {
  const allowedOrigins = [...localhostAllowedOrigins(), ...deps.config.mcpAllowedOrigins];
  const tools: AgentTools = createAgentTools({
    turns: deps.protocolTurns,
    listAgents: (orgId) => deps.agents.list(orgId),
    logError,
    beatMs: BEAT_MS,
    version: '1.0.0',
  });
  /** The scope of each request the modern handler serves (its factory sees the Request only). */
  const scopes = new WeakMap<Request, ToolScope>();
  const modern = createMcpHandler(
    ({ requestInfo }) => {
      const scope = requestInfo === undefined ? undefined : scopes.get(requestInfo);
      if (scope === undefined) throw new Error('MCP request without a scope');
      return tools.server(scope);
    },
    {
      legacy: 'reject',
      keepAliveMs: deps.config.sseHeartbeatMs,
      maxRequestBodySize: deps.config.bodyLimitBytes,
      onerror: logRefusal,
    },
  );
  const legacy = createLegacySessions({
    idleMs: LEGACY_IDLE_MS,
    max: LEGACY_MAX_SESSIONS,
    keepAliveMs: deps.config.sseHeartbeatMs,
  });
  return {
    async serve(request, body, scope, owner) {
      const refused = originValidationResponse(request, allowedOrigins);
      if (refused !== undefined) return refused;
      if (await isLegacyRequest(request, body)) return legacy.handle(request, body, owner, () => tools.server(scope));
      scopes.set(request, scope);
      return modern.fetch(request, body === undefined ? {} : { parsedBody: body });
    },
    async close() {
      await Promise.all([modern.close(), legacy.close()]);
    },
  };
}
