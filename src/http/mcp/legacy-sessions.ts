/**
 * The 2025-era MCP protocol (2025-06-18, 2025-11-25) is sessionful: `initialize` opens a session (Mcp-Session-Id),
 * and a cancellation or an elicitation answer arrives as another POST that must reach the request it concerns. So
 * this process keeps one SDK transport and server per session, bound to the organization and endpoint that opened
 * it (another key's request for it is a 404, as an unknown session is), and closes sessions idle for `idleMs`.
 * Sessions live in the process that opened them: behind several processes, a load balancer keeps a client on one
 * (or the client re-initializes on the 404 the spec prescribes). The 2026-07-28 revision needs none of this.
 */
import { randomUUID } from 'node:crypto';
import { type McpServer, WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';

interface LegacySession {
  transport: WebStandardStreamableHTTPServerTransport;
  /** The organization and endpoint that opened it. */
  owner: string;
  lastUsed: number;
}

export interface LegacySessionOptions {
  idleMs: number;
  /** Sessions open at once in this process; a new one beyond it closes the least recently used. */
  max: number;
  keepAliveMs: number;
}

function sessionNotFound(): Response {
  return Response.json(
    { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null },
    { status: 404 },
  );
}

export function createLegacySessions(options: LegacySessionOptions) {
  const sessions = new Map<string, LegacySession>();

  function closeSession(id: string): void {
    const session = sessions.get(id);
    if (session === undefined) return;
    sessions.delete(id);
    void session.transport.close().catch(() => {});
  }

  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const [id, session] of sessions) if (now - session.lastUsed > options.idleMs) closeSession(id);
    },
    Math.min(options.idleMs, 60_000),
  );
  sweep.unref();

  return {
    /**
     * Serves one 2025-era request for `owner` (`<org>:<endpoint>`): a request without Mcp-Session-Id opens a
     * session when it is `initialize` (the transport answers anything else with its own 400).
     */
    async handle(request: Request, parsedBody: unknown, owner: string, build: () => McpServer): Promise<Response> {
      const id = request.headers.get('mcp-session-id');
      if (id !== null) {
        const session = sessions.get(id);
        if (session === undefined || session.owner !== owner) return sessionNotFound();
        session.lastUsed = Date.now();
        // Refresh its place in the map's order: the first entry is the least recently used.
        sessions.delete(id);
        sessions.set(id, session);
        return session.transport.handleRequest(request, { parsedBody });
      }
      const transport: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        keepAliveMs: options.keepAliveMs,
        onsessioninitialized: (sessionId) => {
          while (sessions.size >= options.max) {
            const [oldest] = sessions.keys();
            if (oldest === undefined) break;
            closeSession(oldest);
          }
          sessions.set(sessionId, { transport, owner, lastUsed: Date.now() });
        },
        onsessionclosed: (sessionId) => {
          sessions.delete(sessionId);
        },
      });
      await build().connect(transport);
      return transport.handleRequest(request, { parsedBody });
    },

    get size(): number {
      return sessions.size;
    },

    async close(): Promise<void> {
      clearInterval(sweep);
      await Promise.all([...sessions.values()].map((session) => session.transport.close().catch(() => {})));
      sessions.clear();
    },
  };
}

export type LegacySessions = ReturnType<typeof createLegacySessions>;
