/**
 * A public-looking test host on this machine, for the egress proxy tests: the egress guard refuses loopback and
 * private addresses, so a realistic destination needs a public-range address. A network namespace joined to the
 * host by a veth pair holds it (`1.2.N.2`, with `1.2.N.1` on the host's side, N random so that parallel runs do
 * not collide), and a small HTTP/HTTPS server runs inside it on ports 80, 443 and 8080. Needs root and `ip`;
 * `start` returns why not otherwise. `stop` removes everything (deleting the namespace removes the veth pair).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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

const SERVER_SCRIPT = `
import http from 'node:http';
import https from 'node:https';
import { readFileSync } from 'node:fs';
const handler = (request, response) =>
  response.end(\`hello \${request.headers.host} via \${request.socket.servername || 'http'}\\n\`);
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

export async function startTestNetwork(): Promise<TestNetwork | string> {
  if (process.getuid?.() !== 0) return 'network namespaces need root';
  if (run(['ip', '-V']) !== null) return 'the ip command (iproute2) is not installed';
  if (run(['openssl', 'version']) !== null) return 'openssl is not installed (needed for the test certificate)';
  const tag = Math.random().toString(16).slice(2, 8);
  const octet = 1 + Math.floor(Math.random() * 250);
  const namespace = `agt-${tag}`;
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
    ['ip', 'netns', 'add', namespace],
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
  const child = spawn(
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
