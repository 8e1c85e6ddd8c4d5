/**
 * A public-looking test host on this machine, for the egress proxy tests: the egress guard refuses loopback and
 * private addresses, so a realistic destination needs a public-range address. A network namespace joined to the
 * host by a veth pair holds it (`1.2.N.2`, with `1.2.N.1` on the host's side, N claimed so that parallel runs do
 * not collide), and a small HTTP/HTTPS server runs inside it on ports 80, 443 and 8080 (its routes: SERVER_SCRIPT).
 * Needs root and `ip`; `start` returns why not otherwise. `stop` removes everything (deleting the namespace removes the veth pair).
 */
import { type ChildProcess, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnChild } from './children.ts';

export interface TestNetwork {
  /** The test host's address inside the namespace. */
  hostAddress: string;
  /** This machine's own address on the veth link (a non-loopback address of the host). */
  gatewayAddress: string;
  /** PEM of the self-signed certificate the HTTPS server presents (for its names, see SERVER_NAMES). */
  certificate: string;
  stop(): void;
}

/** Names the HTTPS certificate is valid for. */
export const SERVER_NAMES = [
  'allowed.example.test',
  '*.wild.example.test',
  'registry.npmjs.org',
  'rebind.example.test',
];

/**
 * The test host's routes: `/redirect?to=<url>&status=<3xx>` redirects, `/article` is an HTML page with a title,
 * navigation, an article and links, `/nested?depth=N` is a page of N `<div>`s nested in each other, `/big?bytes=N`
 * is N bytes of text, `/slow?ms=N` answers after N ms, `/echo`
 * answers the request it got as JSON; anything else is one line naming the host and the TLS server name.
 */
const SERVER_SCRIPT = `
import http from 'node:http';
import https from 'node:https';
import { readFileSync } from 'node:fs';
const ARTICLE = '<!doctype html><html><head><title>Test Article</title></head><body>' +
  '<nav><a href="/home">Home</a> <a href="/about">About</a></nav>' +
  '<article><h1>Sandboxes and proxies</h1>' +
  '<p>' + 'An agent reads this page through its network policy, and the article text comes back readable. '.repeat(8) + '</p>' +
  '<p>See <a href="/details">the details</a> or <a href="https://elsewhere.example.test/page">another site</a>.</p>' +
  '<p>' + 'Navigation and scripts are left out of what the model reads. '.repeat(8) + '</p></article>' +
  '<script>document.title = "scripted"</script><footer>Footer text</footer></body></html>';
const handler = (request, response) => {
  const url = new URL(request.url, 'http://test');
  if (url.pathname === '/redirect') {
    response.writeHead(Number(url.searchParams.get('status') || 302), { location: url.searchParams.get('to') || '/' });
    return response.end();
  }
  if (url.pathname === '/article') {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    return response.end(ARTICLE);
  }
  if (url.pathname === '/nested') {
    const depth = Number(url.searchParams.get('depth') || 0);
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    return response.end('<!doctype html><html><head><title>Nested</title></head><body>' + '<div>'.repeat(depth) +
      'deep text' + '</div>'.repeat(depth) + '</body></html>');
  }
  if (url.pathname === '/big') {
    const bytes = Number(url.searchParams.get('bytes') || 0);
    response.writeHead(200, { 'content-type': 'text/plain', 'content-length': bytes });
    return response.end('x'.repeat(bytes));
  }
  if (url.pathname === '/slow') {
    setTimeout(() => response.end('finally\\n'), Number(url.searchParams.get('ms') || 0));
    return;
  }
  if (url.pathname === '/echo') {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ method: request.method, host: request.headers.host, headers: request.headers,
        body: Buffer.concat(chunks).toString() }));
    });
    return;
  }
  response.end(\`hello \${request.headers.host} via \${request.socket.servername || 'http'}\\n\`);
};
const tls = { key: readFileSync(process.argv[2]), cert: readFileSync(process.argv[3]) };
let listening = 0;
const ready = () => { if (++listening === 3) process.stdout.write('ready\\n'); };
http.createServer(handler).listen(80, '0.0.0.0', ready);
http.createServer(handler).listen(8080, '0.0.0.0', ready);
https.createServer(tls, handler).listen(443, '0.0.0.0', ready);
`;

function run(args: string[]): string | null {
  const result = spawnSync(args[0] ?? 'false', args.slice(1), { encoding: 'utf8', timeout: 20_000 });
  if (result.status === 0) return null;
  return `${args.join(' ')}: ${(result.stderr || result.error?.message || `exit ${result.status}`).trim()}`;
}

/**
 * Picks a `1.2.N.0/30` link no other run on this machine uses: N is skipped while any interface has an address
 * in it (a concurrent run, or one killed before it cleaned up), and the namespace named after N is the claim, since
 * `ip netns add` fails when it exists.
 */
function claimOctet(): { octet: number; namespace: string } | string {
  let problem = 'no free 1.2.N.0/30 link';
  for (let attempt = 0; attempt < 40; attempt++) {
    const octet = 1 + Math.floor(Math.random() * 250);
    const addresses = spawnSync('ip', ['-o', '-4', 'addr', 'show'], { encoding: 'utf8' }).stdout ?? '';
    if (addresses.includes(` 1.2.${octet}.`)) continue;
    const namespace = `agt-net-${octet}`;
    const failed = run(['ip', 'netns', 'add', namespace]);
    if (failed === null) return { octet, namespace };
    problem = failed;
  }
  return problem;
}

export async function startTestNetwork(): Promise<TestNetwork | string> {
  if (process.getuid?.() !== 0) return 'network namespaces need root';
  if (run(['ip', '-V']) !== null) return 'the ip command (iproute2) is not installed';
  if (run(['openssl', 'version']) !== null) return 'openssl is not installed (needed for the test certificate)';
  const claimed = claimOctet();
  if (typeof claimed === 'string') return claimed;
  const { octet, namespace } = claimed;
  const tag = Math.random().toString(16).slice(2, 8);
  const hostSide = `vh${tag}`;
  const nsSide = `vp${tag}`;
  const gatewayAddress = `1.2.${octet}.1`;
  const hostAddress = `1.2.${octet}.2`;
  const directory = mkdtempSync(join(tmpdir(), 'agentry-netns-'));
  let server: ChildProcess | null = null;
  const stop = () => {
    server?.kill('SIGKILL');
    run(['ip', 'netns', 'del', namespace]);
    run(['ip', 'link', 'del', hostSide]);
    rmSync(directory, { recursive: true, force: true });
  };
  const steps = [
    ['ip', 'link', 'add', hostSide, 'type', 'veth', 'peer', 'name', nsSide],
    ['ip', 'link', 'set', nsSide, 'netns', namespace],
    ['ip', 'addr', 'add', `${gatewayAddress}/30`, 'dev', hostSide],
    ['ip', 'link', 'set', hostSide, 'up'],
    ['ip', '-n', namespace, 'addr', 'add', `${hostAddress}/30`, 'dev', nsSide],
    ['ip', '-n', namespace, 'link', 'set', nsSide, 'up'],
    ['ip', '-n', namespace, 'link', 'set', 'lo', 'up'],
    [
      'openssl',
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=allowed.example.test',
      '-addext',
      `subjectAltName=${SERVER_NAMES.map((name) => `DNS:${name}`).join(',')}`,
      '-keyout',
      join(directory, 'key.pem'),
      '-out',
      join(directory, 'cert.pem'),
    ],
  ];
  for (const step of steps) {
    const problem = run(step);
    if (problem !== null) {
      stop();
      return problem;
    }
  }
  const script = join(directory, 'server.mjs');
  writeFileSync(script, SERVER_SCRIPT);
  const child = spawnChild(
    'ip',
    ['netns', 'exec', namespace, process.execPath, script, join(directory, 'key.pem'), join(directory, 'cert.pem')],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  server = child;
  const ready = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), 15_000);
    child.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('ready')) {
        clearTimeout(timer);
        resolve(true);
      }
    });
    child.once('exit', () => resolve(false));
  });
  if (!ready) {
    stop();
    return 'the test server in the network namespace did not start';
  }
  return { hostAddress, gatewayAddress, certificate: readFileSync(join(directory, 'cert.pem'), 'utf8'), stop };
}
