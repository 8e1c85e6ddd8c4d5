import { mkdtemp, rm, stat } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Resolver } from '../../lib/egress.ts';
import type { NetworkPolicy } from '../tool-config.ts';
import { type EgressProxy, parseAuthority, startEgressProxy } from './egress-proxy.ts';

const logger = pino({ level: 'silent' });

function resolverOf(table: Record<string, string[]>): Resolver & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    async lookup(hostname) {
      asked.push(hostname);
      const addresses = table[hostname];
      if (addresses === undefined) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
      return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    },
  };
}

/** Sends raw bytes to the proxy socket and returns everything it answers until it closes (or `untilBlank`). */
function raw(socketPath: string, request: string, untilHeaders = false): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ path: socketPath });
    let text = '';
    socket.on('data', (chunk) => {
      text += chunk.toString('utf8');
      if (untilHeaders && text.includes('\r\n\r\n')) {
        socket.destroy();
        resolve(text);
      }
    });
    socket.on('end', () => resolve(text));
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
    socket.write(request);
  });
}

/** An absolute-URI request through the proxy, as HTTP_PROXY clients send it. */
function viaProxy(socketPath: string, url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request({ socketPath, path: url, method: 'GET', headers: { host: new URL(url).host } });
    request.on('response', (response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => {
        body += chunk.toString('utf8');
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    request.on('error', reject);
    request.end();
  });
}

const allowAll: NetworkPolicy = {
  allow_network_egress: true,
  domain_allowlist: 'all_domains',
  additional_allowed_domains: [],
  allow_public_traffic: false,
};

let directory: string;
let proxies: EgressProxy[] = [];

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), 'agentry-proxy-test-'));
});
afterEach(async () => {
  for (const proxy of proxies) await proxy.close();
  proxies = [];
});
afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

async function proxyWith(
  policy: NetworkPolicy | null,
  resolver: Resolver,
  extra: { allowInsecure?: boolean; allowedPorts?: number[] } = {},
): Promise<EgressProxy> {
  const proxy = await startEgressProxy({
    socketPath: join(directory, `p${proxies.length}-${Date.now()}.sock`),
    policy,
    resolver,
    logger,
    allowInsecure: extra.allowInsecure ?? false,
    allowedPorts: extra.allowedPorts,
  });
  proxies.push(proxy);
  return proxy;
}

describe('the egress proxy refuses', () => {
  it('everything under the default policy (no egress), without resolving anything', async () => {
    const resolver = resolverOf({ 'example.com': ['93.184.216.34'] });
    const proxy = await proxyWith(null, resolver);
    const answer = await raw(proxy.socketPath, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 403 /);
    expect(answer).toContain("not allowed by the agent's network policy");
    expect(resolver.asked).toEqual([]);
    expect(proxy.refused).toEqual(['example.com:443']);
    expect((await stat(proxy.socketPath)).mode & 0o777).toBe(0o600);
  });

  it('hosts outside the allowlist, for CONNECT and for plain HTTP', async () => {
    const resolver = resolverOf({ 'ok.example.com': ['93.184.216.34'], 'no.example.com': ['93.184.216.34'] });
    const proxy = await proxyWith(
      { ...allowAll, domain_allowlist: 'none', additional_allowed_domains: ['ok.example.com'] },
      resolver,
    );
    const connect = await raw(proxy.socketPath, 'CONNECT no.example.com:443 HTTP/1.1\r\n\r\n');
    expect(connect).toMatch(/^HTTP\/1\.1 403 /);
    const plain = await viaProxy(proxy.socketPath, 'http://no.example.com/x');
    expect(plain.status).toBe(403);
    expect(plain.body).toContain('no.example.com is not allowed');
    expect(resolver.asked).toEqual([]);
  });

  it('private and loopback literals, and names that resolve to them (any answer counts)', async () => {
    const resolver = resolverOf({
      'evil.example.com': ['127.0.0.1'],
      'mixed.example.com': ['93.184.216.34', '10.0.0.5'],
      'metadata.example.com': ['169.254.169.254'],
      'mapped.example.com': ['::ffff:127.0.0.1'],
    });
    const proxy = await proxyWith(allowAll, resolver);
    for (const target of [
      '127.0.0.1:443',
      '10.1.2.3:443',
      '169.254.169.254:80',
      '[::1]:443',
      'localhost:443',
      'evil.example.com:443',
      'mixed.example.com:443',
      'metadata.example.com:80',
      'mapped.example.com:443',
    ]) {
      const answer = await raw(proxy.socketPath, `CONNECT ${target} HTTP/1.1\r\n\r\n`);
      expect(answer, target).toMatch(/^HTTP\/1\.1 403 /);
    }
    expect(resolver.asked).toEqual(
      expect.arrayContaining(['evil.example.com', 'mixed.example.com', 'metadata.example.com']),
    );
    const plain = await viaProxy(proxy.socketPath, 'http://169.254.169.254/latest/meta-data/');
    expect(plain.status).toBe(403);
  });

  it('loopback even when insecure destinations are allowed', async () => {
    const proxy = await proxyWith(allowAll, resolverOf({ 'evil.example.com': ['127.0.0.1'] }), { allowInsecure: true });
    const answer = await raw(proxy.socketPath, 'CONNECT evil.example.com:443 HTTP/1.1\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 403 /);
    expect(answer).toContain("this host's own");
    // Loopback and unspecified addresses in every IPv6 spelling that reaches them.
    for (const literal of [
      '[::ffff:127.0.0.1]',
      '[::ffff:7f00:1]',
      '[::ffff:0.0.0.0]',
      '[::ffff:0:7f00:1]',
      '[64:ff9b::7f00:1]',
      '[::]',
      '0.0.0.0',
    ]) {
      const connect = await raw(proxy.socketPath, `CONNECT ${literal}:443 HTTP/1.1\r\n\r\n`);
      expect(connect, literal).toMatch(/^HTTP\/1\.1 403 [\s\S]*this host's own/);
      expect((await viaProxy(proxy.socketPath, `http://${literal}/`)).status, literal).toBe(403);
    }
  });

  it('ports other than the allowed ones, malformed requests, and unresolvable names', async () => {
    const proxy = await proxyWith(allowAll, resolverOf({}));
    expect(await raw(proxy.socketPath, 'CONNECT example.com:22 HTTP/1.1\r\n\r\n')).toMatch(
      /^HTTP\/1\.1 403 [\s\S]*port 22/,
    );
    expect(await raw(proxy.socketPath, 'CONNECT example.com HTTP/1.1\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /);
    expect(await raw(proxy.socketPath, 'GET /relative HTTP/1.1\r\nHost: x\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /);
    expect(await raw(proxy.socketPath, 'CONNECT nowhere.example.com:443 HTTP/1.1\r\n\r\n')).toMatch(/^HTTP\/1\.1 502 /);
  });

  it('parses CONNECT authorities strictly', () => {
    expect(parseAuthority('example.com:443')).toEqual({ host: 'example.com', port: 443 });
    expect(parseAuthority('[2001:db8::1]:443')).toEqual({ host: '[2001:db8::1]', port: 443 });
    for (const bad of ['example.com', ':443', 'example.com:0', 'example.com:70000', 'a b:443', 'user@host:443']) {
      expect(parseAuthority(bad), bad).toBeNull();
    }
  });
});

/** A non-loopback IPv4 address of this machine, where services listening on all interfaces answer. */
const lanAddress = Object.values(networkInterfaces())
  .flat()
  .find((entry) => entry !== undefined && entry.family === 'IPv4' && !entry.internal)?.address;

// The allowed path (a public address, pinned) needs a public test host: test/sandbox-network.test.ts builds one.
describe.runIf(lanAddress !== undefined)('the egress proxy and this host', () => {
  let server: http.Server;
  let port: number;
  beforeAll(async () => {
    server = http.createServer((_request, response) => response.end('host service'));
    await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    port = address.port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("refuses this host's own interface addresses even when insecure destinations are allowed", async () => {
    const proxy = await proxyWith(allowAll, resolverOf({ 'self.example.com': [lanAddress ?? ''] }), {
      allowInsecure: true,
      allowedPorts: [port],
    });
    // Positive control: the service answers on that address.
    const direct = await fetch(`http://${lanAddress}:${port}/`);
    expect(await direct.text()).toBe('host service');
    expect((await viaProxy(proxy.socketPath, `http://self.example.com:${port}/`)).status).toBe(403);
    expect(await raw(proxy.socketPath, `CONNECT ${lanAddress}:${port} HTTP/1.1\r\n\r\n`)).toMatch(/^HTTP\/1\.1 403 /);
  });
});
