/**
 * Test MCP servers for resources, prompts, per-user credentials and task-only tools:
 * - `startResourceServer`: v2 `@modelcontextprotocol/server` (2026-07-28 only) with a `whoami` tool answering the
 *   Authorization header it received, resources (a short text, a text of `hugeChars` characters, a binary blob),
 *   and a `greet` prompt; every Authorization header a request carried is recorded in `tokens`;
 * - `startTaskToolServer`: v1 `@modelcontextprotocol/sdk` (2025 Streamable HTTP, stateless) listing a tool that
 *   requires task-based execution (`execution.taskSupport: "required"`) beside an ordinary one.
 */

import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { createMcpHandler, fromJsonSchema, McpServer } from '@modelcontextprotocol/server';
import { serveWeb, startShell } from './mcp-http-shell.ts';
import { emptyState, TINY_PNG_BASE64 } from './mcp-test-tools.ts';

export interface ResourceServer {
  url: string;
  /** The Authorization header of every request (null when absent), in order. */
  tokens: (string | null)[];
  /** The methods the server was asked, in order. */
  methods: string[];
  close(): Promise<void>;
}

export const SMALL_TEXT = 'The quarterly report: revenue grew 12%.';

export async function startResourceServer(options: { hugeChars?: number } = {}): Promise<ResourceServer> {
  const huge = 'x'.repeat(options.hugeChars ?? 200_000);
  const state = emptyState();
  const tokens: (string | null)[] = [];
  const build = (request: Request | undefined) => {
    const server = new McpServer({ name: 'resource-test', version: '1.0.0' });
    server.registerTool('whoami', { description: 'Answers the credential it was called with' }, async () => ({
      content: [{ type: 'text', text: `token=${request?.headers.get('authorization') ?? 'none'}` }],
    }));
    server.registerResource(
      'report',
      'docs://report',
      { description: 'The quarterly report', mimeType: 'text/plain' },
      async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: SMALL_TEXT }] }),
    );
    server.registerResource(
      'archive',
      'docs://archive',
      { description: 'Everything ever written', mimeType: 'text/plain' },
      async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: huge }] }),
    );
    server.registerResource('logo', 'img://logo', { mimeType: 'image/png' }, async (uri) => ({
      contents: [{ uri: uri.href, mimeType: 'image/png', blob: TINY_PNG_BASE64 }],
    }));
    server.registerPrompt(
      'greet',
      {
        description: 'Greets someone',
        argsSchema: fromJsonSchema<{ name: string }>({
          type: 'object',
          properties: { name: { type: 'string', description: 'Who to greet' } },
          required: ['name'],
        }),
      },
      ({ name }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Say hello to ${name}.` } }] }),
    );
    return server;
  };
  const handler = createMcpHandler(({ requestInfo }) => build(requestInfo), { legacy: 'reject', keepAliveMs: 0 });
  const shell = await startShell({
    state,
    route: async (request) => {
      tokens.push(request.req.headers.authorization ?? null);
      await serveWeb(request, (webRequest) => handler.fetch(webRequest));
    },
  });
  return {
    url: `${shell.origin}/mcp`,
    tokens,
    methods: state.methods,
    async close() {
      await handler.close();
      await shell.close();
    },
  };
}

export async function startTaskToolServer(): Promise<{ url: string; methods: string[]; close(): Promise<void> }> {
  const state = emptyState();
  const shell = await startShell({
    state,
    route: async ({ req, res, json }) => {
      const server = new Server({ name: 'task-test', version: '1.0.0' }, { capabilities: { tools: {} } });
      server.setRequestHandler(ListToolsRequestSchema, async () => ({
        tools: [
          { name: 'quick', description: 'Answers at once', inputSchema: { type: 'object', properties: {} } },
          {
            name: 'long_export',
            description: 'Runs as a task only',
            inputSchema: { type: 'object', properties: {} },
            execution: { taskSupport: 'required' },
          },
        ],
      }));
      server.setRequestHandler(CallToolRequestSchema, async (request) => ({
        content: [{ type: 'text', text: `ran ${request.params.name}` }],
      }));
      const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res, json);
    },
  });
  return { url: `${shell.origin}/mcp`, methods: state.methods, close: () => shell.close() };
}
