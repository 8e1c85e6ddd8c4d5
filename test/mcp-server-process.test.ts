/** The test MCP servers run as their own process: flags and env honoured, state readable, counters kept. */
import { afterAll, describe, expect, it } from 'vitest';
import { createEgressFetch } from '../src/lib/egress-fetch.ts';
import { connectMcp } from '../src/tools/mcp/client.ts';
import { type McpServerProcess, startMcpServerProcess } from './helpers/mcp-server-process.ts';

const fetch = createEgressFetch({ allowInsecure: true });
const live = new AbortController().signal;
const processes: McpServerProcess[] = [];

afterAll(async () => {
  await Promise.all(processes.map((each) => each.stop()));
  await fetch.close();
});

describe('mcp-server-main', () => {
  it.each([
    ['modern', '2026-07-28'],
    ['legacy', 'streamable-http-2025'],
    ['sse', 'sse-2024'],
  ] as const)('serves a %s server whose counters outlive its clients', async (kind, protocol) => {
    const server = await startMcpServerProcess(['--kind', kind, '--name', `proc-${kind}`, '--only', 'count,whoami'], {
      MCP_TEST_AUTH: 'Bearer from-env',
    });
    processes.push(server);
    const endpoint = { url: server.url, headers: { Authorization: 'Bearer from-env' } };
    for (const expected of ['1', '2']) {
      // A new connection each time, as after a restart of the process that talks to the server.
      const connection = await connectMcp(endpoint, { fetch, requestTimeoutMs: 30_000 });
      expect(connection.protocol).toBe(protocol);
      expect((await connection.listTools()).tools.map((tool) => tool.name)).toEqual(['count', 'whoami']);
      const result = await connection.callTool(
        'count',
        { key: 'run_1' },
        {
          signal: live,
          timeoutMs: 30_000,
          meta: { 'agentry/call_id': `call_${expected}` },
        },
      );
      expect(result.text).toBe(expected);
      await connection.close();
    }
    const state = await server.state();
    expect(state.counts).toEqual({ run_1: 2 });
    expect(state.calls.map((call) => call.meta['agentry/call_id'])).toEqual(['call_1', 'call_2']);
    await expect(
      connectMcp({ url: server.url, headers: {} }, { fetch, requestTimeoutMs: 30_000 }),
    ).rejects.toMatchObject({
      code: 'auth_failed',
    });
    await server.stop();
    expect(server.child.exitCode).toBe(0);
  });
});
