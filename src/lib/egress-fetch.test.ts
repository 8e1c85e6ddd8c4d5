import http from 'node:http';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EgressError, type Resolver } from './egress.ts';
import { createEgressFetch, type EgressFetch } from './egress-fetch.ts';

/** A resolver that answers from `table`, one answer per lookup in turn (the last one repeats). */
function scriptedResolver(table: Record<string, string[][]>): Resolver & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    async lookup(hostname) {
      const answers = table[hostname];
      const answer = answers?.[Math.min(asked.filter((name) => name === hostname).length, answers.length - 1)];
      asked.push(hostname);
      if (answer === undefined)
        throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
      return answer.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    },
  };
}

async function egressFailure(promise: Promise<unknown>): Promise<EgressError> {
  const error = await promise.then(
    () => null,
    (reason: unknown) => reason,
  );
  if (!(error instanceof EgressError)) throw new Error(`expected an EgressError, got ${String(error)}`);
  return error;
}

function portOf(server: http.Server | tls.Server): number {
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('not listening on TCP');
  return address.port;
}

interface Hit {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

const hits: Hit[] = [];
let port = 0;
/** /stream sends its first event, and the rest only once this is called (when the test has read the first). */
let finishStream = () => {};
const firstEventRead = new Promise<void>((resolve) => {
  finishStream = resolve;
});
const server = http.createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    const url = request.url ?? '/';
    hits.push({ method: request.method ?? '', url, headers: request.headers, body: Buffer.concat(chunks).toString() });
    if (url === '/redirect') {
      response.writeHead(302, { location: `http://127.0.0.1:${port}/target` }).end();
    } else if (url === '/stream') {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write('data: 0\n\n');
      void firstEventRead.then(() => response.end('data: 1\n\ndata: 2\n\n'));
    } else if (url === '/silent') {
      // Never answers.
    } else {
      response.writeHead(200, { 'content-type': 'application/json', 'x-seen': request.method ?? '' });
      response.end(JSON.stringify({ ok: true }));
    }
  });
});

const insecure: EgressFetch = createEgressFetch({ allowInsecure: true });
const created: EgressFetch[] = [insecure];
function guarded(options: Parameters<typeof createEgressFetch>[0]): EgressFetch {
  const fetch = createEgressFetch(options);
  created.push(fetch);
  return fetch;
}

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = portOf(server);
});

afterAll(async () => {
  await Promise.all(created.map((fetch) => fetch.close()));
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe('createEgressFetch refusals', () => {
  it.each([
    ['loopback', 'https://127.0.0.1/mcp'],
    ['10/8', 'https://10.1.2.3/mcp'],
    ['cloud metadata', 'https://169.254.169.254/latest/meta-data'],
    ['CGNAT', 'https://100.64.0.1/'],
    ['IPv6 loopback', 'https://[::1]/'],
    ['IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]/'],
    ['decimal loopback', 'https://2130706433/'],
  ])('refuses the literal %s address %s before connecting', async (_label, url) => {
    const resolver = scriptedResolver({});
    const error = await egressFailure(guarded({ allowInsecure: false, resolver })(url));
    expect(error.code).toBe('destination_blocked');
    expect(error.retriable).toBe(false);
    expect(resolver.asked).toEqual([]);
  });

  it.each([
    ['a private answer', ['10.0.0.5']],
    ['the metadata service', ['169.254.169.254']],
    ['one private answer among public ones', ['93.184.215.14', '192.168.0.7']],
    ['an IPv4-mapped loopback', ['::ffff:127.0.0.1']],
    ['loopback', ['127.0.0.1']],
  ])('refuses a name resolving to %s, and nothing is sent', async (_label, answer) => {
    const resolver = scriptedResolver({ 'mcp.example.com': [answer] });
    const seen = hits.length;
    const error = await egressFailure(
      guarded({ allowInsecure: false, resolver })(`https://mcp.example.com:${port}/mcp`, {
        method: 'POST',
        body: '{}',
      }),
    );
    expect(error.code).toBe('destination_blocked');
    expect(error.message).toContain('mcp.example.com');
    expect(resolver.asked).toEqual(['mcp.example.com']);
    expect(hits).toHaveLength(seen);
  });

  it('refuses plain http, internal names and credentials without resolving anything', async () => {
    const resolver = scriptedResolver({ 'mcp.example.com': [['93.184.215.14']], localhost: [['8.8.8.8']] });
    const fetch = guarded({ allowInsecure: false, resolver });
    expect((await egressFailure(fetch('http://mcp.example.com/'))).code).toBe('invalid_url');
    expect((await egressFailure(fetch('https://localhost/'))).code).toBe('destination_blocked');
    expect((await egressFailure(fetch('https://user:pw@mcp.example.com/'))).code).toBe('invalid_url');
    expect(resolver.asked).toEqual([]);
  });
});

describe('createEgressFetch requests', () => {
  it('sends method, headers and body and returns the answer as a Response', async () => {
    const response = await insecure(`http://127.0.0.1:${port}/echo?x=1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer t' },
      body: '{"a":1}',
    });
    expect(response).toBeInstanceOf(Response);
    expect(response.status).toBe(200);
    expect(response.headers.get('x-seen')).toBe('POST');
    expect(await response.json()).toEqual({ ok: true });
    const hit = hits.at(-1);
    expect(hit?.url).toBe('/echo?x=1');
    expect(hit?.body).toBe('{"a":1}');
    expect(hit?.headers.authorization).toBe('Bearer t');
    expect(hit?.headers['content-length']).toBe('7');
  });

  it('accepts a Request as input', async () => {
    const request = new Request(`http://127.0.0.1:${port}/request`, { method: 'PUT', body: 'payload' });
    const response = await insecure(request);
    expect(response.status).toBe(200);
    expect(hits.at(-1)).toMatchObject({ method: 'PUT', url: '/request', body: 'payload' });
  });

  it('resolves once and connects to the checked address, keeping the name as Host', async () => {
    // The second answer would point elsewhere: it must never be asked for.
    const resolver = scriptedResolver({ 'pinned.test': [['127.0.0.1'], ['192.0.2.1']] });
    const response = await guarded({ allowInsecure: true, resolver })(`http://pinned.test:${port}/pinned`, {
      method: 'POST',
      body: 'ping',
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ ok: true });
    expect(hits.at(-1)).toMatchObject({ url: '/pinned', body: 'ping' });
    expect(hits.at(-1)?.headers.host).toBe(`pinned.test:${port}`);
    expect(resolver.asked).toEqual(['pinned.test']);
  });

  it('returns a redirect as is and never follows it; redirect: error rejects it', async () => {
    const seen = hits.length;
    const response = await insecure(`http://127.0.0.1:${port}/redirect`);
    expect(response.status).toBe(302);
    expect(response.headers.get('location')).toBe(`http://127.0.0.1:${port}/target`);
    expect(hits.slice(seen).map((hit) => hit.url)).toEqual(['/redirect']);
    await expect(insecure(`http://127.0.0.1:${port}/redirect`, { redirect: 'error' })).rejects.toThrow(TypeError);
    expect(hits.some((hit) => hit.url === '/target')).toBe(false);
  });

  it('streams the response body as it arrives', async () => {
    const response = await insecure(`http://127.0.0.1:${port}/stream`);
    const reader = response.body?.getReader();
    if (reader === undefined) throw new Error('no body');
    // The server sends the rest only after this read: a client that waited for the whole body would never get here.
    const first = await Promise.race([
      reader.read(),
      new Promise<never>((_, reject) => {
        setTimeout(() => reject(new Error('the first event never arrived on its own')), 60_000).unref();
      }),
    ]);
    finishStream();
    expect(new TextDecoder().decode(first.value)).toBe('data: 0\n\n');
    let rest = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    expect(rest).toBe('data: 1\n\ndata: 2\n\n');
  });

  it('honours an abort signal before and during the request', async () => {
    const before = insecure(`http://127.0.0.1:${port}/silent`, { signal: AbortSignal.abort(new Error('stop')) });
    await expect(before).rejects.toThrow('stop');
    const seen = hits.length;
    const started = performance.now();
    const during = insecure(`http://127.0.0.1:${port}/silent`, {
      method: 'POST',
      body: 'x',
      signal: AbortSignal.timeout(150),
    });
    await expect(during).rejects.toMatchObject({ name: 'TimeoutError' });
    // The silent server never answers: only the signal ends the request (the bound is room for a busy machine).
    expect(performance.now() - started).toBeLessThan(30_000);
    expect(hits).toHaveLength(seen + 1);
  });

  it('bounds name resolution with connectTimeoutMs', async () => {
    const hanging: Resolver = { lookup: () => new Promise(() => undefined) };
    const started = performance.now();
    const error = await egressFailure(
      guarded({ allowInsecure: false, resolver: hanging, connectTimeoutMs: 200 })('https://slow.example.com/'),
    );
    expect(error.code).toBe('timeout');
    // The lookup never answers: only connectTimeoutMs ends it (the bound is room for a busy machine).
    expect(performance.now() - started).toBeLessThan(30_000);
  });

  it('maps a closed port to connect_failed and an unknown name to dns_failed', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const closedPort = portOf(closed);
    await new Promise((resolve) => closed.close(resolve));
    const refused = await egressFailure(insecure(`http://127.0.0.1:${closedPort}/`));
    expect(refused.code).toBe('connect_failed');
    expect(refused.retriable).toBe(true);
    const unknown = await egressFailure(
      guarded({ allowInsecure: false, resolver: scriptedResolver({}) })('https://nowhere.example.com/'),
    );
    expect(unknown.code).toBe('dns_failed');
  });

  it('speaks TLS to the checked address with the name as SNI', async () => {
    const names: string[] = [];
    const tlsServer = tls.createServer({
      SNICallback: (name, callback) => {
        names.push(name);
        callback(new Error('no certificate'), undefined);
      },
    });
    await new Promise<void>((resolve) => tlsServer.listen(0, '127.0.0.1', resolve));
    try {
      const resolver = scriptedResolver({ 'pinned.test': [['127.0.0.1']] });
      const error = await egressFailure(
        guarded({ allowInsecure: true, resolver })(`https://pinned.test:${portOf(tlsServer)}/`),
      );
      expect(error.code).toBe('tls_failed');
      expect(names).toEqual(['pinned.test']);
    } finally {
      await new Promise((resolve) => tlsServer.close(resolve));
    }
  });
});
