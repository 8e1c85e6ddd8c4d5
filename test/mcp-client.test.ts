/**
 * The MCP client against real servers built with both SDK lines (test/helpers/mcp-servers.ts): a 2026-07-28-only
 * server, a 2025 Streamable HTTP server and an HTTP+SSE-only server. Every behaviour the tool layer relies on is
 * asserted from both sides: what the client returns and what the server saw.
 */
import pino from 'pino';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createEgressFetch } from '../src/lib/egress-fetch.ts';
import {
  connectMcp,
  isMcpError,
  type McpConnection,
  type McpError,
  type McpProtocol,
} from '../src/tools/mcp/client.ts';
import { waitUntil } from './helpers/fixtures.ts';
import {
  type McpTestServer,
  type McpTestServerOptions,
  startLegacyMcpServer,
  startModernMcpServer,
} from './helpers/mcp-servers.ts';

const fetch = createEgressFetch({ allowInsecure: true });
const base = { fetch, requestTimeoutMs: 30_000 } as const;
const live = new AbortController().signal;

const servers: McpTestServer[] = [];
const connections: McpConnection[] = [];

async function started(server: Promise<McpTestServer>): Promise<McpTestServer> {
  const running = await server;
  servers.push(running);
  return running;
}

async function connected(
  server: McpTestServer,
  headers: Record<string, string> = {},
  extra: { prefer?: McpProtocol } = {},
): Promise<McpConnection> {
  const connection = await connectMcp({ url: server.url, headers }, { ...base, ...extra });
  connections.push(connection);
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

afterEach(async () => {
  await Promise.all(connections.splice(0).map((connection) => connection.close()));
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

afterAll(() => fetch.close());

const kinds = [
  { kind: 'modern', protocol: '2026-07-28', start: (o: McpTestServerOptions) => startModernMcpServer(o) },
  { kind: 'legacy', protocol: 'streamable-http-2025', start: (o: McpTestServerOptions) => startLegacyMcpServer(o) },
  {
    kind: 'sse',
    protocol: 'sse-2024',
    start: (o: McpTestServerOptions) => startLegacyMcpServer({ ...o, transport: 'sse' }),
  },
] as const;

describe.each(kinds)('against the $kind server', ({ protocol, start }) => {
  it(`negotiates ${protocol}, lists the tools with their schemas, and calls each tool`, async () => {
    const server = await started(start({ name: 'tools' }));
    const connection = await connected(server, { Authorization: 'Bearer token-1' });
    expect(connection.protocol).toBe(protocol);

    const { tools, ttlMs } = await connection.listTools();
    expect(tools.map((tool) => tool.name)).toEqual([
      'echo',
      'add',
      'fail',
      'hang',
      'slow',
      'count',
      'image',
      'resource',
      'whoami',
    ]);
    expect(tools[0]).toMatchObject({
      name: 'echo',
      title: 'Echo',
      description: 'Returns its text unchanged.',
      inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      annotations: { readOnlyHint: true },
    });
    // Only the 2026-07-28 revision has cache hints; the v2 server sends 0 ("already stale") when given none.
    expect(ttlMs).toBe(protocol === '2026-07-28' ? 0 : null);

    const call = (name: string, args: unknown) => connection.callTool(name, args, { signal: live, timeoutMs: 30_000 });
    expect(
      await connection.callTool(
        'echo',
        { text: 'héllo' },
        { signal: live, timeoutMs: 30_000, meta: { 'agentry/call_id': 'call_1' } },
      ),
    ).toEqual({ text: 'héllo', isError: false });
    expect(server.calls.at(-1)?.meta).toMatchObject({ 'agentry/call_id': 'call_1' });
    expect(await call('add', { a: 2, b: 40 })).toEqual({ text: '42', isError: false, structuredContent: { sum: 42 } });
    expect(await call('fail', { message: 'the disk is full' })).toEqual({ text: 'the disk is full', isError: true });
    expect(await call('image', {})).toEqual({ text: 'here is an image\n[image: image/png, 70 bytes]', isError: false });
    expect((await call('resource', {})).text).toBe(
      '[resource: test://notes/1 (text/plain)]\nnote one\n[resource: test://files/report.pdf (application/pdf)]',
    );
    expect((await call('whoami', {})).text).toBe('Bearer token-1');
    expect((await call('count', { key: 'k' })).text).toBe('1');
    expect((await call('count', { key: 'k' })).text).toBe('2');
    expect(server.counts).toEqual({ k: 2 });
    await expect(call('echo', 'not an object')).rejects.toMatchObject({ code: 'tool_error' });
  });

  it('cancels a call on the server when it times out', async () => {
    const server = await started(start({}));
    const connection = await connected(server);
    const started_ = performance.now();
    const error = await mcpFailure(connection.callTool('hang', {}, { signal: live, timeoutMs: 300 }));
    expect(error.code).toBe('timeout');
    // The call's 0.3 s ended it, not the connection's 30 s request timeout (the bound is room for a busy machine).
    expect(performance.now() - started_).toBeLessThan(20_000);
    await server.waitFor((state) => state.cancellations.length === 1);
    expect(server.cancellations[0]?.tool).toBe('hang');
  });

  it('cancels a call on the server when the caller aborts, and sends nothing for an already aborted one', async () => {
    const server = await started(start({}));
    const connection = await connected(server);
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('interrupted')), 200);
    const error = await mcpFailure(connection.callTool('hang', {}, { signal: controller.signal, timeoutMs: 10_000 }));
    expect(error.code).toBe('aborted');
    await server.waitFor((state) => state.cancellations.length === 1);

    const calls = server.calls.length;
    const early = await mcpFailure(
      connection.callTool('echo', { text: 'x' }, { signal: controller.signal, timeoutMs: 1000 }),
    );
    expect(early.code).toBe('aborted');
    expect(server.calls).toHaveLength(calls);
  });

  it('reports progress notifications', async () => {
    const server = await started(start({}));
    const connection = await connected(server);
    const progress: unknown[] = [];
    const result = await connection.callTool(
      'slow',
      { ms: 150, steps: 3 },
      { signal: live, timeoutMs: 30_000, onProgress: (update) => progress.push(update) },
    );
    expect(result.text).toBe('done after 3 steps');
    expect(progress).toEqual([
      { progress: 1, total: 3, message: 'step 1 of 3' },
      { progress: 2, total: 3, message: 'step 2 of 3' },
      { progress: 3, total: 3, message: 'step 3 of 3' },
    ]);
  });

  it('runs parallel calls on one connection', async () => {
    const server = await started(start({}));
    const connection = await connected(server);
    const opts = { signal: live, timeoutMs: 30_000 };
    const [slow, ...rest] = await Promise.all([
      connection.callTool('slow', { ms: 200, steps: 2 }, opts),
      ...Array.from({ length: 8 }, (_, i) => connection.callTool('echo', { text: `e${i}` }, opts)),
      ...Array.from({ length: 8 }, () => connection.callTool('count', { key: 'p' }, opts)),
    ]);
    expect(slow?.text).toBe('done after 2 steps');
    expect(rest.slice(0, 8).map((result) => result.text)).toEqual(Array.from({ length: 8 }, (_, i) => `e${i}`));
    expect(
      rest
        .slice(8)
        .map((result) => Number(result.text))
        .sort((a, b) => a - b),
    ).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(server.counts.p).toBe(8);
  });

  it('surfaces a 401 as auth_failed without trying another protocol, and sends the header when given', async () => {
    const server = await started(start({ auth: 'Bearer right' }));
    const error = await mcpFailure(connectMcp({ url: server.url, headers: {} }, base));
    expect(error.code).toBe('auth_failed');
    expect(error.status).toBe(401);
    // One request, refused; no fallback to another transport.
    expect(server.state.http).toHaveLength(1);
    const wrong = await mcpFailure(connectMcp({ url: server.url, headers: { Authorization: 'Bearer wrong' } }, base));
    expect(wrong.code).toBe('auth_failed');

    const connection = await connected(server, { Authorization: 'Bearer right' });
    expect(connection.protocol).toBe(protocol);
    const result = await connection.callTool('whoami', {}, { signal: live, timeoutMs: 30_000 });
    expect(result.text).toBe('Bearer right');
  });

  it('delivers list_changed and lists the new tool', async () => {
    const server = await started(start({}));
    const connection = await connected(server);
    let changes = 0;
    connection.onToolsChanged(() => {
      changes += 1;
    });
    // The notification stream opens asynchronously: announce until one announcement arrives.
    let attempt = 0;
    await waitUntil(
      async () => {
        if (changes > 0) return true;
        server.addTool({
          name: 'fresh',
          description: `added (${attempt++})`,
          inputSchema: { type: 'object', properties: {} },
          run: async () => ({ content: [{ type: 'text', text: 'fresh!' }] }),
        });
        return null;
      },
      { what: 'a list_changed notification', everyMs: 100 },
    );
    const { tools } = await connection.listTools();
    expect(tools.map((tool) => tool.name)).toContain('fresh');
    expect((await connection.callTool('fresh', {}, { signal: live, timeoutMs: 30_000 })).text).toBe('fresh!');
  });

  it('never logs header values', async () => {
    const lines: string[] = [];
    // A real pino logger writing into memory, at debug level so every line the client logs is seen.
    const logger = pino({ level: 'debug' }, { write: (line: string) => lines.push(line) });
    const server = await started(start({ auth: 'Bearer top-secret-value' }));
    const connection = await connectMcp(
      { url: server.url, headers: { Authorization: 'Bearer top-secret-value' } },
      { ...base, logger },
    );
    connections.push(connection);
    await connection.callTool('hang', {}, { signal: live, timeoutMs: 100 }).catch(() => undefined);
    const failed = await mcpFailure(
      connectMcp({ url: server.url, headers: { Authorization: 'Bearer other-secret' } }, { ...base, logger }),
    );
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.join('\n')).not.toMatch(/top-secret-value|other-secret/);
    expect(failed.message).not.toMatch(/other-secret/);
  });
});
