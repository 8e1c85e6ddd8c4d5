/** The MCP connection pool against real servers: sharing, reconnecting, endpoint changes, listeners, shutdown. */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createEgressFetch } from '../src/lib/egress-fetch.ts';
import { isMcpError } from '../src/tools/mcp/client.ts';
import { createMcpPool, type McpPool } from '../src/tools/mcp/pool.ts';
import { waitUntil } from './helpers/fixtures.ts';
import { type McpTestServer, startLegacyMcpServer, startModernMcpServer } from './helpers/mcp-servers.ts';

const fetch = createEgressFetch({ allowInsecure: true });
const live = new AbortController().signal;
const servers: McpTestServer[] = [];
const pools: McpPool[] = [];

function pool(idleCloseMs?: number): McpPool {
  const created = createMcpPool({ fetch, requestTimeoutMs: 30_000, idleCloseMs });
  pools.push(created);
  return created;
}

async function started(server: Promise<McpTestServer>): Promise<McpTestServer> {
  const running = await server;
  servers.push(running);
  return running;
}

afterEach(async () => {
  await Promise.all(pools.splice(0).map((each) => each.close()));
  await Promise.all(servers.splice(0).map((server) => server.close()));
});
afterAll(() => fetch.close());

describe('createMcpPool', () => {
  it('shares one connection per key, connecting once for concurrent gets', async () => {
    const server = await started(startModernMcpServer({}));
    const connections = pool();
    const endpoint = { url: server.url, headers: { Authorization: 'Bearer a' } };
    const [first, second, third] = await Promise.all([
      connections.get('srv_1', endpoint),
      connections.get('srv_1', endpoint),
      connections.get('srv_1', endpoint),
    ]);
    expect(second).toBe(first);
    expect(third).toBe(first);
    expect(await connections.get('srv_1', endpoint)).toBe(first);
    expect(server.state.methods.filter((method) => method === 'server/discover')).toHaveLength(1);
    expect(connections.protocolOf('srv_1')).toBe('2026-07-28');
    const other = await connections.get('srv_2', endpoint);
    expect(other).not.toBe(first);
  });

  it('opens a new connection when the endpoint changes, closing the old one', async () => {
    const server = await started(startModernMcpServer({}));
    const connections = pool();
    const old = await connections.get('srv', { url: server.url, headers: { Authorization: 'Bearer old' } });
    const renewed = await connections.get('srv', { url: server.url, headers: { Authorization: 'Bearer new' } });
    expect(renewed).not.toBe(old);
    await server.waitFor(() => old.closed);
    const result = await renewed.callTool('whoami', {}, { signal: live, timeoutMs: 30_000 });
    expect(result.text).toBe('Bearer new');
  });

  it('reconnects after the server lost the session, using the protocol that worked, and says tools may have changed', async () => {
    const first = await startLegacyMcpServer({});
    const port = Number(new URL(first.url).port);
    const endpoint = { url: first.url, headers: {} };
    const connections = pool();
    let changes = 0;
    connections.onToolsChanged('legacy', () => {
      changes += 1;
    });
    const connection = await connections.get('legacy', endpoint);
    expect(connection.protocol).toBe('streamable-http-2025');
    await first.close();
    const restarted = await started(startLegacyMcpServer({ port }));
    await expect(connection.callTool('echo', { text: 'x' }, { signal: live, timeoutMs: 30_000 })).rejects.toMatchObject(
      {
        code: 'unreachable',
      },
    );
    const fresh = await connections.get('legacy', endpoint);
    expect(fresh).not.toBe(connection);
    expect(fresh.protocol).toBe('streamable-http-2025');
    // The refused call, then the stored protocol as the hint: straight to initialize, no probe.
    expect(restarted.state.methods.slice(0, 2)).toEqual(['tools/call', 'initialize']);
    expect(restarted.state.methods).not.toContain('server/discover');
    expect(changes).toBe(1);
    expect((await fresh.callTool('echo', { text: 'back' }, { signal: live, timeoutMs: 30_000 })).text).toBe('back');
  });

  it('passes list_changed to key listeners, and stops after unsubscribing', async () => {
    const server = await started(startModernMcpServer({}));
    const connections = pool();
    await connections.get('srv', { url: server.url, headers: {} });
    let changes = 0;
    const stop = connections.onToolsChanged('srv', () => {
      changes += 1;
    });
    // The notification stream opens asynchronously: announce until one announcement arrives.
    await waitUntil(
      async () => {
        if (changes > 0) return true;
        server.removeTool('echo');
        return null;
      },
      { what: 'a list_changed notification', everyMs: 100 },
    );
    stop();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const seen = changes;
    server.removeTool('add');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(changes).toBe(seen);
  });

  it("keeps the key's one watcher across uses, the latest set, and drops it with the connection", async () => {
    const server = await started(startModernMcpServer({}));
    const connections = pool();
    const endpoint = { url: server.url, headers: {} };
    const seen = { first: 0, second: 0 };
    connections.watch('srv', () => {
      seen.first += 1;
    });
    await connections.get('srv', endpoint);
    connections.watch('srv', () => {
      seen.second += 1;
    });
    await waitUntil(
      async () => {
        if (seen.second > 0) return true;
        server.removeTool('echo');
        return null;
      },
      { what: 'a list_changed notification', everyMs: 100 },
    );
    expect(seen.first).toBe(0);
    await connections.evict('srv');
    await connections.get('srv', endpoint);
    const before = { ...seen };
    // No watcher now: the new connection's announcements reach nobody.
    for (const name of ['add', 'hang', 'slow']) {
      server.removeTool(name);
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    expect(seen).toEqual(before);
  });

  it('evicts a key and, once closed, refuses new gets', async () => {
    const server = await started(startModernMcpServer({}));
    const connections = pool();
    const endpoint = { url: server.url, headers: {} };
    const first = await connections.get('srv', endpoint);
    await connections.evict('srv');
    expect(first.closed).toBe(true);
    expect(connections.protocolOf('srv')).toBeUndefined();
    const second = await connections.get('srv', endpoint);
    expect(second).not.toBe(first);
    await connections.close();
    expect(second.closed).toBe(true);
    const error = await connections.get('srv', endpoint).catch((reason: unknown) => reason);
    expect(isMcpError(error) && error.code).toBe('unreachable');
  });

  it('closes a connection once idle, never one with a call in progress, and connects again on the next get', async () => {
    const server = await started(startModernMcpServer({}));
    const connections = pool(300);
    const endpoint = { url: server.url, headers: {} };
    const busy = await connections.get('srv', endpoint);
    // A call three times as long as the idle bound: the connection is in use all along.
    const call = busy.callTool('slow', { ms: 900, steps: 3 }, { signal: live, timeoutMs: 30_000 });
    expect((await call).text).toBe('done after 3 steps');
    expect(busy.closed).toBe(false);
    await server.waitFor(() => busy.closed, 5_000);
    expect(connections.protocolOf('srv')).toBe('2026-07-28');
    const fresh = await connections.get('srv', endpoint);
    expect(fresh).not.toBe(busy);
    expect((await fresh.callTool('whoami', {}, { signal: live, timeoutMs: 30_000 })).text).toBeDefined();
  });

  it('lets a call in progress finish on a connection it lets go of, then closes it', async () => {
    const server = await started(startModernMcpServer({}));
    const connections = pool();
    const endpoint = { url: server.url, headers: { Authorization: 'Bearer old' } };
    const old = await connections.get('srv', endpoint);
    const call = old.callTool('slow', { ms: 600, steps: 3 }, { signal: live, timeoutMs: 30_000 });
    // A changed header (a rotated token) and an eviction both let go of it while the call runs.
    const renewed = await connections.get('srv', { ...endpoint, headers: { Authorization: 'Bearer new' } });
    const evicted = connections.evict('srv');
    expect(old.closed).toBe(false);
    expect((await call).text).toBe('done after 3 steps');
    await server.waitFor(() => old.closed);
    await evicted;
    expect(renewed.closed).toBe(true);
  });

  it('evicts every key of a prefix, and only those', async () => {
    const server = await started(startModernMcpServer({}));
    const connections = pool();
    const endpoint = { url: server.url, headers: {} };
    const [a, b, other] = await Promise.all([
      connections.get('connector:c1:x', endpoint),
      connections.get('connector:c1:x:sampling', { ...endpoint, sampling: true }),
      connections.get('connector:c10:x', endpoint),
    ]);
    await connections.evictPrefix('connector:c1:');
    expect([a.closed, b.closed, other.closed]).toEqual([true, true, false]);
    expect(await connections.get('connector:c10:x', endpoint)).toBe(other);
  });

  it('does not keep a failed connect: the next get tries again', async () => {
    const server = await started(startLegacyMcpServer({ auth: 'Bearer right' }));
    const connections = pool();
    await expect(connections.get('srv', { url: server.url, headers: {} })).rejects.toMatchObject({
      code: 'auth_failed',
    });
    const connection = await connections.get('srv', { url: server.url, headers: { Authorization: 'Bearer right' } });
    expect(connection.protocol).toBe('streamable-http-2025');
  });
});
