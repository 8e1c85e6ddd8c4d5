/**
 * Real MCP servers on loopback for tests, built with the SDKs users' servers are built with:
 * - `startModernMcpServer`: v2 `@modelcontextprotocol/server`, speaking the 2026-07-28 revision ONLY (legacy
 *   `initialize` and older protocol versions are rejected with `Unsupported protocol version`);
 * - `startLegacyMcpServer`: v1 `@modelcontextprotocol/sdk`, Streamable HTTP with `initialize` and sessions, or
 *   (`transport: 'sse'`) the deprecated HTTP+SSE transport only.
 * Both offer the tools of `mcp-test-tools.ts` and record what they saw. `mcp-server-main.ts` runs either one
 * as a separate process for tests that must outlive or kill the process under test.
 */
import { createMcpHandler, fromJsonSchema, McpServer } from '@modelcontextprotocol/server';
import { WAIT_MS } from './deadlines.ts';
import { type Shell, type ShellOptions, type ShellRequest, serveWeb, startShell } from './mcp-http-shell.ts';
import { startLegacyRoutes } from './mcp-legacy-server.ts';
import {
  emptyState,
  type McpServerState,
  type RecordedCall,
  type RecordedCancellation,
  runTool,
  type TestTool,
  type TestToolContext,
  type ToolTableOptions,
  toolTable,
} from './mcp-test-tools.ts';

export type { RecordedCall, RecordedCancellation, TestTool } from './mcp-test-tools.ts';

export interface McpTestServerOptions extends ToolTableOptions {
  /** The server's self-reported name (serverInfo). */
  name?: string;
  /** Required Authorization header value: any request without exactly this value gets 401. */
  auth?: string;
  /** Port on 127.0.0.1 (default 0: any free port). */
  port?: number;
  /** Answers a request before the MCP code when it returns true (an OAuth resource server's checks). */
  guard?: ShellOptions['guard'];
}

export interface ModernMcpServerOptions extends McpTestServerOptions {
  /** `ttlMs` cache hint on `tools/list` results (the SDK sends 0 when unset). */
  ttlMs?: number;
}

export interface LegacyMcpServerOptions extends McpTestServerOptions {
  /** `streamable` (default): Streamable HTTP with sessions at /mcp. `sse`: HTTP+SSE only, GET /sse + POST /messages. */
  transport?: 'streamable' | 'sse';
  /** Page size of `tools/list` (default: everything on one page). */
  pageSize?: number;
}

export interface McpTestServer {
  /** The endpoint a client connects to. */
  url: string;
  name: string;
  state: McpServerState;
  calls: RecordedCall[];
  cancellations: RecordedCancellation[];
  counts: Record<string, number>;
  /** `tools/list` requests received so far (each page counts). */
  readonly listRequests: number;
  /** Offers one more tool and tells connected clients the list changed. */
  addTool(tool: TestTool): void;
  /** Withdraws a tool and tells connected clients the list changed. */
  removeTool(name: string): void;
  /** Resolves when `predicate(state)` holds (polled), or rejects after `timeoutMs` (WAIT_MS unless given). */
  waitFor(predicate: (state: McpServerState) => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** The protocol-independent half of a test server: its tool table, its state and what a change must notify. */
export interface ServerCore {
  name: string;
  tools: TestTool[];
  state: McpServerState;
}

function handleFor(
  core: ServerCore,
  shell: Shell,
  url: string,
  notifyChanged: () => void,
  closeRoutes: () => Promise<void>,
): McpTestServer {
  return {
    url,
    name: core.name,
    state: core.state,
    calls: core.state.calls,
    cancellations: core.state.cancellations,
    counts: core.state.counts,
    get listRequests() {
      return core.state.listRequests;
    },
    addTool(tool) {
      core.tools = [...core.tools.filter((existing) => existing.name !== tool.name), tool];
      notifyChanged();
    },
    removeTool(name) {
      core.tools = core.tools.filter((tool) => tool.name !== name);
      notifyChanged();
    },
    waitFor(predicate, timeoutMs = WAIT_MS) {
      const deadline = Date.now() + timeoutMs;
      return new Promise((resolve, reject) => {
        const poll = () => {
          if (predicate(core.state)) resolve();
          else if (Date.now() > deadline) reject(new Error(`${core.name}: condition not met within ${timeoutMs} ms`));
          else setTimeout(poll, 10);
        };
        poll();
      });
    },
    async close() {
      await closeRoutes();
      await shell.close();
    },
  };
}

function asRecord(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? { ...value } : {};
}

/** A fresh v2 McpServer over the current tool table: createMcpHandler builds one per request. */
function modernServer(core: ServerCore, options: ModernMcpServerOptions, request: Request | undefined): McpServer {
  const server = new McpServer(
    { name: core.name, version: '1.0.0' },
    options.ttlMs === undefined
      ? {}
      : { cacheHints: { 'tools/list': { ttlMs: options.ttlMs, cacheScope: 'private' } } },
  );
  for (const tool of core.tools) {
    server.registerTool(
      tool.name,
      {
        ...(tool.title === undefined ? {} : { title: tool.title }),
        description: tool.description,
        inputSchema: fromJsonSchema<Record<string, unknown>>(tool.inputSchema),
        ...(tool.annotations === undefined ? {} : { annotations: tool.annotations }),
      },
      async (args, ctx) => {
        const meta = asRecord(ctx.mcpReq._meta);
        const progressToken = ctx.mcpReq._meta?.progressToken;
        const context: TestToolContext = {
          signal: ctx.mcpReq.signal,
          authorization: request?.headers.get('authorization') ?? undefined,
          progress: async (progress, total, message) => {
            if (progressToken === undefined) return;
            await ctx.mcpReq.notify({
              method: 'notifications/progress',
              params: { progressToken, progress, ...(total === undefined ? {} : { total }), message },
            });
          },
        };
        return runTool(tool, asRecord(args), meta, context, core.state);
      },
    );
  }
  return server;
}

/** A v2 server speaking the 2026-07-28 revision only, at `<origin>/mcp`. */
export async function startModernMcpServer(options: ModernMcpServerOptions = {}): Promise<McpTestServer> {
  const core: ServerCore = { name: options.name ?? 'modern-test', tools: toolTable(options), state: emptyState() };
  const handler = createMcpHandler(({ requestInfo }) => modernServer(core, options, requestInfo), {
    legacy: 'reject',
    // Keep-alive comments would only add noise to short tests.
    keepAliveMs: 0,
  });
  const shell = await startShell({
    auth: options.auth,
    guard: options.guard,
    port: options.port,
    state: core.state,
    route: async (request: ShellRequest) => {
      if (request.url.pathname !== '/mcp') {
        request.res.writeHead(404).end();
        return;
      }
      await serveWeb(request, (webRequest) => handler.fetch(webRequest));
    },
  });
  return handleFor(
    core,
    shell,
    `${shell.origin}/mcp`,
    () => handler.notify.toolsChanged(),
    () => handler.close(),
  );
}

/** A v1 server: Streamable HTTP with `initialize` at `<origin>/mcp`, or HTTP+SSE only at `<origin>/sse`. */
export async function startLegacyMcpServer(options: LegacyMcpServerOptions = {}): Promise<McpTestServer> {
  const sse = options.transport === 'sse';
  const core: ServerCore = {
    name: options.name ?? (sse ? 'sse-test' : 'legacy-test'),
    tools: toolTable(options),
    state: emptyState(),
  };
  const routes = startLegacyRoutes(core, { sse, pageSize: options.pageSize });
  const shell = await startShell({ auth: options.auth, port: options.port, state: core.state, route: routes.route });
  return handleFor(core, shell, `${shell.origin}${sse ? '/sse' : '/mcp'}`, routes.notifyChanged, routes.close);
}
