/**
 * Protocol negotiation and failure classification of the MCP client: which protocol is chosen, how a stored hint
 * is used and corrected, and what each kind of broken, refused, slow or foreign server turns into.
 */
import http from 'node:http';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Resolver } from '../src/lib/egress.ts';
import { createEgressFetch } from '../src/lib/egress-fetch.ts';
import { connectMcp, isMcpError, type McpConnection, type McpError } from '../src/tools/mcp/client.ts';
import { type McpTestServer, startLegacyMcpServer, startModernMcpServer } from './helpers/mcp-servers.ts';

const fetch = createEgressFetch({ allowInsecure: true });
const base = { fetch, requestTimeoutMs: 30_000 } as const;
const live = new AbortController().signal;

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});
afterAll(() => fetch.close());

async function started(server: Promise<McpTestServer>): Promise<McpTestServer> {
  const running = await server;
  cleanups.push(() => running.close());
  return running;
}

function kept(connection: McpConnection): McpConnection {
  cleanups.push(() => connection.close());
  return connection;
}

async function mcpFailure(promise: Promise<unknown>): Promise<McpError> {
  const error = await promise.then(
    () => null,
    (reason: unknown) => reason,
  );
  if (!isMcpError(error)) throw new Error(`expected an McpError, got ${String(error)}`);
  return error;
}

/** A plain HTTP server answering every request with `handle` (or never, when it does nothing). */
async function rawServer(handle: (request: http.IncomingMessage, response: http.ServerResponse) => void) {
  const requests: string[] = [];
  const server = http.createServer((request, response) => {
    requests.push(`${request.method} ${request.url}`);
    handle(request, response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('not listening on TCP');
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return { url: `http://127.0.0.1:${address.port}/mcp`, port: address.port, requests };
}

describe('negotiation', () => {
  it('speaks 2026-07-28 to a modern server with one probe and no initialize', async () => {
    const server = await started(startModernMcpServer({}));
    const connection = kept(await connectMcp({ url: server.url, headers: {} }, base));
    expect(connection.protocol).toBe('2026-07-28');
    expect(server.state.methods).toEqual(['server/discover']);
  });

  it('honours a correct hint: straight to initialize, or straight to the SSE stream', async () => {
    const legacy = await started(startLegacyMcpServer({}));
    const streamable = kept(
      await connectMcp({ url: legacy.url, headers: {} }, { ...base, prefer: 'streamable-http-2025' }),
    );
    expect(streamable.protocol).toBe('streamable-http-2025');
    expect(legacy.state.methods[0]).toBe('initialize');
    expect(legacy.state.methods).not.toContain('server/discover');

    const sse = await started(startLegacyMcpServer({ transport: 'sse' }));
    const viaSse = kept(await connectMcp({ url: sse.url, headers: {} }, { ...base, prefer: 'sse-2024' }));
    expect(viaSse.protocol).toBe('sse-2024');
    expect(sse.state.http[0]).toBe('GET /sse');
    expect(sse.state.http).not.toContain('POST /sse');
  });

  it('falls back from a wrong hint to what the server speaks', async () => {
    const modern = await started(startModernMcpServer({}));
    const fromLegacy = kept(
      await connectMcp({ url: modern.url, headers: {} }, { ...base, prefer: 'streamable-http-2025' }),
    );
    expect(fromLegacy.protocol).toBe('2026-07-28');
    // initialize was refused (-32022 Unsupported protocol version), then the probe found the 2026-07-28 revision.
    expect(modern.state.methods).toEqual(['initialize', 'server/discover']);
    const fromSse = kept(await connectMcp({ url: modern.url, headers: {} }, { ...base, prefer: 'sse-2024' }));
    expect(fromSse.protocol).toBe('2026-07-28');

    const sse = await started(startLegacyMcpServer({ transport: 'sse' }));
    const fromModern = kept(await connectMcp({ url: sse.url, headers: {} }, { ...base, prefer: '2026-07-28' }));
    expect(fromModern.protocol).toBe('sse-2024');
    const legacy = await started(startLegacyMcpServer({}));
    const fromWrongSse = kept(await connectMcp({ url: legacy.url, headers: {} }, { ...base, prefer: 'sse-2024' }));
    expect(fromWrongSse.protocol).toBe('streamable-http-2025');
  });
});

describe('tool lists', () => {
  it('returns the ttlMs hint of a 2026-07-28 server and asks the server on every call', async () => {
    const server = await started(startModernMcpServer({ ttlMs: 30_000 }));
    const connection = kept(await connectMcp({ url: server.url, headers: {} }, base));
    expect((await connection.listTools()).ttlMs).toBe(30_000);
    expect((await connection.listTools()).ttlMs).toBe(30_000);
    // Caching is the caller's: the client never answers from its own cache.
    expect(server.listRequests).toBe(2);
  });

  it('follows pagination cursors', async () => {
    const server = await started(startLegacyMcpServer({ pageSize: 2 }));
    const connection = kept(await connectMcp({ url: server.url, headers: {} }, base));
    const { tools } = await connection.listTools();
    expect(tools).toHaveLength(9);
    expect(new Set(tools.map((tool) => tool.name)).size).toBe(9);
    expect(server.listRequests).toBe(5);
  });

  it('offers renamed and extra tools', async () => {
    const server = await started(
      startModernMcpServer({
        only: ['echo'],
        rename: { echo: 'search' },
        extraTools: [
          {
            name: 'lookup',
            description: 'finds things',
            inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
            run: async (args) => ({ content: [{ type: 'text', text: `found ${String(args.q)}` }] }),
          },
        ],
      }),
    );
    const connection = kept(await connectMcp({ url: server.url, headers: {} }, base));
    expect((await connection.listTools()).tools.map((tool) => tool.name)).toEqual(['search', 'lookup']);
    expect((await connection.callTool('lookup', { q: 'x' }, { signal: live, timeoutMs: 30_000 })).text).toBe('found x');
    expect((await connection.callTool('search', { text: 'y' }, { signal: live, timeoutMs: 30_000 })).text).toBe('y');
  });
});

describe('failures', () => {
  it('reports a server that is down as unreachable', async () => {
    const gone = await rawServer(() => undefined);
    await cleanups.pop()?.();
    const error = await mcpFailure(connectMcp({ url: gone.url, headers: {} }, base));
    expect(error.code).toBe('unreachable');
    expect(error.retriable).toBe(true);
  });

  it('reports a server that is not MCP as protocol after trying every transport, and a 5xx as unreachable at once', async () => {
    const html = await rawServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/html' }).end('<html>a web page</html>');
    });
    const foreign = await mcpFailure(connectMcp({ url: html.url, headers: {} }, base));
    expect(foreign.code).toBe('protocol');
    expect(foreign.message).toContain('does not speak MCP');
    expect(html.requests.map((request) => request.split(' ')[0])).toContain('GET');

    const broken = await rawServer((_request, response) => {
      response.writeHead(500).end('boom');
    });
    const error = await mcpFailure(connectMcp({ url: broken.url, headers: {} }, base));
    expect(error.code).toBe('unreachable');
    expect(error.status).toBe(500);
    expect(broken.requests).toHaveLength(1);
  });

  it('times out a server that never answers, and an SSE stream that never names its endpoint', async () => {
    const silent = await rawServer(() => undefined);
    const started_ = performance.now();
    const error = await mcpFailure(connectMcp({ url: silent.url, headers: {} }, { ...base, requestTimeoutMs: 300 }));
    expect(error.code).toBe('timeout');
    // Its 0.3 s ended it, not the usual 30 s (the bound is room for a busy machine).
    expect(performance.now() - started_).toBeLessThan(20_000);

    const mute = await rawServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write(': nothing to say\n\n');
    });
    const sse = await mcpFailure(
      connectMcp({ url: mute.url, headers: {} }, { ...base, requestTimeoutMs: 300, prefer: 'sse-2024' }),
    );
    expect(sse.code).toBe('timeout');
  });

  it('aborts connecting when the caller aborts', async () => {
    const silent = await rawServer(() => undefined);
    const error = await mcpFailure(
      connectMcp({ url: silent.url, headers: {} }, { ...base, signal: AbortSignal.timeout(100) }),
    );
    expect(error.code).toBe('aborted');
  });

  it('refuses a private destination through the guarded fetch, before any request', async () => {
    const server = await started(startModernMcpServer({}));
    const secure = createEgressFetch({ allowInsecure: false });
    const rebinding: Resolver = { lookup: async () => [{ address: '127.0.0.1', family: 4 }] };
    const named = createEgressFetch({ allowInsecure: false, resolver: rebinding });
    cleanups.push(
      () => secure.close(),
      () => named.close(),
    );
    const literal = await mcpFailure(connectMcp({ url: server.url, headers: {} }, { ...base, fetch: secure }));
    expect(literal.code).toBe('blocked');
    const port = new URL(server.url).port;
    for (const prefer of [undefined, 'sse-2024'] as const) {
      const byName = await mcpFailure(
        connectMcp({ url: `https://mcp.example.com:${port}/mcp`, headers: {} }, { ...base, fetch: named, prefer }),
      );
      expect(byName.code).toBe('blocked');
      expect(byName.message).toContain("this host's own address");
    }
    expect(server.state.http).toEqual([]);
  });

  it('refuses a header HTTP cannot carry without echoing its value', async () => {
    const server = await started(startModernMcpServer({}));
    const error = await mcpFailure(
      connectMcp({ url: server.url, headers: { Authorization: 'Bearer se\ncret' } }, base),
    );
    expect(error.message).toContain('Authorization');
    expect(error.message).not.toContain('cret');
    expect(server.state.http).toEqual([]);
  });

  it('rejects an unknown tool as tool_error, and any call after close as unreachable', async () => {
    const server = await started(startModernMcpServer({}));
    const connection = await connectMcp({ url: server.url, headers: {} }, base);
    const unknown = await mcpFailure(connection.callTool('nope', {}, { signal: live, timeoutMs: 30_000 }));
    expect(unknown.code).toBe('tool_error');
    expect(unknown.message).toContain('nope');
    await connection.close();
    await connection.close();
    expect(connection.closed).toBe(true);
    const after = await mcpFailure(connection.callTool('echo', { text: 'x' }, { signal: live, timeoutMs: 30_000 }));
    expect(after.code).toBe('unreachable');
  });

  it('marks a 2025 connection closed when the server forgets its session', async () => {
    const first = await startLegacyMcpServer({});
    const port = Number(new URL(first.url).port);
    const connection = kept(await connectMcp({ url: first.url, headers: {} }, base));
    await first.close();
    const restarted = await started(startLegacyMcpServer({ port }));
    const error = await mcpFailure(connection.callTool('echo', { text: 'x' }, { signal: live, timeoutMs: 30_000 }));
    expect(error.code).toBe('unreachable');
    expect(connection.closed).toBe(true);
    expect(restarted.calls).toEqual([]);
  });
});
