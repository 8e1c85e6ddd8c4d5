/**
 * The 2025-era half of the test MCP servers, on the v1 `@modelcontextprotocol/sdk` (what most deployed servers
 * run): Streamable HTTP with `initialize` and one session per client (so `list_changed` reaches the client on
 * its GET stream), or the deprecated HTTP+SSE transport (GET /sse opens the stream, POST /messages?sessionId=…
 * carries the client's messages). The low-level `Server` is used so `tools/list` can be paginated.
 */
import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, isInitializeRequest, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { ShellRequest } from './mcp-http-shell.ts';
import type { ServerCore } from './mcp-servers.ts';
import { runTool, type TestToolContext } from './mcp-test-tools.ts';

export interface LegacyRoutes {
  route(request: ShellRequest): Promise<void>;
  notifyChanged(): void;
  close(): Promise<void>;
}

function asRecord(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? { ...value } : {};
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/** One v1 low-level server per session, answering from the live tool table. */
function legacyServer(core: ServerCore, pageSize: number | undefined): Server {
  const server = new Server({ name: core.name, version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } });
  server.setRequestHandler(ListToolsRequestSchema, async (request) => {
    const start = Number(request.params?.cursor ?? '0') || 0;
    const size = pageSize ?? core.tools.length;
    const page = core.tools.slice(start, start + size);
    const next = start + size < core.tools.length ? String(start + size) : undefined;
    return {
      tools: page.map((tool) => ({
        name: tool.name,
        ...(tool.title === undefined ? {} : { title: tool.title }),
        description: tool.description,
        inputSchema: tool.inputSchema,
        ...(tool.annotations === undefined ? {} : { annotations: tool.annotations }),
      })),
      ...(next === undefined ? {} : { nextCursor: next }),
    };
  });
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const tool = core.tools.find((candidate) => candidate.name === request.params.name);
    if (tool === undefined) {
      return { content: [{ type: 'text', text: `unknown tool ${request.params.name}` }], isError: true };
    }
    const progressToken = request.params._meta?.progressToken;
    const context: TestToolContext = {
      signal: extra.signal,
      authorization: headerValue(extra.requestInfo?.headers.authorization),
      progress: async (progress, total, message) => {
        if (progressToken === undefined) return;
        await extra.sendNotification({
          method: 'notifications/progress',
          params: { progressToken, progress, ...(total === undefined ? {} : { total }), message },
        });
      },
    };
    return runTool(tool, asRecord(request.params.arguments), asRecord(request.params._meta), context, core.state);
  });
  return server;
}

export function startLegacyRoutes(
  core: ServerCore,
  options: { sse: boolean; pageSize: number | undefined },
): LegacyRoutes {
  const servers = new Set<Server>();
  const streamable = new Map<string, StreamableHTTPServerTransport>();
  const sse = new Map<string, SSEServerTransport>();

  const connect = async (transport: StreamableHTTPServerTransport | SSEServerTransport) => {
    const server = legacyServer(core, options.pageSize);
    servers.add(server);
    server.onclose = () => servers.delete(server);
    await server.connect(transport);
  };

  const routeStreamable = async ({ req, res, url, json }: ShellRequest) => {
    if (url.pathname !== '/mcp') {
      res.writeHead(404).end();
      return;
    }
    const sessionId = headerValue(req.headers['mcp-session-id']);
    const existing = sessionId === undefined ? undefined : streamable.get(sessionId);
    if (existing !== undefined) {
      await existing.handleRequest(req, res, json);
      return;
    }
    if (sessionId === undefined && req.method === 'POST' && isInitializeRequest(json)) {
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          streamable.set(id, transport);
        },
      });
      transport.onclose = () => {
        if (transport.sessionId !== undefined) streamable.delete(transport.sessionId);
      };
      await connect(transport);
      await transport.handleRequest(req, res, json);
      return;
    }
    res.writeHead(sessionId === undefined ? 400 : 404, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        jsonrpc: '2.0',
        error: { code: -32000, message: sessionId === undefined ? 'Bad Request: no session' : 'Session not found' },
        id: null,
      }),
    );
  };

  const routeSse = async ({ req, res, url, json }: ShellRequest) => {
    if (req.method === 'GET' && url.pathname === '/sse') {
      const transport = new SSEServerTransport('/messages', res);
      sse.set(transport.sessionId, transport);
      transport.onclose = () => sse.delete(transport.sessionId);
      await connect(transport);
      return;
    }
    if (req.method === 'POST' && url.pathname === '/messages') {
      const transport = sse.get(url.searchParams.get('sessionId') ?? '');
      if (transport === undefined) {
        res.writeHead(404).end('Session not found');
        return;
      }
      await transport.handlePostMessage(req, res, json);
      return;
    }
    // What an SSE-only server answers to a Streamable HTTP POST: this endpoint does not take messages.
    res.writeHead(405, { allow: 'GET' }).end('Method not allowed');
  };

  return {
    route: options.sse ? routeSse : routeStreamable,
    notifyChanged: () => {
      for (const server of servers) void server.sendToolListChanged().catch(() => undefined);
    },
    close: async () => {
      await Promise.all([...servers].map((server) => server.close().catch(() => undefined)));
    },
  };
}
