/**
 * The sandbox's network, tried as an attacker would. With egress off nothing leaves (TCP, UDP, DNS, even when the
 * proxy variables are ignored); with egress on, the only way out is the per-run proxy, which reaches allowed names
 * (plain HTTP and HTTPS, TLS verified end to end) and refuses other names, private and loopback addresses, names
 * that resolve to them, this host's own addresses and unlisted ports. The "public" destination is a test server in
 * a network namespace on a public-range address (test/helpers/netns.ts); names come from a local resolver; nothing
 * here touches the internet.
 */
import { createSocket, type Socket } from 'node:dgram';
import net from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { NetworkPolicy } from '../src/domain/agents/agent-types.ts';
import type { Resolver } from '../src/lib/egress.ts';
import { createSandboxRuntime, type SandboxRuntime } from '../src/tools/sandbox/sandbox-runtime.ts';
import { waitUntil } from './helpers/fixtures.ts';
import { startTestNetwork, type TestNetwork } from './helpers/netns.ts';
import {
  describeSandbox,
  detection,
  inCi,
  onHost,
  scratchDataDir,
  silentLogger,
  testProjectIds,
} from './helpers/sandbox.ts';

const network = detection.available ? await startTestNetwork() : 'the sandbox is unavailable';
if (typeof network === 'string' && !inCi && detection.available) {
  process.stdout.write(`\n[agentry] sandbox network tests skipped: ${network}\n\n`);
}
const describeNetwork: typeof describeSandbox =
  typeof network !== 'string' || inCi ? describeSandbox : describeSandbox.skip;

const data = scratchDataDir('agentry-sandbox-net-');
const asked: string[] = [];
let rebindCalls = 0;

/** The local resolver: test names to the namespace's public-range address, `evil` to loopback. */
function testResolver(test: TestNetwork): Resolver {
  const table: Record<string, string[]> = {
    'allowed.example.test': [test.hostAddress],
    'a.wild.example.test': [test.hostAddress],
    'refused.example.test': [test.hostAddress],
    'registry.npmjs.org': [test.hostAddress],
    'evil.example.test': ['127.0.0.1'],
    'mixed.example.test': [test.hostAddress, '127.0.0.1'],
    'self.example.test': [test.gatewayAddress],
  };
  return {
    async lookup(hostname) {
      asked.push(hostname);
      // A rebinding name: public on its first answer, loopback on every later one.
      const addresses =
        hostname === 'rebind.example.test' ? [rebindCalls++ === 0 ? test.hostAddress : '127.0.0.1'] : table[hostname];
      if (addresses === undefined) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
      return addresses.map((address) => ({ address, family: 4 as const }));
    },
  };
}

const listed: NetworkPolicy = {
  allow_network_egress: true,
  domain_allowlist: 'none',
  additional_allowed_domains: [
    'allowed.example.test',
    '*.wild.example.test',
    'evil.example.test',
    'mixed.example.test',
    'rebind.example.test',
    'self.example.test',
  ],
  allow_public_traffic: false,
};
const everywhere: NetworkPolicy = { ...listed, domain_allowlist: 'all_domains', additional_allowed_domains: [] };
const packages: NetworkPolicy = {
  ...listed,
  domain_allowlist: 'package_managers_only',
  additional_allowed_domains: [],
};

describeNetwork('sandbox network', () => {
  let test: TestNetwork;
  let runtime: SandboxRuntime;
  let workspace: string;
  let tcpServer: net.Server;
  let tcpPort = 0;
  let udp: Socket;
  let dns: Socket;
  const received = { tcp: 0, udp: 0, dns: 0 };

  beforeAll(async () => {
    if (typeof network === 'string') throw new Error(`no test network: ${network}`);
    test = network;
    runtime = await createSandboxRuntime({
      dataDir: data.path,
      logger: silentLogger,
      allowInsecureDestinations: false,
      projectIdOf: testProjectIds(),
      detection,
      resolver: testResolver(test),
    });
    workspace = await runtime.workspaceFor('org1', 'agentNet');
    await runtime.writeFile(workspace, 'ca.pem', test.certificate);
    // Listeners on the host, on every interface: anything arriving here got out of the sandbox.
    tcpServer = net.createServer((socket) => {
      received.tcp += 1;
      socket.destroy();
    });
    await new Promise<void>((resolve) => tcpServer.listen(0, '0.0.0.0', resolve));
    const address = tcpServer.address();
    tcpPort = address !== null && typeof address === 'object' ? address.port : 0;
    udp = createSocket('udp4').on('message', () => {
      received.udp += 1;
    });
    await new Promise<void>((resolve) => udp.bind(0, '0.0.0.0', resolve));
    dns = createSocket('udp4').on('message', () => {
      received.dns += 1;
    });
    await new Promise<void>((resolve) => dns.bind(53, test.gatewayAddress, resolve));
  });
  afterAll(async () => {
    await runtime?.close();
    tcpServer?.close();
    udp?.close();
    dns?.close();
    if (typeof network !== 'string') network.stop();
    data.remove();
  });

  const sandbox = (command: string, policy: NetworkPolicy | null) =>
    runtime.run({ workspace, command, policy, timeoutMs: 30_000 });

  /** Every way out that ignores the proxy: TCP to the host and the test host, UDP, DNS. */
  function escapes(): string {
    const udpPort = udp.address().port;
    const attempt = (label: string, command: string) =>
      `if timeout 3 bash -c '${command}' 2>/dev/null; then echo "OPEN ${label}"; else echo "CLOSED ${label}"; fi`;
    return [
      attempt('tcp-host-loopback', `echo x > /dev/tcp/127.0.0.1/${tcpPort}`),
      attempt('tcp-host-address', `echo x > /dev/tcp/${test.gatewayAddress}/${tcpPort}`),
      attempt('tcp-public-host', `echo x > /dev/tcp/${test.hostAddress}/80`),
      attempt('curl-no-proxy', `curl -sf --noproxy "*" --max-time 2 http://${test.hostAddress}/`),
      `echo x > /dev/udp/127.0.0.1/${udpPort} 2>/dev/null; echo x > /dev/udp/${test.gatewayAddress}/${udpPort} 2>/dev/null`,
      `echo query > /dev/udp/${test.gatewayAddress}/53 2>/dev/null`,
      'getent hosts allowed.example.test >/dev/null 2>&1 && echo "OPEN dns" || echo "CLOSED dns"',
      'awk -F: \'NR > 2 { gsub(/ /, "", $1); print "IFACE", $1 }\' /proc/net/dev',
    ].join('\n');
  }

  it('with egress off, no TCP, UDP or DNS gets out; the same commands on the host do', async () => {
    // Positive control: from the host, each of these arrives.
    const before = { ...received };
    expect(onHost(`echo x > /dev/tcp/${test.gatewayAddress}/${tcpPort}`).status).toBe(0);
    expect(onHost(`curl -sf --noproxy "*" http://${test.hostAddress}/`).stdout).toContain('hello');
    onHost(
      `echo x > /dev/udp/${test.gatewayAddress}/${udp.address().port}; echo q > /dev/udp/${test.gatewayAddress}/53`,
    );
    await waitUntil(
      async () => (received.tcp > before.tcp && received.udp > before.udp && received.dns > before.dns ? true : null),
      { what: 'the TCP, UDP and DNS packets sent from the host', everyMs: 20 },
    );

    const counted = { ...received };
    const result = await sandbox(escapes(), null);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(result.stdout).not.toContain('OPEN');
    expect(result.stdout.match(/CLOSED/g)?.length).toBe(5);
    expect(result.stdout).toContain('IFACE lo');
    expect(result.stdout.match(/IFACE/g)?.length).toBe(1);
    expect(received).toEqual(counted);
    expect(result.egress).toBeNull();
  });

  it('with egress on, a process that ignores the proxy still has no route; the proxy does', async () => {
    const counted = { ...received };
    const result = await sandbox(`${escapes()}\ncurl -sS --max-time 10 http://allowed.example.test/`, listed);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(result.stdout).not.toContain('OPEN');
    expect(result.stdout).toContain('hello allowed.example.test via http');
    expect(received).toEqual(counted);
  });

  it('reaches an allowed name over HTTP and HTTPS through the proxy, TLS verified by name', async () => {
    const result = await sandbox(
      [
        'env | grep -i _proxy= | sort',
        'curl -sS --max-time 10 http://allowed.example.test/',
        'curl -sS --max-time 10 --cacert ca.pem https://allowed.example.test/',
        'curl -sS --max-time 10 --cacert ca.pem https://a.wild.example.test/',
      ].join('\n'),
      listed,
    );
    expect(result.stdout).toContain('HTTPS_PROXY=http://127.0.0.1:3128');
    expect(result.stdout).toContain('hello allowed.example.test via http\n');
    expect(result.stdout).toContain('hello allowed.example.test via allowed.example.test\n');
    expect(result.stdout).toContain('hello a.wild.example.test via a.wild.example.test\n');
    expect(result.egress?.allowed).toEqual(
      expect.arrayContaining(['allowed.example.test:80', 'allowed.example.test:443', 'a.wild.example.test:443']),
    );
  });

  it('answers 403 for a name outside the policy, over HTTP and CONNECT', async () => {
    const result = await sandbox(
      [
        'curl -s --max-time 10 http://refused.example.test/',
        'curl -s --max-time 10 -o /dev/null -w "connect=%{http_connect}\\n" --cacert ca.pem https://refused.example.test/',
        // Positive control in the same sandbox: the allowed name works.
        'curl -s --max-time 10 http://allowed.example.test/',
      ].join('\n'),
      listed,
    );
    expect(result.stdout).toContain("refused.example.test is not allowed by the agent's network policy");
    expect(result.stdout).toContain('connect=403');
    expect(result.stdout).toContain('hello allowed.example.test');
    expect(result.egress?.refused).toEqual(['refused.example.test:80', 'refused.example.test:443']);
    expect(asked).not.toContain('refused.example.test');
  });

  it('refuses private and loopback addresses, names resolving to them, and this host itself', async () => {
    const status = (url: string, extra = '') =>
      `echo "${url} $(curl -s --max-time 10 ${extra} -o /dev/null -w '%{http_code}/%{http_connect}' ${url})"`;
    const result = await sandbox(
      [
        status('http://10.20.30.40/'),
        status('http://169.254.169.254/latest/meta-data/'),
        status('https://127.0.0.1/', '-k --noproxy ""'),
        status('http://localhost/', '--noproxy ""'),
        status('http://evil.example.test/'),
        status('http://mixed.example.test/'),
        status(`http://${test.gatewayAddress}/`),
        status('http://self.example.test/'),
        // Positive control: the public test host, by address and by name.
        status(`http://${test.hostAddress}/`),
        status('http://allowed.example.test/'),
      ].join('\n'),
      everywhere,
    );
    for (const url of [
      'http://10.20.30.40/ 403',
      'http://169.254.169.254/latest/meta-data/ 403',
      'https://127.0.0.1/ 000/403',
      'http://localhost/ 403',
      'http://evil.example.test/ 403',
      'http://mixed.example.test/ 403',
      `http://${test.gatewayAddress}/ 403`,
      'http://self.example.test/ 403',
      `http://${test.hostAddress}/ 200`,
      'http://allowed.example.test/ 200',
    ]) {
      expect(result.stdout, url).toContain(url);
    }
    expect(asked).toEqual(expect.arrayContaining(['evil.example.test', 'mixed.example.test']));
  });

  it('package_managers_only reaches a package registry name and nothing else', async () => {
    const result = await sandbox(
      [
        'curl -s --max-time 10 --cacert ca.pem https://registry.npmjs.org/',
        'curl -s --max-time 10 -o /dev/null -w "%{http_code}\\n" http://allowed.example.test/',
      ].join('\n'),
      packages,
    );
    expect(result.stdout).toContain('hello registry.npmjs.org via registry.npmjs.org');
    expect(result.stdout).toContain('403');
  });

  it('allows ports 80 and 443 only, unless configured', async () => {
    const port8080 = 'curl -s --max-time 10 http://allowed.example.test:8080/';
    expect((await sandbox(port8080, listed)).stdout).toContain('port 8080 is not allowed');
    const wider = await createSandboxRuntime({
      dataDir: data.path,
      logger: silentLogger,
      allowInsecureDestinations: false,
      projectIdOf: testProjectIds(),
      detection,
      resolver: testResolver(test),
      egressPorts: [80, 443, 8080],
    });
    const result = await wider.run({ workspace, command: port8080, policy: listed });
    expect(result.stdout).toContain('hello allowed.example.test:8080 via http');
  });

  it('resolves a name once and connects to exactly the address it checked', async () => {
    rebindCalls = 0;
    const result = await sandbox(
      [
        'curl -s --max-time 10 http://rebind.example.test/',
        'curl -s --max-time 10 -o /dev/null -w "second=%{http_code}\\n" http://rebind.example.test/',
      ].join('\n'),
      listed,
    );
    // The first request was checked against (and sent to) the public answer; the next answer is loopback: refused.
    expect(result.stdout).toContain('hello rebind.example.test via http');
    expect(result.stdout).toContain('second=403');
    expect(rebindCalls).toBe(2);
  });
});
