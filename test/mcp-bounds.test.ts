/**
 * What an MCP server can make Agentry read and offer: a tool result is read only up to the bound (the cut is in the
 * transport, before parsing: a 256 MiB result barely moves this process's memory, and the server sees its writes
 * stop), as JSON or as an event stream, and the call fails at once with `too_large`; a tool list is bounded in
 * count and size, the connector says so in `last_error` (`tools_truncated`) and every accepted message of an
 * agent using it carries the warning. The server is a hostile one in its own process (helpers/mcp-flood-server.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEgressFetch } from '../src/lib/egress-fetch.ts';
import { MAX_JSON_DEPTH } from '../src/tools/mcp/bounded-response.ts';
import { connectMcp, isMcpError, type McpConnection } from '../src/tools/mcp/client.ts';
import { MAX_MCP_TOOL_LIST_CHARS, MAX_MCP_TOOLS } from '../src/tools/mcp/tool-list-bounds.ts';
import { flows } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type FloodServer, startFloodServer } from './helpers/mcp-flood-server.ts';
import { startLegacyMcpServer, startModernMcpServer } from './helpers/mcp-servers.ts';

const MIB = 1024 * 1024;
const fetch = createEgressFetch({ allowInsecure: true });
let flood: FloodServer;

beforeAll(async () => {
  flood = await startFloodServer();
});
afterAll(async () => {
  flood?.stop();
  await fetch.close();
});

async function connect(query: Record<string, string | number>): Promise<McpConnection> {
  return connectMcp(
    { url: flood.url(query), headers: {} },
    { fetch, requestTimeoutMs: 10_000, maxResponseBytes: MIB, prefer: 'streamable-http-2025' },
  );
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => null,
    (reason: unknown) => reason,
  );
}

const call = { signal: new AbortController().signal, timeoutMs: 60_000 };

describe('MCP answers are read only up to the bound', () => {
  it.each([
    ['JSON', '0'],
    ['an event stream', '1'],
  ])('a 256 MiB tool result as %s fails with too_large without being read', async (_label, sse) => {
    const connection = await connect({ mb: 256, sse });
    try {
      const before = process.memoryUsage().rss;
      const error = await failure(connection.callTool('huge', {}, call));
      const grown = process.memoryUsage().rss - before;
      expect(isMcpError(error) && error.code, String(error)).toBe('too_large');
      expect(String(error)).toContain('larger than 1048576 bytes');
      expect(grown).toBeLessThan(64 * MIB);
      expect(await flood.sent()).toBeLessThan(128 * MIB);
    } finally {
      await connection.close();
    }
  });

  it.each([
    ['2026-07-28', () => startModernMcpServer({})],
    ['Streamable HTTP 2025', () => startLegacyMcpServer({})],
    ['HTTP+SSE', () => startLegacyMcpServer({ transport: 'sse' })],
  ])(
    'fails an oversized result of a %s server with too_large, and serves one under the bound',
    async (_label, start) => {
      const server = await start();
      const connection = await connectMcp(
        { url: server.url, headers: {} },
        { fetch, requestTimeoutMs: 10_000, maxResponseBytes: 256 * 1024 },
      );
      try {
        const small = await connection.callTool('echo', { text: 'y'.repeat(1000) }, call);
        expect(small.text).toBe('y'.repeat(1000));
        const error = await failure(connection.callTool('echo', { text: 'y'.repeat(512 * 1024) }, call));
        expect(isMcpError(error) && error.code, String(error)).toBe('too_large');
      } finally {
        await connection.close();
        await server.close();
      }
    },
  );

  it.each([
    ['JSON', '0'],
    ['an event stream', '1'],
  ])('fails a result nested deeper than the bound, as %s, and reads one within it', async (_label, sse) => {
    const deep = await connect({ shape: 'deep', n: 400_000, sse });
    const shallow = await connect({ shape: 'deep', n: MAX_JSON_DEPTH - 8, sse });
    try {
      const error = await failure(deep.callTool('deep', {}, call));
      expect(isMcpError(error) && error.code, String(error)).toBe('too_large');
      expect(String(error)).toContain(`deeper than ${MAX_JSON_DEPTH} levels`);
      const result = await shallow.callTool('shallow', {}, call);
      expect(result.text).toBe('ok');
      let levels = 0;
      for (let value = (result.structuredContent as { v: unknown }).v; Array.isArray(value); value = value[0]) levels++;
      expect(levels).toBe(MAX_JSON_DEPTH - 8);
    } finally {
      await deep.close();
      await shallow.close();
    }
  });

  it('reads a result under the bound whole', async () => {
    const connection = await connect({ mb: 0 });
    try {
      const result = await connection.callTool('small', {}, call);
      expect(result.text).toBe('');
      expect(result.isError).toBe(false);
    } finally {
      await connection.close();
    }
  });

  it('bounds a tool list across its pages', async () => {
    const connection = await connect({ tools: 2000, desc: 1000, page: 100 });
    try {
      const error = await failure(connection.listTools());
      expect(isMcpError(error) && error.code, String(error)).toBe('too_large');
      expect(String(error)).toContain("the server's tool list is larger than");
    } finally {
      await connection.close();
    }
  });

  it('offers the first tools that fit the count and size bounds, saying how many the server listed', async () => {
    const many = await connect({ tools: 300, page: 50 });
    const large = await connect({ tools: 100, desc: 8000 });
    try {
      const counted = await many.listTools();
      expect(counted.tools).toHaveLength(MAX_MCP_TOOLS);
      expect(counted.tools[0]?.name).toBe('tool_0');
      expect(counted.note).toContain(`lists 300 tools`);
      const sized = await large.listTools();
      expect(sized.tools.length).toBe(Math.floor(MAX_MCP_TOOL_LIST_CHARS / JSON.stringify(sized.tools[0]).length));
      expect(sized.note).toContain('lists 100 tools');
      const whole = await connect({ tools: 3 });
      expect(await whole.listTools()).toMatchObject({ note: null, tools: [{}, {}, {}] });
      await whole.close();
    } finally {
      await many.close();
      await large.close();
    }
  });
});

describe.each(dialects())('a connector with too many tools (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h);
  beforeAll(async () => {
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' });
  });
  afterAll(() => h?.close());

  it('keeps the bounded list, notes it on the connector and warns every accepted message', async () => {
    const created = await h.request('POST', '/v1/mcp_servers', {
      body: { name: 'sprawl', url: flood.url({ tools: 300 }) },
    });
    expect(created.status, created.text).toBe(201);
    const connector = json(created);
    expect(connector.tools).toHaveLength(MAX_MCP_TOOLS);
    expect(connector.last_error).toMatchObject({ code: 'tools_truncated' });
    expect(connector.last_error.message).toContain('the server lists 300 tools');
    const refreshed = await h.request('POST', `/v1/mcp_servers/${connector.id}/refresh`);
    expect(json(refreshed).last_error).toMatchObject({ code: 'tools_truncated' });

    const agentId = await flow.createAgent({ mcpServers: [{ kind: 'custom', serverId: connector.id }] });
    const { accepted, message } = await flow.turn(agentId, 'hello');
    expect(message.status).toBe('completed');
    expect(accepted.warnings).toEqual([
      { code: 'tools_truncated', message: expect.stringContaining('MCP server "sprawl": the server lists 300 tools') },
    ]);
  });
});
