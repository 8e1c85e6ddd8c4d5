/**
 * An agent's network policy, enforced the same way for its sandbox and for its network tools (`http_request`,
 * `web_browse`), through the real API with the `scripted` model. The "public" destination is a test server on a
 * public-range address in a network namespace (test/helpers/netns.ts) and names come from a local resolver given
 * to the deployment, so nothing here touches the internet: allowed names are reached (HTTP and HTTPS, TLS
 * verified), other names, addresses, ports and names resolving to loopback are refused, redirects are followed only
 * to allowed destinations, and the size, time and header limits hold. Skipped outside CI when the sandbox or the
 * namespace cannot be had; failed under CI=true.
 */
import { createServer } from 'node:http';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Resolver } from '../src/lib/egress.ts';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';
import { startTestNetwork, type TestNetwork } from './helpers/netns.ts';
import { describeSandbox, detection, inCi } from './helpers/sandbox.ts';

const network = detection.available ? await startTestNetwork() : 'the sandbox is unavailable';
if (typeof network === 'string' && !inCi && detection.available) {
  process.stdout.write(`\n[agentry] network tool tests skipped: ${network}\n\n`);
}
const describeNetwork: typeof describeSandbox =
  typeof network !== 'string' || inCi ? describeSandbox : describeSandbox.skip;
afterAll(() => {
  if (typeof network !== 'string') network.stop();
});

function testResolver(test: TestNetwork): Resolver {
  const table: Record<string, string[]> = {
    'allowed.example.test': [test.hostAddress],
    'a.wild.example.test': [test.hostAddress],
    'refused.example.test': [test.hostAddress],
    'registry.npmjs.org': [test.hostAddress],
    'evil.example.test': ['127.0.0.1'],
    // This machine's own (public-range) address on the link to the test host: a service of this host answers there.
    'self.example.test': [test.gatewayAddress],
  };
  return {
    async lookup(hostname) {
      const addresses = table[hostname];
      if (addresses === undefined) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
      return addresses.map((address) => ({ address, family: 4 as const }));
    },
  };
}

const internal = (name: string) => ({ kind: 'internal', name });
const call = (tool: string, args: Json) => `call ${tool} ${JSON.stringify(args)}`;
const reply = (message: Json) => message.response?.parts[0]?.text as string;
const get = (url: string, extra: Json = {}) => call('http_request', { method: 'GET', url, ...extra });
const POLICY = {
  allow_network_egress: true,
  domain_allowlist: 'none',
  additional_allowed_domains: ['allowed.example.test', '*.wild.example.test', 'evil.example.test', 'self.example.test'],
};

describeNetwork.each(dialects())('network policy for the sandbox and the network tools (%s)', (dialect) => {
  let test: TestNetwork;
  let h: Harness;
  const flow = flows(() => h);

  beforeAll(async () => {
    if (typeof network === 'string') throw new Error(`no test network: ${network}`);
    test = network;
    h = await createHarness(
      dialect,
      {
        AGENTRY_HTTP_MAX_RESPONSE_BYTES: '4096',
        AGENTRY_HTTP_MAX_REQUEST_BYTES: '2048',
        AGENTRY_HTTP_TIMEOUT_MS: '1000',
      },
      { agentNetwork: { resolver: testResolver(test), ca: test.certificate } },
    );
  });
  afterAll(async () => {
    await h?.close();
  });

  /** One turn of a new session; the reply's lines per tool, whatever order the calls ended in. */
  async function results(agentId: string, calls: string[]): Promise<string> {
    const { message } = await flow.turn(agentId, calls.join('\n'));
    expect(message.status, JSON.stringify(message)).toBe('completed');
    return reply(message);
  }

  it('lets the sandbox and http_request reach exactly the allowed domains', async () => {
    const agentId = await flow.createAgent({
      mcpServers: [internal('sandbox'), internal('http_client')],
      networkPolicy: POLICY,
    });
    // Session 1 writes the script (and the test host's certificate authority); later sessions run it.
    const script = '#!/bin/bash\nexec curl -sS --max-time 5 --cacert "$HOME/ca.pem" "$@"\n';
    const setup = await flow.turn(
      agentId,
      `${call('sandbox_write_file', { path: 'ca.pem', content: test.certificate })}\n${call('sandbox_write_file', { path: 'fetch.sh', content: script })}`,
    );
    expect(reply(setup.message)).toContain('sandbox_write_file: wrote');
    const curl = (url: string, flags = '') => call('sandbox_run', { command: `bash fetch.sh ${flags} ${url}` });

    const sandboxAllowed = await results(agentId, [curl('https://allowed.example.test/')]);
    expect(sandboxAllowed).toContain('--- stdout ---\nhello allowed.example.test via allowed.example.test');
    const sandboxWild = await results(agentId, [curl('http://a.wild.example.test/')]);
    expect(sandboxWild).toContain('--- stdout ---\nhello a.wild.example.test via http');
    const sandboxRefused = await results(agentId, [curl('https://refused.example.test/')]);
    expect(sandboxRefused).toMatch(/^sandbox_run: exit code: [1-9]/);
    expect(sandboxRefused).toContain('network refused: refused.example.test:443');
    expect(sandboxRefused).not.toContain('hello');
    // Without the proxy there is no route at all, even to the address the allowed name has.
    const direct = await results(agentId, [curl(`http://${test.hostAddress}/`, "--noproxy '*'")]);
    expect(direct).toMatch(/^sandbox_run: exit code: [1-9]/);
    expect(direct).not.toContain('hello');

    const tool = await results(agentId, [get('http://allowed.example.test/'), get('https://a.wild.example.test/')]);
    expect(tool).toContain('http_request: HTTP 200 OK\n');
    expect(tool).toContain('\n\nhello allowed.example.test via http');
    expect(tool).toContain('\n\nhello a.wild.example.test via a.wild.example.test');
    const refused = await results(agentId, [
      get('http://refused.example.test/'),
      get(`http://${test.hostAddress}/`),
      get('http://allowed.example.test:8080/'),
      get('http://evil.example.test/'),
      get('ftp://allowed.example.test/'),
    ]);
    expect(refused).toContain(
      "http_request: Error: refused: refused.example.test is not allowed by the agent's network policy",
    );
    expect(refused).toContain(`http_request: Error: refused: ${test.hostAddress} is not allowed`);
    expect(refused).toContain('http_request: Error: refused: port 8080 is not allowed (allowed: 80, 443)');
    expect(refused).toContain("http_request: Error: refused: evil.example.test resolves to this host's own address");
    expect(refused).toContain('http_request: Error: refused: only http and https URLs can be fetched');
    expect(refused).not.toContain('hello');
  });

  it('allows the package hosts under package_managers_only, and nothing else', async () => {
    const agentId = await flow.createAgent({
      mcpServers: [internal('http_client')],
      networkPolicy: { allow_network_egress: true, domain_allowlist: 'package_managers_only' },
    });
    const text = await results(agentId, [get('https://registry.npmjs.org/'), get('http://allowed.example.test/')]);
    expect(text).toContain('hello registry.npmjs.org via registry.npmjs.org');
    expect(text).toContain("Error: refused: allowed.example.test is not allowed by the agent's network policy");
  });

  it('gets no network at all with egress off, in the sandbox or through the tools', async () => {
    const agentId = await flow.createAgent({
      mcpServers: [internal('sandbox'), internal('http_client')],
      networkPolicy: { ...POLICY, allow_network_egress: false },
    });
    const text = await results(agentId, [
      call('sandbox_run', { command: 'curl -sS --max-time 3 http://allowed.example.test/; echo "curl=$?"' }),
      get('http://allowed.example.test/'),
    ]);
    expect(text).toMatch(/curl=[1-9]/);
    expect(text).toContain("http_request: Error: refused: the agent's network policy allows no network access");
    expect(text).not.toContain('hello');
  });

  it('follows redirects only to allowed destinations, checking each hop', async () => {
    const agentId = await flow.createAgent({ mcpServers: [internal('http_client')], networkPolicy: POLICY });
    const hop = (to: string, status = 302) =>
      get(`http://allowed.example.test/redirect?status=${status}&to=${encodeURIComponent(to)}`);
    const followed = await results(agentId, [hop('http://a.wild.example.test/', 301)]);
    expect(followed).toContain(
      'redirected: 301 http://allowed.example.test/redirect?status=301&to=http%3A%2F%2Fa.wild.example.test%2F -> http://a.wild.example.test/',
    );
    expect(followed).toContain('HTTP 200 OK');
    expect(followed).toContain('hello a.wild.example.test via http');

    const stopped = await results(agentId, [hop('http://refused.example.test/')]);
    expect(stopped).toContain('http_request: HTTP 302 Found');
    expect(stopped).toContain(
      "[redirect to http://refused.example.test/ not followed: refused.example.test is not allowed by the agent's network policy]",
    );
    expect(stopped).not.toContain('hello');
    // An allowed name that resolves to loopback: the guard refuses the hop when it connects.
    const guarded = await results(agentId, [hop('http://evil.example.test/')]);
    expect(guarded).toContain("http_request: Error: refused: evil.example.test resolves to this host's own address");
  });

  it("refuses this host's own addresses, directly and through a redirect, with http_request and web_browse", async () => {
    // A service of this host, on its (public-range) address on the link to the test host.
    const service = createServer((_request, response) => response.end('host service'));
    await new Promise<void>((resolve) => service.listen(80, test.gatewayAddress, resolve));
    try {
      expect(await (await fetch(`http://${test.gatewayAddress}/`)).text()).toBe('host service');
      const agentId = await flow.createAgent({
        mcpServers: [internal('http_client'), internal('web_search_&_browse')],
        networkPolicy: POLICY,
      });
      const redirect = `http://allowed.example.test/redirect?to=${encodeURIComponent('http://self.example.test/')}`;
      const text = await results(agentId, [
        get('http://self.example.test/'),
        get(redirect),
        call('web_browse', { url: 'http://self.example.test/' }),
        call('web_browse', { url: redirect }),
      ]);
      expect(text).not.toContain('host service');
      const refusals = text
        .split('\n')
        .filter((line) => line.includes("self.example.test resolves to this host's own"));
      expect(refusals, text).toHaveLength(4);
    } finally {
      await new Promise<void>((resolve) => service.close(() => resolve()));
    }
  });

  it('sends methods, headers and bodies, and bounds the request, the response and the time', async () => {
    const agentId = await flow.createAgent({ mcpServers: [internal('http_client')], networkPolicy: POLICY });
    const echoed = await results(agentId, [
      call('http_request', {
        method: 'post',
        url: 'http://allowed.example.test/echo',
        headers: { 'x-test': 'yes', 'content-type': 'application/json' },
        body: '{"hello":"world"}',
      }),
    ]);
    const body = JSON.parse(echoed.slice(echoed.indexOf('\n\n') + 2));
    expect(body).toMatchObject({
      method: 'POST',
      host: 'allowed.example.test',
      headers: { 'x-test': 'yes', 'content-type': 'application/json' },
      body: '{"hello":"world"}',
    });
    const bounded = await results(agentId, [get('http://allowed.example.test/big?bytes=100000')]);
    expect(bounded.match(/\n\n(x+)\n/)?.[1]?.length).toBe(4096);
    expect(bounded.endsWith('\n[body truncated: the first 4096 of 100000 bytes are shown]')).toBe(true);
    const small = await results(agentId, [get('http://allowed.example.test/big?bytes=100')]);
    expect(small.match(/\n\n(x+)$/)?.[1]?.length).toBe(100);
    expect(small.includes('truncated')).toBe(false);
    const refused = await results(agentId, [
      call('http_request', { method: 'PUT', url: 'http://allowed.example.test/echo', body: 'y'.repeat(3000) }),
      get('http://allowed.example.test/', { headers: { Host: 'refused.example.test' } }),
      get('http://allowed.example.test/slow?ms=3000'),
      call('http_request', { method: 'TRACE', url: 'http://allowed.example.test/' }),
    ]);
    expect(refused).toContain('http_request: Error: refused: the body is 3000 bytes; the limit is 2048');
    expect(refused).toContain('http_request: Error: refused: the Host header cannot be set');
    expect(refused).toContain('http_request: Error: no complete response within 1000 ms');
    expect(refused).toContain(
      'http_request: Error: method must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS',
    );
    const patient = await results(agentId, [get('http://allowed.example.test/slow?ms=200')]);
    expect(patient).toContain('\n\nfinally');
  });

  it('browses an allowed page as readable text with its links, and refuses other sites', async () => {
    const agentId = await flow.createAgent({
      mcpServers: [internal('web_search_&_browse')],
      networkPolicy: POLICY,
    });
    const { accepted, message } = await flow.turn(
      agentId,
      [
        call('web_browse', { url: 'https://allowed.example.test/article' }),
        call('web_browse', { url: 'https://refused.example.test/article' }),
      ].join('\n'),
    );
    expect(accepted.warnings.map((warning: Json) => warning.code)).toEqual(['tool_unavailable']);
    const text = reply(message);
    expect(text).toContain('web_browse: Title: Test Article\nURL: https://allowed.example.test/article\n\n');
    expect(text).toContain('# Sandboxes and proxies');
    expect(text).toContain('the article text comes back readable');
    expect(text).toContain('[the details](https://allowed.example.test/details)');
    expect(text).not.toContain('Footer text');
    expect(text).not.toContain('document.title');
    expect(text).toContain('Links:\n- Home: https://allowed.example.test/home\n');
    expect(text).toContain('- another site: https://elsewhere.example.test/page');
    expect(text).toContain(
      "web_browse: Error: refused: refused.example.test is not allowed by the agent's network policy",
    );
    // A page is read up to 5 MiB; the rest is never read, and the model is told.
    const big = await results(agentId, [call('web_browse', { url: 'https://allowed.example.test/big?bytes=5300000' })]);
    expect(big).toContain('[the page is larger than 5242880 bytes; only its start was read]');
  });
});
