import http from 'node:http';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EgressError, postPinned, type Resolver, resolveDestination } from './egress.ts';
import { isPrivateAddress, publicHttpsUrlProblem } from './url-policy.ts';

/** A resolver that knows only the names it is given; anything else fails like NXDOMAIN. */
function fakeResolver(table: Record<string, string[]>): Resolver & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    async lookup(hostname) {
      asked.push(hostname);
      const addresses = table[hostname];
      if (addresses === undefined)
        throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
      return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    },
  };
}

function portOf(server: http.Server | tls.Server): number {
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('server is not listening on TCP');
  return address.port;
}

async function egressFailure(promise: Promise<unknown>): Promise<EgressError> {
  const error = await promise.then(
    () => null,
    (reason: unknown) => reason,
  );
  if (!(error instanceof EgressError)) throw new Error(`expected an EgressError, got ${String(error)}`);
  return error;
}

const secure = { allowInsecure: false } as const;

describe('isPrivateAddress and resolveDestination over literal addresses', () => {
  const blocked: [string, string][] = [
    ['10/8', '10.1.2.3'],
    ['172.16/12 low', '172.16.0.1'],
    ['172.16/12 high', '172.31.255.254'],
    ['192.168/16', '192.168.1.1'],
    ['127/8', '127.0.0.1'],
    ['127/8 other', '127.200.0.9'],
    ['0/8', '0.0.0.0'],
    ['0/8 other', '0.1.2.3'],
    ['169.254/16', '169.254.1.1'],
    ['cloud metadata', '169.254.169.254'],
    ['CGNAT 100.64/10 low', '100.64.0.1'],
    ['CGNAT 100.64/10 high', '100.127.255.254'],
    ['224/4 multicast', '224.0.0.1'],
    ['239 multicast', '239.255.255.250'],
    ['240/4 reserved', '240.0.0.1'],
    ['broadcast', '255.255.255.255'],
    ['documentation', '192.0.2.10'],
    ['IPv6 loopback', '::1'],
    ['IPv6 unspecified', '::'],
    ['fc00::/7', 'fc00::1'],
    ['fd00::/8 (AWS IPv6 metadata)', 'fd00:ec2::254'],
    ['fe80::/10', 'fe80::1'],
    ['fe80::/10 with zone', 'fe80::1%eth0'],
    ['ff00::/8', 'ff02::1'],
    ['IPv6 documentation', '2001:db8::1'],
    ['IPv4-mapped dotted', '::ffff:10.0.0.1'],
    ['IPv4-mapped hex', '::ffff:a00:1'],
    ['IPv4-mapped loopback', '::ffff:127.0.0.1'],
    ['IPv4-mapped loopback hex', '::ffff:7f00:1'],
    ['IPv4-mapped metadata', '::ffff:169.254.169.254'],
    ['IPv4-translated', '::ffff:0:10.0.0.1'],
    ['NAT64', '64:ff9b::a00:1'],
    ['NAT64 dotted', '64:ff9b::127.0.0.1'],
    ['6to4 of loopback', '2002:7f00:1::1'],
    ['IPv4-compatible', '::7f00:1'],
    ['Teredo', '2001:0:4136:e378::1'],
  ];
  it.each(blocked)('%s: %s is private and refused', async (_label, address) => {
    expect(isPrivateAddress(address)).toBe(true);
    const host = address.includes(':') ? `[${address.replace(/%.*$/, '')}]` : address;
    const error = await egressFailure(resolveDestination(`https://${host}/hook`, secure));
    expect(error.code).toBe('destination_blocked');
    expect(error.retriable).toBe(false);
  });

  it.each([
    ['decimal', 'https://2130706433/'],
    ['octal', 'https://0177.0.0.1/'],
    ['hex', 'https://0x7f000001/'],
    ['hex dotted', 'https://0x7f.1/'],
    ['short', 'https://127.1/'],
    ['decimal 10/8', 'https://167772161/'],
    ['IPv4-mapped in brackets', 'https://[::ffff:127.0.0.1]/'],
    ['trailing dot', 'https://127.0.0.1./'],
  ])('%s IPv4 form %s is normalised and refused', async (_label, url) => {
    const error = await egressFailure(resolveDestination(url, secure));
    expect(error.code).toBe('destination_blocked');
  });

  it.each([
    ['8.8.8.8', 4],
    ['1.1.1.1', 4],
    ['2606:4700:4700::1111', 6],
    ['::ffff:8.8.8.8', 6],
    ['64:ff9b::808:808', 6],
  ] as const)('public %s passes without asking a resolver', async (address, family) => {
    expect(isPrivateAddress(address)).toBe(false);
    const resolver = fakeResolver({});
    const host = family === 6 ? `[${address}]` : address;
    const resolved = await resolveDestination(`https://${host}/hook`, { allowInsecure: false, resolver });
    expect(resolved.family).toBe(family);
    expect(isPrivateAddress(resolved.address)).toBe(false);
    expect(resolver.asked).toEqual([]);
  });

  it('treats names as not being addresses', () => {
    expect(isPrivateAddress('example.com')).toBe(false);
  });
});

describe('resolveDestination with names', () => {
  const resolver = fakeResolver({
    'evil.example.com': ['10.0.0.5'],
    'mixed.example.com': ['93.184.215.14', '192.168.0.7'],
    'mapped.example.com': ['::ffff:127.0.0.1'],
    'loopback.example.com': ['93.184.215.14', '127.0.0.1'],
    'meta.example.com': ['169.254.169.254'],
    'meta6.example.com': ['fd00:ec2::254'],
    'good.example.com': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
    'empty.example.com': [],
  });

  it.each(['evil.example.com', 'mixed.example.com', 'mapped.example.com', 'meta.example.com', 'meta6.example.com'])(
    'refuses %s, which resolves to a private address',
    async (name) => {
      const error = await egressFailure(resolveDestination(`https://${name}/hook`, { allowInsecure: false, resolver }));
      expect(error.code).toBe('destination_blocked');
      expect(error.retriable).toBe(false);
    },
  );

  it('returns the first address of a public name', async () => {
    const resolved = await resolveDestination('https://good.example.com:8443/hook?x=1', {
      allowInsecure: false,
      resolver,
    });
    expect(resolved).toEqual({
      url: new URL('https://good.example.com:8443/hook?x=1'),
      address: '93.184.215.14',
      family: 4,
    });
  });

  it('refuses internal names before resolving them', async () => {
    const local = fakeResolver({ 'metadata.google.internal': ['8.8.8.8'], localhost: ['8.8.8.8'] });
    for (const url of ['https://metadata.google.internal/', 'https://localhost/', 'https://intranet/']) {
      const error = await egressFailure(resolveDestination(url, { allowInsecure: false, resolver: local }));
      expect(error.code).toBe('destination_blocked');
    }
    expect(local.asked).toEqual([]);
  });

  it('uses the system resolver by default, which reads /etc/hosts', async () => {
    const resolved = await resolveDestination('http://localhost:8080/', { allowInsecure: true });
    expect(['127.0.0.1', '::1']).toContain(resolved.address);
    expect(resolved.family).toBe(resolved.address === '::1' ? 6 : 4);
  });

  it('maps resolution failures to a retriable dns_failed', async () => {
    for (const name of ['nowhere.example.com', 'empty.example.com']) {
      const error = await egressFailure(resolveDestination(`https://${name}/`, { allowInsecure: false, resolver }));
      expect(error.code).toBe('dns_failed');
      expect(error.retriable).toBe(true);
    }
  });

  it.each([
    ['plain http', 'http://good.example.com/hook', 'must use https'],
    ['another scheme', 'ftp://good.example.com/', 'must use https'],
    ['credentials', 'https://user:pass@good.example.com/', 'must not embed credentials'],
    ['a username', 'https://user@good.example.com/', 'must not embed credentials'],
    ['a fragment', 'https://good.example.com/hook#part', 'must not have a fragment'],
    ['an empty fragment', 'https://good.example.com/hook#', 'must not have a fragment'],
    ['no URL at all', 'good.example.com/hook', 'must be an absolute URL'],
  ])('refuses %s as invalid_url', async (_label, url, message) => {
    const error = await egressFailure(resolveDestination(url, { allowInsecure: false, resolver }));
    expect(error.code).toBe('invalid_url');
    expect(error.message).toContain(message);
    expect(publicHttpsUrlProblem(url, false)?.startsWith(message)).toBe(true);
    // Refusals a development setup meets name the setting that lifts them; the others do not.
    expect(publicHttpsUrlProblem(url, false)?.includes('AGENTRY_ALLOW_INSECURE_DESTINATIONS=true')).toBe(
      message === 'must use https',
    );
  });

  it('with allowInsecure allows http and private addresses, but never credentials or fragments', async () => {
    const insecure = { allowInsecure: true, resolver };
    await expect(resolveDestination('http://evil.example.com/hook', insecure)).resolves.toMatchObject({
      address: '10.0.0.5',
    });
    await expect(resolveDestination('http://127.0.0.1:8080/', insecure)).resolves.toMatchObject({
      address: '127.0.0.1',
      family: 4,
    });
    await expect(resolveDestination('http://[::1]:8080/', insecure)).resolves.toMatchObject({
      address: '::1',
      family: 6,
    });
    expect((await egressFailure(resolveDestination('http://u:p@127.0.0.1/', insecure))).code).toBe('invalid_url');
    expect((await egressFailure(resolveDestination('http://127.0.0.1/#x', insecure))).code).toBe('invalid_url');
  });

  it.each([
    'http://127.0.0.1:8080/',
    'http://0.0.0.0/',
    'http://[::1]/',
    'http://[::]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::ffff:7f00:1]/',
    'http://[::ffff:0.0.0.0]/',
    'http://[64:ff9b::7f00:1]/',
    'http://[2002:7f00:1::]/',
    'http://loopback.example.com/',
    'http://mapped.example.com/',
  ])("with allowInsecure and refuseHostLocal still refuses this host's own %s", async (url) => {
    const rules = { allowInsecure: true, refuseHostLocal: true, resolver };
    const error = await egressFailure(resolveDestination(url, rules));
    expect(error.code).toBe('destination_blocked');
    expect(error.message).toContain("this host's own address");
  });

  it('with allowInsecure and refuseHostLocal lets private addresses through', async () => {
    const rules = { allowInsecure: true, refuseHostLocal: true, resolver };
    await expect(resolveDestination('http://evil.example.com/', rules)).resolves.toMatchObject({ address: '10.0.0.5' });
  });

  it("refuses this host's interface addresses, public or not, by default and with refuseHostLocal", async () => {
    const hostAddresses = { has: (address: string) => address === '93.184.215.14' };
    for (const rules of [
      { allowInsecure: false, resolver, hostAddresses },
      { allowInsecure: true, refuseHostLocal: true, resolver, hostAddresses },
    ]) {
      for (const url of ['http://good.example.com/', 'http://93.184.215.14/', 'http://[::ffff:5db8:d70e]/']) {
        const error = await egressFailure(resolveDestination(url.replace('http:', 'https:'), rules));
        expect(error.code, url).toBe('destination_blocked');
        expect(error.message).toContain("this host's own address");
      }
    }
    // Development (allowInsecure alone) lets a local receiver through.
    await expect(
      resolveDestination('http://good.example.com/', { allowInsecure: true, resolver, hostAddresses }),
    ).resolves.toMatchObject({ address: '93.184.215.14' });
  });
});

interface Hit {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A real receiver on 127.0.0.1 that records every request it sees. */
async function receiver(
  handle: (request: http.IncomingMessage, response: http.ServerResponse) => void,
): Promise<{ server: http.Server; port: number; hits: Hit[] }> {
  const hits: Hit[] = [];
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      hits.push({
        method: request.method ?? '',
        url: request.url ?? '',
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      handle(request, response);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: portOf(server), hits };
}

function close(server: http.Server | tls.Server): Promise<void> {
  if (server instanceof http.Server) server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

describe('postPinned', () => {
  let echo: Awaited<ReturnType<typeof receiver>>;
  let redirectTarget: Awaited<ReturnType<typeof receiver>>;
  let redirecting: Awaited<ReturnType<typeof receiver>>;
  let silent: Awaited<ReturnType<typeof receiver>>;
  let large: Awaited<ReturnType<typeof receiver>>;
  let endless: Awaited<ReturnType<typeof receiver>>;
  /** Bytes the endless receiver has written. */
  let poured = 0;

  beforeAll(async () => {
    echo = await receiver((request, response) => {
      response.writeHead(201, { 'content-type': 'text/plain', 'x-seen-method': request.method ?? '' });
      response.end('accepted');
    });
    redirectTarget = await receiver((_request, response) => response.end('followed'));
    redirecting = await receiver((_request, response) => {
      response.writeHead(302, { location: `http://127.0.0.1:${redirectTarget.port}/elsewhere` });
      response.end();
    });
    silent = await receiver(() => {
      // Never answers.
    });
    large = await receiver((_request, response) => {
      response.writeHead(200);
      response.end('x'.repeat(200_000));
    });
    endless = await receiver((_request, response) => {
      response.writeHead(200);
      const chunk = Buffer.alloc(64 * 1024, 'x');
      const pour = () => {
        while (!response.destroyed) {
          poured += chunk.length;
          if (!response.write(chunk)) return void response.once('drain', pour);
        }
      };
      pour();
    });
  });

  afterAll(async () => {
    await Promise.all([echo, redirectTarget, redirecting, silent, large, endless].map(({ server }) => close(server)));
  });

  const insecure = { allowInsecure: true, timeoutMs: 30_000 } as const;

  it('posts the body and headers and returns status, headers and body', async () => {
    const body = JSON.stringify({ type: 'turn.completed', note: 'héllo' });
    const response = await postPinned(`http://127.0.0.1:${echo.port}/hooks/a?x=1`, body, {
      ...insecure,
      headers: { 'content-type': 'application/json', 'webhook-id': 'msg_1', 'Content-Length': '1' },
    });
    expect(response.status).toBe(201);
    expect(response.body).toBe('accepted');
    expect(response.headers['x-seen-method']).toBe('POST');
    expect(response.address).toBe('127.0.0.1');
    expect(response.durationMs).toBeGreaterThanOrEqual(0);
    const hit = echo.hits.at(-1);
    expect(hit?.method).toBe('POST');
    expect(hit?.url).toBe('/hooks/a?x=1');
    expect(hit?.body).toBe(body);
    expect(hit?.headers['content-type']).toBe('application/json');
    expect(hit?.headers['webhook-id']).toBe('msg_1');
    expect(hit?.headers['content-length']).toBe(String(Buffer.byteLength(body)));
  });

  it('accepts a Uint8Array body', async () => {
    const bytes = new TextEncoder().encode('raw bytes');
    const response = await postPinned(`http://127.0.0.1:${echo.port}/bytes`, bytes, { ...insecure, headers: {} });
    expect(response.status).toBe(201);
    expect(echo.hits.at(-1)?.body).toBe('raw bytes');
  });

  it('returns a 302 as is and never follows it', async () => {
    const response = await postPinned(`http://127.0.0.1:${redirecting.port}/`, '{}', { ...insecure, headers: {} });
    expect(response.status).toBe(302);
    expect(response.headers.location).toBe(`http://127.0.0.1:${redirectTarget.port}/elsewhere`);
    expect(redirecting.hits).toHaveLength(1);
    expect(redirectTarget.hits).toHaveLength(0);
  });

  it('keeps at most maxResponseBytes of the body without failing', async () => {
    const response = await postPinned(`http://127.0.0.1:${large.port}/`, '{}', {
      ...insecure,
      headers: {},
      maxResponseBytes: 1000,
    });
    expect(response.status).toBe(200);
    expect(response.body).toBe('x'.repeat(1000));
    const whole = await postPinned(`http://127.0.0.1:${large.port}/`, '{}', { ...insecure, headers: {} });
    expect(whole.body).toHaveLength(64 * 1024);
  });

  it('answers as soon as it has maxResponseBytes of a body that never ends, and reads no more', async () => {
    // Webhook attempts keep 1 KiB of the receiver's answer this way.
    const response = await postPinned(`http://127.0.0.1:${endless.port}/`, '{}', {
      allowInsecure: true,
      timeoutMs: 30_000,
      headers: {},
      maxResponseBytes: 1024,
    });
    expect(response.status).toBe(200);
    expect(response.body).toBe('x'.repeat(1024));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(poured).toBeLessThan(64 * 1024 * 1024);
  });

  it('times out a receiver that never answers within timeoutMs', async () => {
    const started = performance.now();
    const error = await egressFailure(
      postPinned(`http://127.0.0.1:${silent.port}/`, '{}', { allowInsecure: true, timeoutMs: 300, headers: {} }),
    );
    const elapsed = performance.now() - started;
    expect(error.code).toBe('timeout');
    expect(error.retriable).toBe(true);
    expect(elapsed).toBeGreaterThanOrEqual(290);
    // The receiver never answers: only timeoutMs ends the exchange (the bound is room for a busy machine).
    expect(elapsed).toBeLessThan(30_000);
    expect(silent.hits).toHaveLength(1);
  });

  it('times out a resolver that never answers', async () => {
    const hanging: Resolver = { lookup: () => new Promise(() => undefined) };
    const started = performance.now();
    const error = await egressFailure(
      postPinned('https://slow.example.com/', '{}', { ...secure, resolver: hanging, timeoutMs: 200, headers: {} }),
    );
    expect(error.code).toBe('timeout');
    // The lookup never answers: only timeoutMs ends it (the bound is room for a busy machine).
    expect(performance.now() - started).toBeLessThan(30_000);
  });

  it('honours an abort signal, before and during the exchange', async () => {
    const url = `http://127.0.0.1:${silent.port}/`;
    const before = await egressFailure(
      postPinned(url, '{}', { ...insecure, headers: {}, signal: AbortSignal.abort(new Error('stop')) }),
    );
    expect(before.code).toBe('aborted');
    expect(before.retriable).toBe(false);
    const seen = silent.hits.length;
    const started = performance.now();
    const during = await egressFailure(
      postPinned(url, '{}', { ...insecure, headers: {}, signal: AbortSignal.timeout(100) }),
    );
    expect(during.code).toBe('aborted');
    // The receiver never answers: only the signal ends the exchange (the bound is room for a busy machine).
    expect(performance.now() - started).toBeLessThan(30_000);
    expect(silent.hits).toHaveLength(seen + 1);
  });

  it('maps a closed port to a retriable connect_failed', async () => {
    const closed = await receiver(() => undefined);
    await close(closed.server);
    const error = await egressFailure(
      postPinned(`http://127.0.0.1:${closed.port}/`, '{}', { ...insecure, headers: {} }),
    );
    expect(error.code).toBe('connect_failed');
    expect(error.retriable).toBe(true);
    expect(error.message).toContain('ECONNREFUSED');
  });

  it('refuses 127.0.0.1 before connecting when insecure destinations are not allowed', async () => {
    const seen = echo.hits.length;
    for (const url of [`https://127.0.0.1:${echo.port}/`, `http://127.0.0.1:${echo.port}/`]) {
      const error = await egressFailure(postPinned(url, '{}', { ...insecure, allowInsecure: false, headers: {} }));
      expect(['destination_blocked', 'invalid_url']).toContain(error.code);
      expect(error.retriable).toBe(false);
    }
    const rebinding = fakeResolver({ 'hooks.example.com': ['127.0.0.1'] });
    const error = await egressFailure(
      postPinned(`https://hooks.example.com:${echo.port}/`, '{}', {
        ...secure,
        resolver: rebinding,
        timeoutMs: 2000,
        headers: {},
      }),
    );
    expect(error.code).toBe('destination_blocked');
    expect(echo.hits).toHaveLength(seen);
  });

  it('connects to the checked address and keeps the Host header of the name', async () => {
    const pinned = fakeResolver({ 'pinned.test': ['127.0.0.1'] });
    const response = await postPinned(`http://pinned.test:${echo.port}/pinned`, 'ping', {
      ...insecure,
      resolver: pinned,
      headers: {},
    });
    expect(response.status).toBe(201);
    expect(response.address).toBe('127.0.0.1');
    expect(pinned.asked).toEqual(['pinned.test']);
    const hit = echo.hits.at(-1);
    expect(hit?.url).toBe('/pinned');
    expect(hit?.headers.host).toBe(`pinned.test:${echo.port}`);
  });

  it('speaks TLS to the checked address with the name as SNI, and maps handshake failure to tls_failed', async () => {
    const names: string[] = [];
    // No certificate at all: the handshake fails right after the server reads the client's SNI.
    const server = tls.createServer({
      SNICallback: (name, callback) => {
        names.push(name);
        callback(new Error('no certificate'), undefined);
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = portOf(server);
    try {
      const pinned = fakeResolver({ 'pinned.test': ['127.0.0.1'] });
      const error = await egressFailure(
        postPinned(`https://pinned.test:${port}/`, '{}', { ...insecure, resolver: pinned, headers: {} }),
      );
      expect(error.code).toBe('tls_failed');
      expect(error.retriable).toBe(true);
      expect(names).toEqual(['pinned.test']);
    } finally {
      await close(server);
    }
  });

  it('maps a plain-HTTP answer to an https request to tls_failed', async () => {
    const error = await egressFailure(
      postPinned(`https://127.0.0.1:${echo.port}/`, '{}', { ...insecure, headers: {} }),
    );
    expect(error.code).toBe('tls_failed');
  });
});
